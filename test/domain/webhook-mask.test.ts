// How webhook targets are shown, without a database: members see the origin, admins a masked path
// that tells targets apart and never holds enough to post.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { maskedWebhookUrl, shownWebhookUrl, webhookOrigin } from '../../src/domain/webhooks/mask.js'

const SLACK = 'https://hooks.slack.com/services/T0123ABCD/B0456EFGH/abcdEFGHijklMNOPqrstUVWX'

test('members see scheme, host and port only', () => {
  assert.equal(shownWebhookUrl(SLACK, 'member'), 'https://hooks.slack.com')
  assert.equal(webhookOrigin('http://user:pw@h.example.com:8080/x?y#z'), 'http://h.example.com:8080')
  assert.equal(webhookOrigin('not a url'), '(unreadable URL)')
})

test('admins see a masked path: the first segment kept, the rest masked', () => {
  const shown = shownWebhookUrl(SLACK, 'admin')
  assert.equal(shown, 'https://hooks.slack.com/services/T0•••/B0•••/ab•••')
  assert.ok(!shown.includes('abcdEFGHijkl'))
  assert.equal(
    maskedWebhookUrl('https://h.example.com/hook?token=s3cret#x'),
    'https://h.example.com/hook?•••#•••',
  )
  assert.equal(maskedWebhookUrl('https://h.example.com/'), 'https://h.example.com/')
  assert.equal(maskedWebhookUrl('https://h.example.com'), 'https://h.example.com/')
  // A long first segment may be the token itself.
  assert.equal(maskedWebhookUrl('https://h.example.com/0123456789abcdef0123'), 'https://h.example.com/01•••')
  assert.equal(maskedWebhookUrl('https://user:pw@h.example.com/a/b'), 'https://h.example.com/a/•••')
  // Two Slack targets of one workspace still differ.
  const other = 'https://hooks.slack.com/services/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'
  assert.notEqual(maskedWebhookUrl(other), maskedWebhookUrl(SLACK))
})

test('no secret path segment survives masking, whatever the URL', () => {
  for (const url of [
    SLACK,
    'https://discord.com/api/webhooks/1234567890/tokentokentokentoken',
    'https://x.io/a/b/c/d',
  ]) {
    const masked = maskedWebhookUrl(url)
    const last = new URL(url).pathname.split('/').at(-1) ?? ''
    assert.ok(!masked.includes(last), `${url} -> ${masked}`)
  }
})
