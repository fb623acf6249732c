// Fails when a runtime dependency has a known high or critical vulnerability (`npm audit`), and says
// plainly when the advisory database could not be asked, instead of passing as if it had been.
//
//   node scripts/audit.mjs                       exit 0: no high/critical finding, or database unreachable
//   SHIPLOG_AUDIT_STRICT=1 node scripts/audit.mjs   an unreachable database fails too (exit 3)
//
// Exit codes: 0 passed (or not performed, not strict), 1 high/critical findings, 2 npm failed for
// another reason (no lock file, …), 3 not performed and strict.
import { spawnSync } from 'node:child_process'

const ARGS = ['audit', '--omit=dev', '--audit-level=high', '--json']
const strict = ['1', 'true', 'yes'].includes((process.env.SHIPLOG_AUDIT_STRICT ?? '').toLowerCase())

// npm reports a registry that does not answer the audit endpoints (a read-only mirror answers
// 405, a proxy 404 or 5xx) or no network at all with these; they say nothing about our packages.
const UNREACHABLE =
  /E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|HOSTUNREACH|NETUNREACH)|audit endpoint returned an error|\b(404|405|429|50[0-9]) /

function run() {
  // Windows needs the shell to find npm.cmd; elsewhere npm is found on PATH directly.
  const result = spawnSync('npm', ARGS, {
    encoding: 'utf8',
    shell: process.platform === 'win32',
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false' },
  })
  if (result.error) {
    console.error(`audit: could not run npm: ${result.error.message}`)
    process.exit(2)
  }
  return result
}

function notPerformed(reason) {
  console.log(`advisory database unreachable: audit NOT performed (${reason})`)
  if (strict) {
    console.error('audit: SHIPLOG_AUDIT_STRICT is set, so an audit that could not run is a failure.')
    process.exit(3)
  }
  console.log('audit: passing anyway; set SHIPLOG_AUDIT_STRICT=1 to make this a failure.')
  process.exit(0)
}

const result = run()
let report
try {
  report = JSON.parse(result.stdout)
} catch {
  const text = `${result.stdout}\n${result.stderr}`
  if (UNREACHABLE.test(text)) notPerformed(firstLine(result.stderr) || 'no report from npm')
  console.error(`audit: npm audit exited ${result.status} without a JSON report:\n${text.trim()}`)
  process.exit(2)
}

const counts = report?.metadata?.vulnerabilities
if (!counts || typeof counts !== 'object') {
  // npm answers an error object ({"message": "405 Method Not Allowed - POST …", "statusCode": 405, …},
  // or {"error": {"code": "ENOTFOUND", …}}) when it could not get the advisories.
  const message = String(report?.message ?? report?.error?.summary ?? report?.error?.code ?? '')
  const status = Number(report?.statusCode ?? 0)
  const code = String(report?.error?.code ?? report?.code ?? '')
  if (
    status === 404 ||
    status === 405 ||
    status === 429 ||
    status >= 500 ||
    UNREACHABLE.test(`${message} ${code}`)
  ) {
    notPerformed(message || code || `status ${status}`)
  }
  console.error(`audit: unexpected answer from npm audit (exit ${result.status}):\n${result.stdout.trim()}`)
  process.exit(2)
}

const high = Number(counts.high ?? 0)
const critical = Number(counts.critical ?? 0)
const summary = Object.entries(counts)
  .map(([severity, n]) => `${severity} ${n}`)
  .join(', ')
const dependencies = report.metadata.dependencies?.prod ?? report.metadata.dependencies?.total
console.log(
  `audit: ${dependencies ?? 'the'} runtime dependencies checked against the advisory database: ${summary}`,
)
if (high + critical === 0) {
  console.log('audit: no high or critical finding.')
  process.exit(0)
}
for (const [name, vulnerability] of Object.entries(report.vulnerabilities ?? {})) {
  if (vulnerability.severity !== 'high' && vulnerability.severity !== 'critical') continue
  const advisories = (vulnerability.via ?? [])
    .filter((via) => typeof via === 'object')
    .map((via) => `${via.title} (${via.url})`)
  const fix = vulnerability.fixAvailable ? 'a fix is available (npm audit fix)' : 'no fix available yet'
  console.error(
    `audit: ${vulnerability.severity.toUpperCase()} ${name} ${vulnerability.range ?? ''}: ${
      advisories.join('; ') || `through ${(vulnerability.via ?? []).join(', ')}`
    }; ${fix}`,
  )
}
console.error(`audit: ${critical} critical and ${high} high findings in runtime dependencies.`)
process.exit(1)

function firstLine(text) {
  return (
    String(text ?? '')
      .split('\n')
      .map((line) => line.replace(/^npm (error|warn|ERR!) ?/, '').trim())
      .find((line) => line && !/Unknown user config|complete log of this run/.test(line)) ?? ''
  )
}
