// What the README says about Node versions, what package.json declares, and what npm checks at
// install agree: every installed package accepts the oldest Node the project declares, so `npm
// install` on a supported Node prints no EBADENGINE warning.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import semver from 'semver'

const root = new URL('../../', import.meta.url)
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { engines: { node: string } }
const lock = JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { dev?: boolean; engines?: Record<string, string> | string[] }>
}

test('every installed package accepts the oldest Node the project declares, and the README names the same', () => {
  const oldest = semver.minVersion(pkg.engines.node)
  assert.ok(oldest, `engines.node "${pkg.engines.node}" has a minimum version`)
  for (const supported of [oldest.version, '24.0.0']) {
    assert.ok(semver.satisfies(supported, pkg.engines.node), `${supported} satisfies ${pkg.engines.node}`)
    const refusing = Object.entries(lock.packages).flatMap(([path, entry]) => {
      const range = !Array.isArray(entry.engines) ? entry.engines?.node : undefined
      if (path === '' || range === undefined) return []
      return semver.satisfies(supported, range) ? [] : [`${path} requires node ${range}`]
    })
    assert.deepEqual(refusing, [], `npm install on Node ${supported} would print EBADENGINE`)
  }
  const readme = readFileSync(new URL('README.md', root), 'utf8')
  assert.match(readme, new RegExp(`Node\\.js ${oldest.major} or newer`), 'the README names the same minimum')
})
