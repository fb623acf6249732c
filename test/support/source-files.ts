// The project's TypeScript sources, for the tests that hold rules on the source text itself.
import { readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'

/** The src/ folder of this checkout. */
export const SRC = resolve(import.meta.dirname, '../../src')

/** Every .ts file under `dir`, depth first. */
export function sourceFiles(dir: string = SRC): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return name.endsWith('.ts') ? [path] : []
  })
}
