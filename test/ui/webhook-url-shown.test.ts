// A Slack incoming-webhook URL's path is its secret: members see only the origin of a webhook's
// target on every page that shows it, admins a masked path; the full URL never leaves the server
// after it was typed. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createWebhook } from '../../src/domain/webhooks/queries.js'
import { buildTestApp, TEST_SECRET } from '../helper.js'
import { deploy, userSession } from '../support/ui.js'

const SECRET_PATH = 'T0123ABCD/B0456EFGH/abcdEFGHijklMNOPqrstUVWX'
const SLACK = `https://hooks.slack.com/services/${SECRET_PATH}`

test('members see the origin of a webhook target, admins a masked path, nobody the secret path', async (t) => {
  const ctx = await buildTestApp(t)
  const { webhook } = await createWebhook(
    ctx.database.db,
    TEST_SECRET,
    {
      accountId: ctx.tenant.account.id,
      url: SLACK,
      format: 'slack',
      statuses: ['Deployed'],
      outcomes: [],
      environments: [],
      services: [],
      grafanaToken: null,
      createdBy: 'ada@example.com',
    },
    { allowPrivate: false },
  )
  // A queued delivery, so the log page has a row.
  assert.equal(
    (
      await deploy(ctx.app, ctx.tenant.key, {
        service: 'api',
        environment: 'prod',
        version: '1',
        status: 'Deployed',
      })
    ).status,
    201,
  )
  const member = (await userSession(ctx, ctx.tenant.account.id, 'mel@example.com', 'member')).browser
  const admin = (await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')).browser
  const pages = ['/settings/webhooks/', `/settings/webhooks/${webhook.id}/`, '/settings/', '/settings/audit/']
  for (const path of pages) {
    for (const [who, browser] of [
      ['member', member],
      ['admin', admin],
    ] as const) {
      const res = await browser.get(path)
      for (const piece of ['abcdEFGHijkl', 'B0456EFGH', 'T0123ABCD']) {
        assert.ok(!res.payload.includes(piece), `${who} sees ${piece} on ${path}`)
      }
    }
  }
  const asMember = await member.get('/settings/webhooks/')
  assert.ok(asMember.payload.includes('https://hooks.slack.com'))
  assert.ok(!asMember.payload.includes('hooks.slack.com/services'), 'members see no path at all')
  const memberLog = await member.get(`/settings/webhooks/${webhook.id}/`)
  assert.equal(memberLog.statusCode, 200)
  assert.ok(!memberLog.payload.includes('hooks.slack.com/services'))
  const asAdmin = await admin.get('/settings/webhooks/')
  assert.ok(asAdmin.payload.includes('https://hooks.slack.com/services/T0•••/B0•••/ab•••'), asAdmin.payload)
})
