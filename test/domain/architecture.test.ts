// The house's layering (../shared/ARCHITECTURE.md), checked on the source: arrows point one way
// (cli → server → app → http → views, http → domain → db) and no module imports itself round a circle.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import { test } from 'node:test'
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
