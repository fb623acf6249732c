// shiplog-deploy: records one deployment event from a pipeline. Standard library only (it is the
// whole content of the small container image), so it must not import anything from this project.
import { randomUUID } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'

export const VERSION = '0.1.0'

const EXIT = { recorded: 0, usage: 2, rejected: 3, unreachable: 4, notAllowed: 5 } as const

const HELP = `Usage: shiplog-deploy [options] <API_KEY> <app> <env> <version> <status>

Records one deployment event in Shiplog and exits 0 once the server has stored it.

Arguments (all five, in this order):
  API_KEY    an API key from Shiplog's Settings page (shl_…); never printed
  app        the service or application, e.g. "My App"
  env        the environment, e.g. Prod
  version    free text, e.g. 1.0.3 or master:4d0r98wa
  status     Deploying, Deployed or Failed

Options:
  --url URL            link to the build or its log (default on GitHub Actions: the run's page)
  --commit SHA         the commit deployed (default on GitHub Actions: GITHUB_SHA)
  --description TEXT   a short note (at most 500 characters)
  --deployer NAME      who deployed (default on GitHub Actions: GITHUB_ACTOR)
  --at TIME            when it happened, for history sent later (ISO 8601, e.g.
                       2026-11-21T14:05:00+01:00; without a zone: UTC). Default: now.
                       At most 5 minutes ahead; the server bounds how far back
  --commit-time TIME   when the deployed commit was made (same form): lead time
                       runs from it
  --check              ask the guardrails first (locks, freezes, bad versions, promotion
                       rules); when not allowed, print each reason on stderr (rule, message,
                       until when) and exit 5 without recording. The key needs the read scope
  --force --reason TEXT
                       record anyway; the reason (at most 500 characters) is stored with the
                       event and audited. With --check it is sent only when the check says no
  -h, --help           show this help
  -v, --version        print the version

Environment:
  SHIPLOG_URL       the server, e.g. http://shiplog.internal:8080 (required)
  SHIPLOG_TIMEOUT   seconds to keep retrying before giving up (default 30)
  SHIPLOG_DEPLOY_URL, SHIPLOG_DEPLOY_COMMIT, SHIPLOG_DEPLOY_DESCRIPTION, SHIPLOG_DEPLOY_DEPLOYER,
  SHIPLOG_DEPLOY_AT, SHIPLOG_DEPLOY_COMMIT_TIME
                    defaults for the options of the same names
  SHIPLOG_CHECK=1   as --check (0 or empty: off)
  SHIPLOG_FORCE_REASON=TEXT
                    as --force --reason TEXT; how the container image takes them, e.g.
                    docker run -e SHIPLOG_CHECK=1 IMAGE:1 KEY App1 Prod 1.0.3 Deployed

Network errors, 5xx and 429 answers are retried with backoff (honouring Retry-After) under one
Idempotency-Key, so a retry never records the event twice.

Exit codes: 0 recorded, 2 usage error, 3 rejected by the server (its message is shown),
            4 server unreachable after retries, 5 not allowed by a guardrail (--check).`

/** Everything the command reads from outside, so tests can drive it without a process. */
export interface DeployEnvironment {
  argv: string[]
  env: Record<string, string | undefined>
  stdout: (line: string) => void
  stderr: (line: string) => void
  fetch: typeof fetch
  sleep: (ms: number) => Promise<void>
  now: () => number
  random: () => number
}

class UsageError extends Error {}

interface Invocation {
  server: URL
  key: string
  body: Record<string, string>
  timeoutMs: number
  /** Ask GET /api/v1/check first (--check, SHIPLOG_CHECK). */
  check: boolean
  /** Record even when a guardrail says no, with this reason (--force --reason, SHIPLOG_FORCE_REASON). */
  forceReason: string | null
}

