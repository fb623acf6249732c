// The house's layering (../shared/ARCHITECTURE.md), checked on the source: arrows point one way
// (cli → server → app → http → views, http → domain → db), no module imports itself round a circle,
// and the board lives in one folder that meets deployments/ and services.ts without a round trip.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import { test } from 'node:test'
import { EVENT_COLUMN_NAMES, EVENT_COLUMNS, type EventColumn } from '../../src/db/event-columns.js'
import { EXPORT_SHAPE } from '../../src/domain/events/export/format.js'
import { SRC, sourceFiles } from '../support/source-files.js'

/** Each module's relative imports (static and dynamic), as paths under src/ without extension. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8')
    const targets: string[] = []
    for (const match of text.matchAll(/(?:from\s+|import\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = resolve(dirname(file), match[1] as string).replace(/\.js$/, '.ts')
      targets.push(relative(SRC, target))
    }
    graph.set(relative(SRC, file), targets)
  }
  return graph
}

const LAYER_RULES: [from: string, mustNotImport: string[]][] = [
  ['db/', ['domain/', 'http/', 'views/', 'cli/', 'app.ts', 'server.ts']],
  ['domain/', ['http/', 'views/', 'cli/', 'app.ts', 'server.ts']],
  ['views/', ['http/', 'cli/', 'app.ts', 'server.ts', 'db/connect.ts']],
  ['http/', ['cli/', 'server.ts', 'app.ts', 'features/']],
  // Features (src/features/) wire domain parts and http routes into plugins; app.ts lists them.
  ['features/', ['cli/', 'server.ts', 'app.ts']],
]

test('no arrow points up: db knows nothing of domain, domain nothing of http, views get no handles', () => {
  const wrong: string[] = []
  for (const [module, imports] of importGraph()) {
    for (const [from, forbidden] of LAYER_RULES) {
      if (!module.startsWith(from)) continue
      for (const target of imports) {
        if (forbidden.some((f) => target.startsWith(f))) wrong.push(`${module} imports ${target}`)
      }
    }
  }
  assert.deepEqual(wrong, [])
})

test('no import circles anywhere in src/', () => {
  const graph = importGraph()
  const cycles: string[] = []
  const state = new Map<string, 'open' | 'done'>()
  const path: string[] = []
  const visit = (module: string) => {
    if (state.get(module) === 'done') return
    if (state.get(module) === 'open') {
      cycles.push([...path.slice(path.indexOf(module)), module].join(' → '))
      return
    }
    state.set(module, 'open')
    path.push(module)
    for (const target of graph.get(module) ?? []) visit(target)
    path.pop()
    state.set(module, 'done')
  }
  for (const module of graph.keys()) visit(module)
  assert.deepEqual(cycles, [])
  assert.ok(graph.size > 30, `read ${graph.size} modules`)
})

/** Files under src/ whose text matches `pattern`, as paths relative to src/. */
function filesMatching(pattern: RegExp): string[] {
  return sourceFiles(SRC)
    .filter((file) => pattern.test(readFileSync(file, 'utf8')))
    .map((file) => relative(SRC, file))
    .sort()
}

test('one owner of SQLite connections: better-sqlite3 is opened in one file, statements are prepared only in src/db/', () => {
  // Any close() of any descriptor of the database file drops the whole process's locks, and a
  // statement run beside the owner's queue meets its transactions: nothing else may touch SQLite.
  assert.deepEqual(filesMatching(/from ['"]better-sqlite3['"]|require\(['"]better-sqlite3['"]\)/), [
    'db/sqlite/connection.ts',
  ])
  assert.deepEqual(
    filesMatching(/\.prepare\(/).filter((file) => !file.startsWith('db/')),
    [],
  )
  // Pragmas are set once, where connections are opened (and on a finished backup copy); nothing
  // toggles them per task.
  assert.deepEqual(
    filesMatching(
      /pragma\s+(synchronous|journal_mode|busy_timeout|query_only|cache_size|foreign_keys|locking_mode)\b/i,
    ).filter((file) => !file.startsWith('db/sqlite/')),
    [],
  )
})

/** Whether `from` reaches a module that `isTarget` accepts, following imports (at least one step). */
function reaches(graph: Map<string, string[]>, from: string, isTarget: (module: string) => boolean): boolean {
  const seen = new Set<string>()
  const queue = [...(graph.get(from) ?? [])]
  while (queue.length > 0) {
    const module = queue.shift() as string
    if (isTarget(module)) return true
    if (seen.has(module)) continue
    seen.add(module)
    queue.push(...(graph.get(module) ?? []))
  }
  return false
}

/**
 * Modules of `b` that `a` reaches and that reach `a` again: a way from one part to the other and
 * back, even where no single module imports itself round a circle. Empty when the two parts meet
 * in one direction only.
 */
function roundTrips(
  graph: Map<string, string[]>,
  a: (module: string) => boolean,
  b: (module: string) => boolean,
): string[] {
  const modules = [...graph.keys()]
  return modules
    .filter(b)
    .filter((m) => modules.some((from) => a(from) && reaches(graph, from, (t) => t === m)))
    .filter((m) => reaches(graph, m, a))
    .sort()
}

const inBoard = (module: string) => module.startsWith('domain/board/')
const inDeployments = (module: string) => module.startsWith('domain/deployments/')
const isServices = (module: string) => module === 'domain/services.ts'

/**
 * What the board is made of (SPEC §6.3): rows and drift, the instant asked for, the cells read
 * from the deployments, the environment order, the stall time, the badge token and what a badge
 * shows. Each is declared in domain/board/ and nowhere else.
 */
const BOARD_NAMES = [
  'boardRows',
  'readBoardInstant',
  'boardCells',
  'boardCellsUncached',
  'boardPairs',
  'firstDeploymentStart',
  'BUILT_IN_ORDER',
  'orderEnvironments',
  'seenEnvironments',
  'environmentsOfService',
  'environmentSettings',
  'environmentListing',
  'environmentsInOrder',
  'serviceEnvironments',
  'changeEnvironment',
  'boardSettings',
  'loadBoardSettings',
  'stallMsOf',
  'ensureBadgeToken',
  'rotateBadgeToken',
  'accountByBadgeToken',
  'badgeState',
]

test('the board in one place: declared in domain/board/ only, and the files it was spread over stay gone', () => {
  const graph = importGraph()
  // The board was spread over these (issue 26); the notices file is named for all it carries.
  const gone = ['domain/board.ts', 'domain/deployments/read-queries.ts', 'db/revocations.ts']
  assert.deepEqual(
    gone.filter((module) => graph.has(module)),
    [],
  )
  const declaredIn = (name: string) =>
    filesMatching(new RegExp(`\\b(?:function|const|let|var|class|interface|type)\\s+${name}\\b`))
  const outside: string[] = []
  const missing: string[] = []
  for (const name of BOARD_NAMES) {
    const files = declaredIn(name)
    for (const file of files) if (!inBoard(file)) outside.push(`${name} in ${file}`)
    if (!files.some(inBoard)) missing.push(name)
  }
  assert.deepEqual(outside, [])
  assert.deepEqual(missing, [], 'a board name no longer declared in domain/board/: update BOARD_NAMES')
  // Callers import the board's modules themselves: no facade elsewhere gathers them again.
  const reExports: string[] = []
  for (const file of sourceFiles(SRC)) {
    const module = relative(SRC, file)
    if (inBoard(module)) continue
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(
      /export\s+(?:type\s+)?(?:\*|\{[^}]*\})\s+from\s+['"](\.{1,2}\/[^'"]+)['"]/g,
    )) {
      const target = relative(SRC, resolve(dirname(file), match[1] as string).replace(/\.js$/, '.ts'))
      if (inBoard(target)) reExports.push(`${module} re-exports ${target}`)
    }
  }
  assert.deepEqual(reExports, [])
})

