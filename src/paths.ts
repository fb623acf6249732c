// Where Shiplog's own files are. The code runs from src/ (tests), dist/ (compiled) or dist/bundle/
// (the bundle), at different depths, so paths start from the directory holding package.json.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir
    const up = dirname(dir)
    if (up === dir) throw new Error('cannot find the package.json that Shiplog was installed with')
    dir = up
  }
}

export const PACKAGE_ROOT = packageRoot()
export const PACKAGE_JSON = join(PACKAGE_ROOT, 'package.json')
/** The stylesheet, script and icon the pages load. */
export const PUBLIC_DIR = join(PACKAGE_ROOT, 'public')
