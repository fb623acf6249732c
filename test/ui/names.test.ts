// Settings refuses key names with terminal control characters or text-direction overrides, as the
// CLI does (test/cli/names.test.ts).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp } from '../helper.js'
import { countRows, userSession } from '../support/ui.js'

test('a key name with a bidi override or a C1 control is refused with 422 and nothing is stored', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  const before = await countRows(ctx.database, 'api_keys')
  for (const name of ['deploy\u202egpj.exe', 'red\u009b31m', 'iso\u2066late']) {
    const res = await browser.submit('/settings/', '/settings/keys', { name })
    assert.equal(res.statusCode, 422, name)
    assert.match(res.payload, /must not contain control characters or text-direction overrides/)
  }
  assert.equal(await countRows(ctx.database, 'api_keys'), before)
})