test('services.ts and deployments/ do not import each other, not even round through other modules', () => {
  const graph = importGraph()
  const direct: string[] = []
  for (const [module, imports] of graph) {
    for (const target of imports) {
      if ((isServices(module) && inDeployments(target)) || (inDeployments(module) && isServices(target)))
        direct.push(`${module} imports ${target}`)
    }
  }
  assert.deepEqual(direct, [])
  assert.deepEqual(roundTrips(graph, isServices, inDeployments), [])
  assert.deepEqual(roundTrips(graph, inDeployments, isServices), [])
})

test('board/ builds on deployments/ and services.ts; what they read of the board reads nothing of them', () => {
  // The insights pages and the read API use the board's environment order; that order must not
  // read deployments/ again, or the two folders would be one tangle.
  const graph = importGraph()
  assert.deepEqual(roundTrips(graph, inBoard, inDeployments), [])
  assert.deepEqual(roundTrips(graph, inDeployments, inBoard), [])
  assert.deepEqual(roundTrips(graph, inBoard, isServices), [])
  assert.deepEqual(roundTrips(graph, isServices, inBoard), [])
  assert.ok([...graph.keys()].filter(inBoard).length >= 5, 'domain/board/ holds the board')
})

test('the event columns are described once: no second list of them in src/ (issue 26.6)', () => {
  // db/event-columns.ts describes the events table; the inserts, the array types, the export and
  // the public schemas come from it. A query may name the few columns it needs; a list (an array,
  // a comma-separated run in SQL, an object's keys) naming most of them, or every column the
  // export copies as text, is a second description that the next new column would miss.
  const shown = Object.values(EVENT_COLUMNS as Record<string, EventColumn>).flatMap((c) => [
    ...(c.shown ? [c.shown.key] : []),
    ...(c.api ? [c.api.key] : []),
  ])
  const names = new Set([...EVENT_COLUMN_NAMES, ...shown])
  const exportTexts = EXPORT_SHAPE.texts.map(({ column }) => column)
  const copies = (found: Set<string>) => found.size >= 11 || exportTexts.every((column) => found.has(column))
  const item = String.raw`['"]?(?:[a-z]\w*\.)?[a-z_]+['"]?`
  const run = new RegExp(`${item}(?:\\s*,\\s*${item})+`, 'g')
  const found: string[] = []
  for (const file of sourceFiles(SRC)) {
    const module = relative(SRC, file)
    if (module === 'db/event-columns.ts') continue
    const text = readFileSync(file, 'utf8')
      // 'a, b' + 'c, d' is one list.
      .replace(/(['"`])\s*\+\s*(['"`])/g, '')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/\/\/.*$/gm, '')
    for (const match of text.matchAll(run)) {
      const listed = match[0].split(',').map((s) =>
        s
          .trim()
          .replace(/['"]/g, '')
          .replace(/^[a-z]\w*\./, ''),
      )
      if (copies(new Set(listed.filter((name) => names.has(name))))) found.push(`${module}: a list`)
    }
    for (const match of text.matchAll(/\{[^{}]*\}/g)) {
      const keys = [...match[0].matchAll(/\b([a-z_]+)\??\s*:/g)].map((m) => m[1] as string)
      if (copies(new Set(keys.filter((name) => names.has(name))))) found.push(`${module}: an object`)
    }
  }
  assert.deepEqual(found.sort(), [
    // The chain's v1 columns: a frozen format, held to the description by event-columns.test.ts.
    'domain/chain/canonical.ts: a list',
    // insertedRow: the one place a request's fields become columns, typed by the table, so the
    // compiler holds it to the description.
    'domain/events/store.ts: an object',
  ])
})
