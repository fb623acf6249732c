#!/usr/bin/env bash
# Server CPU per ingest answer, two builds in turn: the way to tell whether a change costs ingest
# anything. wrk (Debian's `wrk`) drives one build at a time from one core while the server runs on
# the other (taskset), so the load generator takes little CPU and none from the server; the server's
# user+system CPU comes from /proc/<pid>/stat. Each run gets a fresh database.
#
#   bench/ingest-cpu/run.sh [-n PAIRS] [-d SECONDS] [-f deploy|put] [-p] OLD_CHECKOUT NEW_CHECKOUT
#
# The checkouts must be built (`npm run build`). -p uses a fresh PostgreSQL database per run
# (postgres://postgres@127.0.0.1:5432) instead of a SQLite file. Prints one line per run and the
# medians. Only 127.0.0.1; every run stops by itself after its warm-up and measured seconds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pairs=4 seconds=8 form=deploy pg=""
while getopts "n:d:f:p" opt; do
  case $opt in
    n) pairs=$OPTARG ;;
    d) seconds=$OPTARG ;;
    f) form=$OPTARG ;;
    p) pg=1 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: $0 [-n PAIRS] [-d SECONDS] [-f deploy|put] [-p] OLD NEW" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 2; }
[ -f "$here/$form.lua" ] || { echo "-f takes deploy or put" >&2; exit 2; }
PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres
port=47${RANDOM:0:3}
results="$(mktemp)"
trap 'rm -f "$results"' EXIT

one() {
  local dir=$1 data db url pid key t0 t1 out reqs
  data="$(mktemp -d)"
  if [ -n "$pg" ]; then
    db="ingest_cpu_$$_$RANDOM"
    psql -q "$PG_ADMIN" -c "create database $db"
    url="postgres://postgres@127.0.0.1:5432/$db"
  else
    url="sqlite://$data/shiplog.db"
  fi
  (
    cd "$dir"
    export DATABASE_URL="$url" SHIPLOG_SECRET=ingest-cpu-bench-secret-0123456789abcdef \
      SHIPLOG_RATE_LIMIT=10000000 LOG_LEVEL=warn PORT=$port
    echo "bench password 0123" | node bin/shiplog.js users create --account Bench --email b@example.com \
      --password-stdin >/dev/null 2>&1
    key="$(node bin/shiplog.js keys create --account Bench --name bench)"
    taskset -c 1 node bin/shiplog.js serve >"$data/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
    KEY=$key taskset -c 0 wrk -t1 -c50 -d3 -s "$here/$form.lua" "http://127.0.0.1:$port" >/dev/null
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out="$(KEY=$key taskset -c 0 wrk -t1 -c50 -d"$seconds" -s "$here/$form.lua" "http://127.0.0.1:$port")"
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"
    wait "$pid" || true
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    if echo "$out" | grep -q Non-2xx; then echo "non-2xx answers in $dir: $out" >&2; exit 1; fi
    echo "$dir $reqs $(((t1 - t0) * 1000000 / $(getconf CLK_TCK) / reqs))"
  )
  rm -rf "$data"
  if [ -n "$pg" ]; then psql -q "$PG_ADMIN" -c "drop database $db with (force)"; fi
}

for i in $(seq "$pairs"); do
  for dir in "$1" "$2"; do
    line="$(one "$dir")"
    echo "$line" >>"$results"
    read -r d reqs us <<<"$line"
    printf '%-40s %8d answers %8d/s %5d µs server CPU each\n' "$d" "$reqs" $((reqs / seconds)) "$us"
  done
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for dir in "$1" "$2"; do
  printf 'median %-33s %s µs server CPU per %s answer\n' "$dir" "$(awk -v d="$dir" '$1 == d {print $3}' "$results" | median)" "$form"
done
