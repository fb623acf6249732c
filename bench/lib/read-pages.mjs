import { performance } from 'node:perf_hooks'
import { timedGet } from './http.mjs'
import { loadAverage, PAGE_SIZE } from './read-common.mjs'
import { historyPlan, makeHistory } from './seed.mjs'

/** @typedef {import('./read-common.mjs').ReadsOptions} ReadsOptions */
/** @typedef {import('./read-common.mjs').PageRow} PageRow */

/**
 * @typedef {object} PageCase
 * @property {string} name
 * @property {string} path
 * @property {(e: import('./seed.mjs').SeedEvent, id: number) => boolean} match which seeded events the
 *   filter selects, written from the filter's meaning, independently of the server's query
 * @property {ExpectedRow[]} expected filled by expectPages: the newest PAGE_SIZE matches, newest first
 */

/**
 * @typedef {object} ExpectedRow
 * @property {number} id
 * @property {string} receivedAt ISO 8601, as the page's <time datetime> carries it
 * @property {string} service
 * @property {string} environment
 * @property {string} version
 * @property {string} status
 */

/**
 * The /logs/ requests measured, each with the exact rows it must show: the seeded history is
 * generated again and every case's filter applied to it, so a filter the server ignores, or
 * applies wrongly, shows as the wrong rows (not only as a wrong count).
 * @param {ReturnType<typeof import('./seed.mjs').historyPlan>} plan @param {import('./seed.mjs').SeedTally} tally
 * @param {number} minId @param {number} maxId
 * @returns {PageCase[]}
 */
export function pageCases(plan, tally, minId, maxId) {
  const iso = (/** @type {number} */ ms) => encodeURIComponent(new Date(ms).toISOString())
  const deepBefore = Math.max(1, maxId - Math.round(plan.n * 0.9))
  const pct = (/** @type {number} */ count) =>
    `${((100 * count) / plan.n).toFixed(count * 1000 < plan.n ? 3 : 0)}%`
  const service = 'checkout'
  const within =
    (/** @type {{ from: number, to: number }} */ w) => (/** @type {import('./seed.mjs').SeedEvent} */ e) =>
      e.receivedAt >= w.from && e.receivedAt <= w.to
  /** @type {Array<Omit<PageCase, 'expected'>>} */
  const cases = [
    { name: 'first page', path: '/logs/', match: () => true },
    {
      name: `deep page (before=${deepBefore}, 90% back)`,
      path: `/logs/?before=${deepBefore}`,
      match: (_e, id) => id < deepBefore,
    },
    {
      name: `service=${service} (${pct(tally.service[service] ?? 0)})`,
      path: `/logs/?service=${service}`,
      match: (e) => e.service === service,
    },
    {
      // Names are matched ignoring case (issue 10.21): the same rows as the exact spelling.
      name: `service=CHECKOUT, any case (${pct(tally.service[service] ?? 0)})`,
      path: `/logs/?service=${service.toUpperCase()}`,
      match: (e) => e.service === service,
    },
    {
      name: `environment=Production (${pct(tally.environment.Production ?? 0)})`,
      path: '/logs/?environment=Production',
      match: (e) => e.environment === 'Production',
    },
    {
      name: `status=Failed (${pct(tally.status.Failed ?? 0)})`,
      path: '/logs/?status=Failed',
      match: (e) => e.status === 'Failed',
    },
    {
      name: `version contains "-rc" (${pct(tally.rc)})`,
      path: '/logs/?version=-rc',
      match: (e) => e.version.toLowerCase().includes('-rc'),
    },
    {
      name: `version contains "-hotfix" (${tally.hotfix} rows)`,
      path: '/logs/?version=-hotfix',
      match: (e) => e.version.toLowerCase().includes('-hotfix'),
    },
    {
      name: `from/to 30 days mid-history (${pct(tally.narrow)})`,
      path: `/logs/?from=${iso(plan.narrow.from)}&to=${iso(plan.narrow.to)}`,
      match: within(plan.narrow),
    },
    {
      name: `from/to middle half of history (${pct(tally.wide)})`,
      path: `/logs/?from=${iso(plan.wide.from)}&to=${iso(plan.wide.to)}`,
      match: within(plan.wide),
    },
  ]
  return expectPages(plan, minId, cases)
}

/**
 * Walks the seeded history once and keeps, for each case, the last PAGE_SIZE events it matches
 * (ids rise with arrival, so these are the page's rows), newest first.
 * @param {ReturnType<typeof import('./seed.mjs').historyPlan>} plan @param {number} minId
 * @param {Array<Omit<PageCase, 'expected'>>} cases
 * @returns {PageCase[]}
 */
