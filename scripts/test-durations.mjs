// A node:test reporter that adds up, per test file, the time of its top-level tests (they run one
// after another within a file), and writes one line per file: milliseconds, a tab, the path.
// scripts/run-tests.mjs reads it to print the slowest files, which is where CI time goes.
import { relative } from 'node:path'

export default async function* durations(source) {
  const perFile = new Map()
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const { nesting, file, details } = event.data
    if (nesting !== 0 || !file) continue
    perFile.set(file, (perFile.get(file) ?? 0) + (details?.duration_ms ?? 0))
  }
  for (const [file, ms] of perFile) yield `${Math.round(ms)}\t${relative(process.cwd(), file)}\n`
}
