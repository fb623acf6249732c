// Settings → API keys (SPEC §7): the create form offers scope checkboxes (ingest by default, at
// least one), and the key list shows each key's scopes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp } from '../helper.js'
import { createUserIn, login } from '../support/ui.js'

test('Settings creates keys with the checked scopes and lists them; none checked is refused', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'admin@example.com')
  const browser = await login(ctx.app, 'admin@example.com')
  const page = await browser.get('/settings/')
  assert.match(
    page.payload,
    /<input type="checkbox" id="key-scope-ingest" name="scope" value="ingest" checked>/,
  )
  assert.match(page.payload, /<input type="checkbox" id="key-scope-read" name="scope" value="read">/)
  assert.match(page.payload, /<label for="key-scope-read">/)
  assert.match(
    page.payload,
    /<td>ci<\/td>[\s\S]*?<td class="key-scopes">ingest<\/td>/,
    'the existing key shows its scope',
  )

  const create = async (name: string, scopes: string[]) => {
    const token = await browser.csrf('/settings/')
    const body = new URLSearchParams({ _csrf: token, name, scopes_offered: '1' })
    for (const s of scopes) body.append('scope', s)
    return ctx.app.inject({
      method: 'POST',
      url: '/settings/keys',
      headers: { cookie: browser.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: body.toString(),
    })
  }
  assert.equal((await create('reader', ['read'])).statusCode, 303)
  assert.equal((await create('both', ['ingest', 'read'])).statusCode, 303)
  const none = await create('nothing', [])
  assert.equal(none.statusCode, 422)
  assert.match(none.payload, /Choose what the key may do/)
  assert.equal((await create('weird', ['admin'])).statusCode, 422)
  // A post from a page without the checkboxes (or a script) gets the default: ingest.
  assert.equal((await browser.submit('/settings/', '/settings/keys', { name: 'old-form' })).statusCode, 303)

  const rows = await ctx.database.db.selectFrom('api_keys').select(['name', 'scopes']).orderBy('id').execute()
  assert.deepEqual(
    rows.map((r) => [r.name, r.scopes]),
    [
      ['ci', 'ingest'],
      ['reader', 'read'],
      ['both', 'ingest,read'],
      ['old-form', 'ingest'],
    ],
  )
  const listed = (await browser.get('/settings/')).payload
  assert.match(listed, /<th scope="col">Scopes<\/th>/)
  assert.match(listed, /<td>reader<\/td>[\s\S]*?<td class="key-scopes">read<\/td>/)
  assert.match(listed, /<td>both<\/td>[\s\S]*?<td class="key-scopes">ingest, read<\/td>/)
})