export function expectPages(plan, minId, cases) {
  /** @type {ExpectedRow[][]} */
  const newest = cases.map(() => [])
  const history = makeHistory(plan)
  let i = 0
  for (let e = history.next(); e !== null; e = history.next(), i++) {
    const id = minId + i
    for (const [k, c] of cases.entries()) {
      if (!c.match(e, id)) continue
      const kept = /** @type {ExpectedRow[]} */ (newest[k])
      if (kept.length === PAGE_SIZE) kept.shift()
      kept.push({
        id,
        receivedAt: new Date(e.receivedAt).toISOString(),
        service: e.service,
        environment: e.environment,
        version: e.version,
        status: e.status,
      })
    }
  }
  return cases.map((c, k) => ({ ...c, expected: [...(newest[k] ?? [])].reverse() }))
}

/** Text of an HTML fragment: tags dropped, the entities the templates write decoded. @param {string} s */
export function textOf(s) {
  return s
    .replace(/<[^>]*>/g, '')
    .replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos);/gi, (_m, entity) => {
      const named = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }
      const lower = String(entity).toLowerCase()
      if (lower in named) return named[/** @type {keyof typeof named} */ (lower)]
      const code = lower.startsWith('#x') ? Number.parseInt(lower.slice(2), 16) : Number(lower.slice(1))
      return String.fromCodePoint(code)
    })
    .trim()
}

/**
 * The event rows of a /logs/ page: each row's <time datetime> and its cells' text. Independent of
 * the column order and of classes, so a page redesign does not break the check, only wrong rows do.
 * @param {string} html
 */
export function pageRows(html) {
  const body = /<tbody[^>]*>([\s\S]*?)<\/tbody>/.exec(html)?.[1] ?? ''
  return body
    .split(/<tr[\s>]/)
    .slice(1)
    .map((row) => ({
      receivedAt: /<time[^>]*\sdatetime="([^"]+)"/.exec(row)?.[1] ?? null,
      cells: [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((m) => textOf(m[1] ?? '')),
    }))
}

/**
 * What is wrong with the rows a page shows, compared with the rows it must show, or null.
 * @param {ReturnType<typeof pageRows>} shown @param {ExpectedRow[]} expected
 */
export function rowMismatch(shown, expected) {
  if (shown.length !== expected.length) return `page shows ${shown.length} rows, ${expected.length} expected`
  for (const [k, want] of expected.entries()) {
    const got = /** @type {ReturnType<typeof pageRows>[number]} */ (shown[k])
    const missing = [want.service, want.environment, want.version, want.status].filter(
      (value) => !got.cells.includes(value),
    )
    if (got.receivedAt !== want.receivedAt || missing.length > 0) {
      return (
        `row ${k + 1} is not event ${want.id} (${want.receivedAt} ${want.service} ${want.environment} ` +
        `${want.version} ${want.status}): shows ${got.receivedAt} ${got.cells.slice(1, 5).join(' ')}`
      )
    }
  }
  return null
}

/** Nearest-rank percentile of sorted values. @param {number[]} sorted @param {number} p */
export function percentile(sorted, p) {
  if (sorted.length === 0) return null
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1] ?? null
}

/**
 * Two warm-up requests, then up to `pageRequests` measured ones, one after the other on the same socket.
 * @param {import('./http.mjs').Session} session @param {PageCase} c
 * @param {ReadsOptions} o @param {string} scenario @param {string} target @param {number} n
 * @returns {Promise<PageRow>}
 */
export async function measurePage(session, c, o, scenario, target, n) {
  /** @type {string[]} */
  const problems = []
  /** @type {number[]} */
  const times = []
  /** @type {number | null} */
  let shown = null
  let rowsOk = true
  let reused = 0
  const load = loadAverage()
  const deadline = performance.now() + o.pageCaseSeconds * 1000
  const requestTimeout = Math.max(30_000, o.pageCaseSeconds * 1000)
  for (let k = 0; k < 2 + o.pageRequests; k++) {
    const measured = k >= 2
    let res
    try {
      res = await timedGet(session, c.path, requestTimeout)
    } catch (err) {
      rowsOk = false
      problems.push(`request failed: ${err instanceof Error ? err.message : String(err)}`)
      break
    }
    if (res.status !== 200) {
      rowsOk = false
      problems.push(`HTTP ${res.status}`)
      break
    }
    const rows = pageRows(res.text)
    shown = rows.length
    const mismatch = rowMismatch(rows, c.expected)
    if (mismatch) {
      rowsOk = false
      problems.push(mismatch)
      break
    }
    if (measured) {
      times.push(res.ms)
      if (res.reused) reused++
    }
    if (performance.now() > deadline && times.length >= Math.min(5, o.pageRequests)) break
  }
  if (times.length > 0 && reused < times.length)
    problems.push(`${times.length - reused} requests on a new socket`)
  const sorted = [...times].sort((a, b) => a - b)
  return {
    scenario,
    target,
    n,
    name: c.name,
    path: c.path,
    requests: times.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    max: sorted.at(-1) ?? null,
    shown,
    expected: c.expected.length,
    rowsOk: rowsOk && shown !== null,
    reused,
    load,
    problems,
  }
}
