// shiplog-deploy: records one deployment event from a pipeline. Standard library only (it is the
// whole content of the small container image), so it must not import anything from this project.
import { randomUUID } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'

export const VERSION = '0.1.0'

const EXIT = { recorded: 0, usage: 2, rejected: 3, unreachable: 4 } as const

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
  -h, --help           show this help
  -v, --version        print the version

Environment:
  SHIPLOG_URL       the server, e.g. http://shiplog.internal:8080 (required)
  SHIPLOG_TIMEOUT   seconds to keep retrying before giving up (default 30)
  SHIPLOG_DEPLOY_URL, SHIPLOG_DEPLOY_COMMIT, SHIPLOG_DEPLOY_DESCRIPTION, SHIPLOG_DEPLOY_DEPLOYER,
  SHIPLOG_DEPLOY_AT, SHIPLOG_DEPLOY_COMMIT_TIME
                    defaults for the options of the same names

Network errors, 5xx and 429 answers are retried with backoff (honouring Retry-After) under one
Idempotency-Key, so a retry never records the event twice.

Exit codes: 0 recorded, 2 usage error, 3 rejected by the server (its message is shown),
            4 server unreachable after retries.`

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
}

function parseInvocation(e: DeployEnvironment): Invocation | 'help' | 'version' {
  let parsed: ReturnType<
    typeof parseArgs<{
      options: {
        url: { type: 'string' }
        commit: { type: 'string' }
        description: { type: 'string' }
        deployer: { type: 'string' }
        at: { type: 'string' }
        'commit-time': { type: 'string' }
        help: { type: 'boolean'; short: 'h' }
        version: { type: 'boolean'; short: 'v' }
      }
      allowPositionals: true
    }>
  >
  try {
    parsed = parseArgs({
      args: e.argv,
      options: {
        url: { type: 'string' },
        commit: { type: 'string' },
        description: { type: 'string' },
        deployer: { type: 'string' },
        at: { type: 'string' },
        'commit-time': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
      allowPositionals: true,
      strict: true,
    })
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
  return { server, key, body, timeoutMs: timeoutSeconds * 1000 }
}

/** Milliseconds a Retry-After header asks for (seconds or an HTTP date), if it is readable. */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (!header) return undefined
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000
  const at = Date.parse(header)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

interface Problem {
  title?: string
  detail?: string
  errors?: Array<{ field?: string; message?: string }>
}

function describeRejection(status: number, text: string): string {
  let message = `server refused the event (HTTP ${status})`
  try {
    const problem = JSON.parse(text) as Problem
    const detail = problem.detail ?? problem.title
    if (detail) message += `: ${detail}`
    // With one bad field the detail is that field's message: list only what it does not already say.
    const listed = new Set(detail ? [detail] : [])
    for (const err of problem.errors ?? []) {
      if (!err.message || listed.has(err.message)) continue
      listed.add(err.message)
      message += `\n  - ${err.message}`
    }
  } catch {
    if (text.trim()) message += `: ${text.trim().slice(0, 300)}`
  }
  return message
}

/**
 * The line printed once the event is stored: the server's stored values (trimmed, status in its
 * canonical spelling), so the log shows what Shiplog will show. What was sent stands in for any
 * value a non-standard 2xx body lacks.
 */
function describeRecorded(text: string, sent: Record<string, string>): string {
  let stored: Record<string, unknown> = {}
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      stored = parsed as Record<string, unknown>
    }
  } catch {
    // A 2xx is success even if the body is not the usual JSON.
  }
  const value = (name: string) => {
    const v = stored[name]
    return typeof v === 'string' && v !== '' ? v : (sent[name] ?? '')
  }
  const id = typeof stored.id === 'number' ? ` ${stored.id}` : ''
  return `recorded event${id}: ${value('service')} ${value('version')} ${value('status')} in ${value('environment')}`
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
  const endpoint = new URL('deploy', server.href.endsWith('/') ? server.href : `${server.href}/`)
  const idempotencyKey = randomUUID()
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
      const res = await e.fetch(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': key,
          'idempotency-key': idempotencyKey,
          'user-agent': `shiplog-deploy/${VERSION}`,
        },
        body: JSON.stringify(body),
        signal: controller.signal,
        redirect: 'error',
      })
      const text = await res.text()
      if (res.status === 200 || res.status === 201) {
        e.stdout(describeRecorded(text, body))
        return EXIT.recorded
      }
      if (res.status === 429 || res.status >= 500) {
        lastProblem = `HTTP ${res.status}`
        waitHint = retryAfterMs(res.headers.get('retry-after'), e.now())
      } else {
        warn(describeRejection(res.status, text))
        return EXIT.rejected
      }
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause
      lastProblem =
        (err as Error).name === 'AbortError'
          ? 'no answer in time'
          : (cause?.code ?? cause?.message ?? (err as Error).message)
    } finally {
      clearTimeout(timer)
    }

    // Exponential backoff with jitter, at least what Retry-After asks for, and never past the
    // deadline: the last attempt is made when the time is up.
    const left = deadline - e.now()
    const backoff = Math.min(8000, 250 * 2 ** (attempt - 1)) * (0.5 + e.random() / 2)
    const wanted = Math.max(backoff, waitHint ?? 0)
    if (left <= 0 || (waitHint !== undefined && waitHint > left)) {
      const spent = ((e.now() - started) / 1000).toFixed(1)
      warn(
        `could not record the event at ${endpoint.origin}: ${attempt} attempt${attempt === 1 ? '' : 's'} ` +
          `in ${spent} s (SHIPLOG_TIMEOUT=${Math.round(timeoutMs / 1000)}), last: ${lastProblem}`,
      )
      return EXIT.unreachable
    }
    const wait = Math.min(wanted, left)
    warn(`attempt ${attempt} failed (${lastProblem}); retrying in ${(wait / 1000).toFixed(1)} s`)
    await e.sleep(wait)
  }
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
