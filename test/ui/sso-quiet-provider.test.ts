// The single sign-on tests' provider (test/support/oidc-provider.ts) keeps oidc-provider's own
// warnings (unsupported runtime, development store, development login screens) out of the test
// output, which they filled on every `npm test` (issue 28, point 13); other warnings still pass.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startTestProvider } from '../support/oidc-provider.js'

test("the test provider drops oidc-provider's own warnings and lets every other warning through", async (t) => {
  const seen: string[] = []
  const original = console.warn
  console.warn = (...args: unknown[]) => {
    seen.push(args.map(String).join(' '))
  }
  t.after(() => {
    console.warn = original
  })
  const provider = await startTestProvider(t, { shiplogUrl: 'http://127.0.0.1:9' })
  // The development login screens warn when they are set up; a sign-in uses them.
  const authorization = new URL(`${provider.issuer}/auth`)
  for (const [name, value] of Object.entries({
    client_id: provider.clientId,
    response_type: 'code',
    scope: 'openid email',
    redirect_uri: 'http://127.0.0.1:9/login/oidc/callback',
    state: 'state-1',
    nonce: 'nonce-1',
  })) {
    authorization.searchParams.set(name, value)
  }
  const callback = await provider.authorize(authorization.toString(), 'ada@example.com')
  assert.equal(callback.searchParams.get('state'), 'state-1')
  console.warn('a warning of the tests themselves')
  assert.deepEqual(seen, ['a warning of the tests themselves'])
})