const OPTIONS = {
  url: { type: 'string' },
  commit: { type: 'string' },
  description: { type: 'string' },
  deployer: { type: 'string' },
  at: { type: 'string' },
  'commit-time': { type: 'string' },
  check: { type: 'boolean' },
  force: { type: 'boolean' },
  reason: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const

function parseInvocation(e: DeployEnvironment): Invocation | 'help' | 'version' {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>
  try {
    parsed = parseArgs({ args: e.argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (err) {
    // parseArgs quotes the offending argument; it could be the key, so say only what kind of mistake.
    const code = (err as NodeJS.ErrnoException).code
    throw new UsageError(
      code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION'
        ? 'unknown option (values that start with "-" go after "--")'
        : 'an option is missing its value',
    )
  }
  const { values, positionals } = parsed
  if (values.help) return 'help'
  if (values.version) return 'version'
  if (positionals.length !== 5) {
    throw new UsageError(
      `expected 5 arguments <API_KEY> <app> <env> <version> <status>, got ${positionals.length}`,
    )
  }
  const [key, app, env, version, status] = positionals as [string, string, string, string, string]
  // A key travels in a header: only printable ASCII can. Say so without repeating what was given.
  if (key === '' || !/^[\x21-\x7e]+$/.test(key)) {
    throw new UsageError(
      'the API key (first argument) has spaces, line breaks or other characters no key has',
    )
  }

  const rawServer = e.env.SHIPLOG_URL?.trim()
  if (!rawServer)
    throw new UsageError('SHIPLOG_URL is not set (e.g. SHIPLOG_URL=http://shiplog.internal:8080)')
  let server: URL
  try {
    server = new URL(rawServer)
  } catch {
    throw new UsageError(`SHIPLOG_URL is not a URL: ${rawServer}`)
  }
  if (server.protocol !== 'http:' && server.protocol !== 'https:') {
    throw new UsageError(`SHIPLOG_URL must start with http:// or https://: ${rawServer}`)
  }

  const timeoutText = e.env.SHIPLOG_TIMEOUT?.trim() || '30'
  const timeoutSeconds = Number(timeoutText)
  if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0 || timeoutSeconds > 3600) {
    throw new UsageError(
      `SHIPLOG_TIMEOUT must be a number of seconds between 0 and 3600, got "${timeoutText}"`,
    )
  }

  const body: Record<string, string> = { service: app, environment: env, version, status }
  const gh = e.env.GITHUB_ACTIONS === 'true'
  const runUrl =
    gh && e.env.GITHUB_SERVER_URL && e.env.GITHUB_REPOSITORY && e.env.GITHUB_RUN_ID
      ? `${e.env.GITHUB_SERVER_URL}/${e.env.GITHUB_REPOSITORY}/actions/runs/${e.env.GITHUB_RUN_ID}`
      : undefined
  // Flags win, then SHIPLOG_DEPLOY_* variables (how action.yml passes its optional inputs), then
  // what GitHub Actions says about the run. Empty values count as absent.
  const pick = (...candidates: Array<string | undefined>) =>
    candidates.find((c) => c !== undefined && c.trim() !== '')
  const url = pick(values.url, e.env.SHIPLOG_DEPLOY_URL, runUrl)
  const commit = pick(values.commit, e.env.SHIPLOG_DEPLOY_COMMIT, gh ? e.env.GITHUB_SHA : undefined)
  const deployer = pick(values.deployer, e.env.SHIPLOG_DEPLOY_DEPLOYER, gh ? e.env.GITHUB_ACTOR : undefined)
  const description = pick(values.description, e.env.SHIPLOG_DEPLOY_DESCRIPTION)
  if (url) body.url = url
  if (commit) body.commit = commit
  if (deployer) body.deployer = deployer
  if (description) body.description = description
  // Sent as given: the server reads them by its one grammar for instants and checks the bounds,
  // which depend on its clock and configuration (a bad one: 422 naming the field, exit 3).
  const at = pick(values.at, e.env.SHIPLOG_DEPLOY_AT)
  const commitTime = pick(values['commit-time'], e.env.SHIPLOG_DEPLOY_COMMIT_TIME)
  if (at) body.occurred_at = at.trim()
  if (commitTime) body.commit_time = commitTime.trim()
  // SHIPLOG_CHECK is a switch: unset or empty is off; a value that is neither on nor off is refused.
  const checkText = (e.env.SHIPLOG_CHECK ?? '').trim().toLowerCase()
  if (!/^(|0|1|true|false|yes|no|on|off)$/.test(checkText))
    throw new UsageError('SHIPLOG_CHECK must be 1 or 0')
  const check = values.check === true || /^(1|true|yes|on)$/.test(checkText)
  const envReason = pick(e.env.SHIPLOG_FORCE_REASON)
  if (values.force && pick(values.reason) === undefined && envReason === undefined) {
    throw new UsageError('--force needs --reason "why" (the reason is stored with the event and audited)')
  }
  if (values.reason !== undefined && !values.force) throw new UsageError('--reason goes with --force')
  const forceReason = values.force ? (pick(values.reason) ?? envReason) : envReason
  const reason = forceReason?.trim() ?? null
  // Without --check the server's verdict is unknown: the reason goes with the event as given.
  if (reason !== null && !check) body.override_reason = reason
  return { server, key, body, timeoutMs: timeoutSeconds * 1000, check, forceReason: reason }
}

/** A JSON object's fields, or null when the text is not one. */
function jsonObject(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text)
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null
  } catch {
    return null
  }
}

/** Milliseconds a Retry-After header asks for (seconds or an HTTP date), if it is readable. */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (!header) return undefined
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000
  const at = Date.parse(header)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

interface Problem {
  type?: string
  title?: string
  detail?: string
  errors?: Array<{ field?: string; message?: string }>
}

function describeRejection(status: number, text: string, what = 'the event'): string {
  let message = `server refused ${what} (HTTP ${status})`
  const problem = jsonObject(text) as Problem | null
  if (problem) {
    const detail = problem.detail ?? problem.title
    if (detail) message += `: ${detail}`
    // With one bad field the detail is that field's message: list only what it does not already say.
    const listed = new Set(detail ? [detail] : [])
    for (const err of problem.errors ?? []) {
      if (!err.message || listed.has(err.message)) continue
      listed.add(err.message)
      message += `\n  - ${err.message}`
    }
  } else if (text.trim()) message += `: ${text.trim().slice(0, 300)}`
  return message
}

/**
 * The line printed once the event is stored: the server's stored values (trimmed, status in its
 * canonical spelling), so the log shows what Shiplog will show. What was sent stands in for any
 * value a non-standard 2xx body lacks.
 */
function describeRecorded(stored: Record<string, unknown>, sent: Record<string, string>): string {
  const value = (name: string) => {
    const v = stored[name]
    return typeof v === 'string' && v !== '' ? v : (sent[name] ?? '')
  }
  const id = typeof stored.id === 'number' ? ` ${stored.id}` : ''
  return `recorded event${id}: ${value('service')} ${value('version')} ${value('status')} in ${value('environment')}`
}

/**
 * One request, retried on network errors, 5xx and 429 until SHIPLOG_TIMEOUT is spent: the first
 * other answer, or null once the time is up (said on stderr).
 */
async function exchange(
  e: DeployEnvironment,
  warn: (line: string) => void,
  timeoutMs: number,
  what: string,
  endpoint: URL,
  init: RequestInit,
): Promise<{ status: number; text: string } | null> {
  const started = e.now()
  const deadline = started + timeoutMs
  let attempt = 0
  let lastProblem = 'no attempt was made'
  for (;;) {
    attempt++
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), Math.max(1000, Math.min(deadline - e.now(), 10_000)))
    let waitHint: number | undefined
    try {
      const res = await e.fetch(endpoint, { ...init, signal: controller.signal, redirect: 'error' })
      const text = await res.text()
      if (res.status !== 429 && res.status < 500) return { status: res.status, text }
      lastProblem = `HTTP ${res.status}`
      waitHint = retryAfterMs(res.headers.get('retry-after'), e.now())
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause
      lastProblem =
        (err as Error).name === 'AbortError'
          ? 'no answer in time'
          : (cause?.code ?? cause?.message ?? (err as Error).message)
    } finally {
      clearTimeout(timer)
    }
    // Never past the deadline: the last attempt is made when the time is up.
    const left = deadline - e.now()
    const backoff = Math.min(8000, 250 * 2 ** (attempt - 1)) * (0.5 + e.random() / 2)
    if (left <= 0 || (waitHint !== undefined && waitHint > left)) {
      const spent = ((e.now() - started) / 1000).toFixed(1)
      warn(
        `could not ${what} at ${endpoint.origin}: ${attempt} attempt${attempt === 1 ? '' : 's'} ` +
          `in ${spent} s (SHIPLOG_TIMEOUT=${Math.round(timeoutMs / 1000)}), last: ${lastProblem}`,
      )
      return null
    }
    const wait = Math.min(Math.max(backoff, waitHint ?? 0), left)
    warn(`attempt ${attempt} failed (${lastProblem}); retrying in ${(wait / 1000).toFixed(1)} s`)
    await e.sleep(wait)
  }
}

