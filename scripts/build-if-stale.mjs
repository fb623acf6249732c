// Run by `npm start` before the server: builds only when a source is newer than the build, so a
// start with a current build takes a second instead of the 11-29 s of a full build.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))
// The bundle is what bin/shiplog.js runs, and `npm run build` writes it last.
const built = join(root, 'dist', 'bundle', 'shiplog.mjs')
// What the build is made from: the sources, the compiler settings, the bundler and the dependencies.
const inputs = ['src', 'tsconfig.json', 'tsconfig.build.json', 'scripts/bundle.mjs', 'package-lock.json']

function newestMtime(path) {
  if (!existsSync(path)) return 0
  const stat = statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  let newest = 0
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)))
  return newest
}

const builtAt = existsSync(built) ? statSync(built).mtimeMs : 0
const changedAt = Math.max(...inputs.map((input) => newestMtime(join(root, input))))
if (builtAt === 0 || changedAt > builtAt) {
  process.stderr.write(
    builtAt === 0 ? 'shiplog: building (first start)\n' : 'shiplog: building (sources changed)\n',
  )
  const npm = process.env.npm_execpath
  const result = npm
    ? spawnSync(process.execPath, [npm, 'run', 'build', '--silent'], { cwd: root, stdio: 'inherit' })
    : spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' })
  process.exit(result.status ?? 1)
}
