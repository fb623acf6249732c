// Runs the whole test suite once per database: SQLite always, PostgreSQL when TEST_DATABASE_URL is
// set. Under CI=true a missing PostgreSQL is a failure, not a skip. Extra arguments pick test files.
// SHIPLOG_TEST_DIALECTS (sqlite, postgres or both, comma-separated) picks the databases instead:
// .ci/run runs each database under another Node.
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

function findTests(dir) {
  const out = []
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...findTests(path))
    else if (name.endsWith('.test.ts')) out.push(path)
  }
  return out
}

const files = process.argv.slice(2).length > 0 ? process.argv.slice(2) : findTests('test')
const ci = process.env.CI === 'true' || process.env.CI === '1'
const chosen = process.env.SHIPLOG_TEST_DIALECTS
const dialects = ['sqlite']
if (chosen !== undefined) {
  dialects.splice(0, 1, ...chosen.split(',').map((d) => d.trim()))
  const unknown = dialects.filter((d) => d !== 'sqlite' && d !== 'postgres')
  if (unknown.length > 0 || dialects.length === 0 || new Set(dialects).size !== dialects.length) {
    console.error(`SHIPLOG_TEST_DIALECTS must name sqlite, postgres or both, got "${chosen}"`)
    process.exit(1)
  }
  if (dialects.includes('postgres') && !process.env.TEST_DATABASE_URL) {
    console.error('SHIPLOG_TEST_DIALECTS names postgres but TEST_DATABASE_URL is not set.')
    process.exit(1)
  }
} else if (process.env.TEST_DATABASE_URL) dialects.push('postgres')
else if (ci) {
  console.error('CI=true but TEST_DATABASE_URL is not set: the PostgreSQL suite cannot be skipped in CI.')
  process.exit(1)
} else {
  console.error('note: TEST_DATABASE_URL is not set, so only the SQLite suite runs.')
}

// Test files run in parallel processes. Most of their time is spent waiting (servers starting,
// fsyncs, timeouts being proven), so a few more than the two CPUs of the CI machine shorten the run.
const concurrency = Number(process.env.SHIPLOG_TEST_CONCURRENCY ?? 3)
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(
    `SHIPLOG_TEST_CONCURRENCY must be a whole number >= 1, got "${process.env.SHIPLOG_TEST_CONCURRENCY}"`,
  )
  process.exit(1)
}

// Each file's time, from scripts/test-durations.mjs, for the slowest-files list at the end.
const durationsDir = mkdtempSync(join(tmpdir(), 'shiplog-test-durations-'))
process.on('exit', () => rmSync(durationsDir, { recursive: true, force: true }))
const slowestShown = Number(process.env.SHIPLOG_TEST_SLOWEST ?? 12)

function slowestFiles(dialect) {
  let text = ''
  try {
    text = readFileSync(join(durationsDir, dialect), 'utf8')
  } catch {
    return []
  }
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [ms, file] = line.split('\t')
      return { ms: Number(ms), file }
    })
    .sort((a, b) => b.ms - a.ms)
}

function run(dialect) {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--test',
        '--test-reporter=spec',
        '--test-reporter-destination=stdout',
        '--test-reporter=./scripts/test-durations.mjs',
        `--test-reporter-destination=${join(durationsDir, dialect)}`,
        `--test-concurrency=${concurrency}`,
        ...files,
      ],
      { env: { ...process.env, SHIPLOG_TEST_DB: dialect }, stdio: ['ignore', 'pipe', 'inherit'] },
    )
    // The counts are read from node's summary lines as they pass, not from a tail of the output:
    // with failures, node prints their details after the summary, and they can be long.
    const counts = { pass: 0, fail: 0, skipped: 0 }
    // The failures' details, kept to be printed again at the very end, where a reader of a long CI log
    // looks first.
    let failures = ''
    let pending = ''
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk)
      const lines = (pending + chunk.toString()).split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) {
        const summary = /^ℹ (pass|fail|skipped) (\d+)$/.exec(line)
        if (summary) counts[summary[1]] = Number(summary[2])
        if (failures !== '' || line.startsWith('✖ failing tests:')) {
          if (failures.length < 20_000) failures += `${line}\n`
        }
      }
    })
    child.on('close', (code) => {
      resolve({ dialect, code, ...counts, failures })
    })
  })
}

const results = []
for (const dialect of dialects) {
  console.log(`\n=== test suite on ${dialect} (node ${process.version}) ===\n`)
  results.push(await run(dialect))
}
let passed = 0
let failed = 0
let skipped = 0
for (const r of results) {
  const slowest = slowestFiles(r.dialect)
  if (slowest.length < 2 || slowestShown <= 0) continue
  const total = slowest.reduce((sum, f) => sum + f.ms, 0)
  console.log(
    `\n=== slowest test files on ${r.dialect} (time of their tests; ${Math.round(total / 1000)} s in all) ===`,
  )
  for (const { ms, file } of slowest.slice(0, slowestShown)) {
    console.log(`${(ms / 1000).toFixed(1).padStart(7)} s  ${file}`)
  }
}
for (const r of results) {
  if (r.failures !== '') console.log(`\n=== failures on ${r.dialect}, again ===\n\n${r.failures}`)
}
for (const r of results) {
  console.log(`${r.dialect}: ${r.pass} passed, ${r.fail} failed, ${r.skipped} skipped (exit ${r.code})`)
  passed += r.pass
  failed += r.fail + (r.code !== 0 && r.fail === 0 ? 1 : 0)
  skipped += r.skipped
}
if (ci && skipped > 0) {
  console.error(`CI=true: ${skipped} skipped test(s) count as failures.`)
  failed += skipped
}
console.log(`tests: ${passed} passed, ${failed} failed`)
process.exit(failed > 0 ? 1 : 0)