type Reason = { rule?: string; message?: string; until?: string | null }

function describeCheckRefusal(status: number, text: string): string {
  const type = String(jsonObject(text)?.type ?? '')
  if (status === 403 && type.endsWith('insufficient-scope')) {
    return '--check needs a key with the read scope (this key may only record events): create one with the scopes ingest and read (Settings, or `shiplog keys create … --scope ingest,read`), or leave out --check / SHIPLOG_CHECK'
  }
  return describeRejection(status, text, 'the guardrail check')
}

export async function runDeploy(e: DeployEnvironment): Promise<number> {
  let invocation: Invocation | 'help' | 'version'
  try {
    invocation = parseInvocation(e)
  } catch (err) {
    if (err instanceof UsageError) {
      // Usage messages never quote the arguments, so they cannot contain the key.
      e.stderr(`shiplog-deploy: ${err.message}`)
      e.stderr('Run shiplog-deploy --help for usage.')
      return EXIT.usage
    }
    throw err
  }
  if (invocation === 'help') {
    e.stdout(HELP)
    return EXIT.recorded
  }
  if (invocation === 'version') {
    e.stdout(VERSION)
    return EXIT.recorded
  }

  const { server, key, body, timeoutMs } = invocation
  // Every line to stderr goes through here, so nothing the server or the network says can echo the key.
  const warn = (line: string) => e.stderr(`shiplog-deploy: ${line}`.replaceAll(key, '***'))
  const base = server.href.endsWith('/') ? server.href : `${server.href}/`
  const headers = { 'x-api-key': key, 'user-agent': `shiplog-deploy/${VERSION}` }

  if (invocation.check) {
    const asked = new URL('api/v1/check', base)
    const names = Object.entries(body).filter(([name]) =>
      ['service', 'environment', 'version'].includes(name),
    )
    asked.search = new URLSearchParams(names).toString()
    const answer = await exchange(e, warn, timeoutMs, 'ask the guardrail check', asked, { headers })
    if (answer === null) return EXIT.unreachable
    const verdict = answer.status === 200 ? jsonObject(answer.text) : null
    if (typeof verdict?.allowed !== 'boolean') {
      warn(describeCheckRefusal(answer.status, answer.text))
      return EXIT.rejected
    }
    if (!verdict.allowed) {
      const reasons = (Array.isArray(verdict.reasons) ? verdict.reasons : []) as Reason[]
      warn(`${body.service} ${body.version} may not be deployed to ${body.environment} now:`)
      for (const r of reasons) warn(`${r.rule}: ${r.message} (until ${r.until ?? 'lifted'})`)
      if (invocation.forceReason === null) {
        warn('nothing was recorded; to record anyway: --force --reason "why" (or SHIPLOG_FORCE_REASON)')
        return EXIT.notAllowed
      }
      warn(`recording anyway (--force): ${invocation.forceReason}`)
      body.override_reason = invocation.forceReason
    }
  }

  const endpoint = new URL('deploy', base)
  const answer = await exchange(e, warn, timeoutMs, 'record the event', endpoint, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
    body: JSON.stringify(body),
  })
  if (answer === null) return EXIT.unreachable
  if (answer.status !== 200 && answer.status !== 201) {
    warn(describeRejection(answer.status, answer.text))
    return EXIT.rejected
  }
  // A 2xx is success even if the body is not the usual JSON.
  const stored = jsonObject(answer.text) ?? {}
  e.stdout(describeRecorded(stored, body))
  const broken = Array.isArray(stored.guardrails) ? stored.guardrails.join(', ') : ''
  if (broken) warn(`recorded although it broke: ${broken} (shown in Shiplog)`)
  return EXIT.recorded
}

/** The real process's streams, network and clock. */
export function processEnvironment(): DeployEnvironment {
  return {
    argv: process.argv.slice(2),
    env: process.env,
    stdout: (line) => process.stdout.write(`${line}\n`),
    stderr: (line) => process.stderr.write(`${line}\n`),
    fetch: globalThis.fetch,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    now: Date.now,
    random: Math.random,
  }
}

// Run when this file is the program itself (as in the container image: node shiplog-deploy.mjs …);
// bin/shiplog-deploy.js imports it and calls runDeploy instead.
const invokedPath = process.argv[1] ? realpathSync(process.argv[1]) : ''
if (invokedPath && pathToFileURL(invokedPath).href === import.meta.url) {
  process.exitCode = await runDeploy(processEnvironment())
}
