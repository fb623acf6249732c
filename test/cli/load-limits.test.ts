// `shiplog load` on hostile line lengths: a gzip of a few KB that holds one line of tens of MiB is
// refused at the line limit, quickly and in bounded memory, naming the line. Both databases.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { MAX_LINE_BYTES } from '../../src/domain/operations/dump.js'
import { freshDatabaseUrl } from '../helper.js'
import { assertBuilt, processEnv, REPO_ROOT, runCli, SHIPLOG_BIN } from '../support/processes.js'

const MiB = 1024 * 1024
/** Far above what a linear refusal needs; the quadratic reader took 48 s of CPU on the 32 MiB line. */
const GENEROUS_MS = 20_000

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-load-limits-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Peak resident memory of a process so far (VmHWM), in bytes; null where /proc is not there. */
function peakRss(pid: number): number | null {
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
    return kb ? Number(kb) * 1024 : null
  } catch {
    return null
  }
}

interface Measured {
  code: number | null
  stderr: string
  ms: number
  peakRss: number | null
}

/** Runs `shiplog load FILE`, sampling the child's peak RSS until it exits. */
async function measuredLoad(t: TestContext, databaseUrl: string, file: string): Promise<Measured> {
  assertBuilt()
  const started = performance.now()
  const child = spawn(process.execPath, [SHIPLOG_BIN, 'load', file], {
    cwd: REPO_ROOT,
    env: processEnv(databaseUrl),
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk
  })
  let peak: number | null = null
  const sampler = setInterval(() => {
    const now = child.pid === undefined ? null : peakRss(child.pid)
    if (now !== null) peak = Math.max(peak ?? 0, now)
  }, 20)
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL')
        reject(new Error(`shiplog load ${file} still ran after ${GENEROUS_MS} ms`))
      }, GENEROUS_MS)
      child.once('error', reject)
      child.once('close', (status) => {
        clearTimeout(timer)
        resolve(status)
      })
    })
    return { code, stderr, ms: Math.round(performance.now() - started), peakRss: peak }
  } finally {
    clearInterval(sampler)
  }
}

test('one 32 MiB line in a 32 KB gzip is refused at the line limit, quickly and in bounded memory', {
  timeout: 60_000,
}, async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'one-line.ndjson.gz')
  const line = `["${'a'.repeat(32 * MiB)}"]`
  writeFileSync(file, gzipSync(line, { level: 9 }))
  t.diagnostic(`the gzip is ${Math.round(readFileSync(file).length / 1024)} KB`)
  const target = await freshDatabaseUrl(t)
  const result = await measuredLoad(t, target, file)
  t.diagnostic(`refused in ${result.ms} ms, peak RSS ${Math.round((result.peakRss ?? 0) / MiB)} MiB`)
  assert.equal(result.code, 1, result.stderr)
  assert.equal(
    result.stderr,
    `shiplog: line 1: longer than ${MAX_LINE_BYTES / MiB} MiB, the most a dump line holds (the file is corrupted, or not a Shiplog dump)\n`,
  )
  // The line limit plus Node's own: far below the 400 MB the quadratic reader reached.
  if (result.peakRss !== null) assert.ok(result.peakRss < 200 * MiB, `peak RSS ${result.peakRss}`)
})

test('a line over the limit after a good header is refused with its line number, and loads nothing', {
  timeout: 60_000,
}, async (t) => {
  const dir = tempDir(t)
  // A real header (this Shiplog's schema) from the dump of an empty installation.
  const empty = await freshDatabaseUrl(t)
  assert.equal((await runCli(t, ['migrate'], { env: processEnv(empty) })).code, 0)
  const good = join(dir, 'empty.ndjson')
  const dumped = await runCli(t, ['dump', '--out', good], { env: processEnv(empty) })
  assert.equal(dumped.code, 0, dumped.stderr)
  const lines = readFileSync(good, 'utf8').trimEnd().split('\n')
  const eventsAt = lines.findIndex((l) => l.startsWith('{"table":"events"'))
  assert.ok(eventsAt > 0)
  // One byte over the limit, "\r\n"-ended like a file saved on Windows.
  const long = `["${'é'.repeat(MAX_LINE_BYTES / 2)}"]`
  const file = join(dir, 'long-row.ndjson')
  writeFileSync(file, [...lines.slice(0, eventsAt + 1), long, ...lines.slice(eventsAt + 1)].join('\r\n'))
  const target = await freshDatabaseUrl(t)
  const result = await measuredLoad(t, target, file)
  t.diagnostic(`refused in ${result.ms} ms`)
  assert.equal(result.code, 1, result.stderr)
  assert.match(result.stderr, new RegExp(`^shiplog: line ${eventsAt + 2}: longer than \\d+ MiB`))
  assert.equal(result.stderr.trim().split('\n').length, 1)
  assert.ok(existsSync(good))
  // A line at the limit exactly is a line like any other: here a row of the wrong shape.
  const atLimit = `[${'1'.repeat(MAX_LINE_BYTES - 2)}]`
  writeFileSync(file, [...lines.slice(0, eventsAt + 1), atLimit, ...lines.slice(eventsAt + 1)].join('\n'))
  const fits = await measuredLoad(t, await freshDatabaseUrl(t), file)
  assert.equal(fits.code, 1, fits.stderr)
  assert.match(fits.stderr, new RegExp(`^shiplog: line ${eventsAt + 2}: (a row of events|not valid JSON)`))
})
