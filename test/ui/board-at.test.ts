// The board's "As it was at" picker (issue 28, point 8): a date-time field read in the viewer's
// zone (`tz`, sent by the page's script; UTC without it, and the label says which), a refused time
// said beside the field over the board as it is now, "x min ago" counted back from the instant
// shown, and a plain sentence for a time before the first deployment.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp, type TestApp } from '../helper.js'
import { boardTable } from '../support/board.js'
import { type Browser, insertEvents, linkHref, userSession } from '../support/ui.js'

const MIN = 60_000

/** api in prod: 1.0 at t0, 1.1 at t0 + 60 min; the account's history starts at t0. */
async function twoReleases(t: Parameters<typeof buildTestApp>[0]): Promise<{
  ctx: TestApp
  admin: Browser
  t0: number
}> {
  const ctx = await buildTestApp(t)
  // Whole minutes, a day back: far enough that every instant below is in the past.
  const t0 = Math.floor((Date.now() - 24 * 60 * MIN) / MIN) * MIN
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: 'api', environment: 'prod', version: '1.0', status: 'Deployed', received_at: t0 },
    { service: 'api', environment: 'prod', version: '1.1', status: 'Deployed', received_at: t0 + 60 * MIN },
  ])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'admin@example.com', 'admin')
  return { ctx, admin: browser, t0 }
}

/** `2026-11-20T14:05:00`: the wall-clock time of an instant at a fixed offset, as the picker sends it. */
function wallText(ms: number, offsetMinutes = 0): string {
  return new Date(ms + offsetMinutes * MIN).toISOString().slice(0, 19)
}

/** The text of the error said beside the "As it was at" field, or null. */
function fieldError(page: string): string | null {
  return (
    /<p class="field-error" id="f-at-error">([\s\S]*?)<\/p>/.exec(page)?.[1]?.replace(/<[^>]*>/g, '') ?? null
  )
}

test('a time without zone is read in the zone the form sent (tz), else in UTC, and the label says which', async (t) => {
  const { admin, t0 } = await twoReleases(t)
  // 30 minutes after t0 in Asia/Tokyo (UTC+9 all year): 1.0 runs, 1.1 is not there yet.
  const tokyo = await admin.get(
    `/services/?at=${encodeURIComponent(wallText(t0 + 30 * MIN, 9 * 60))}&tz=Asia%2FTokyo`,
  )
  assert.equal(tokyo.statusCode, 200)
  assert.equal(boardTable(tokyo.payload).get('api')?.get('prod')?.version, '1.0')
  assert.match(tokyo.payload, /<span class="zone" data-zone-label>\(Asia\/Tokyo\)<\/span>/)
  assert.match(tokyo.payload, /<input type="hidden" name="tz" value="Asia\/Tokyo" data-viewer-zone>/)
  // The picker shows the time as typed, in that zone.
  assert.match(
    tokyo.payload,
    new RegExp(`name="at" type="datetime-local" step="1" value="${wallText(t0 + 30 * MIN, 540)}"`),
  )
  // The same wall-clock text without tz is UTC: 9 hours later, when 1.1 ran.
  const utc = await admin.get(`/services/?at=${encodeURIComponent(wallText(t0 + 30 * MIN, 9 * 60))}`)
  assert.equal(utc.statusCode, 200)
  assert.equal(boardTable(utc.payload).get('api')?.get('prod')?.version, '1.1')
  assert.match(utc.payload, /<span class="zone" data-zone-label>\(UTC\)<\/span>/)
  // A zone in the text wins over tz.
  const given = await admin.get(
    `/services/?at=${encodeURIComponent(`${wallText(t0 + 30 * MIN)}Z`)}&tz=Asia%2FTokyo`,
  )
  assert.equal(boardTable(given.payload).get('api')?.get('prod')?.version, '1.0')
})

test('a refused time is said beside the field, and the board as it is now is still shown (422)', async (t) => {
  const { admin } = await twoReleases(t)
  const future = new Date(Date.now() + 3600_000).toISOString()
  for (const [bad, reason] of [
    ['yesterday', /Enter a date and time, such as 2026-11-20T14:00/],
    ['2026-13-01T00:00', /Enter a date and time/],
    ['2026-02-30T10:00:00', /Enter a date and time/],
    ['2026-11-20 10:00Z', /Enter a date and time/],
    ['2026-11-20T25:00', /Enter a date and time/],
    [future, /in the future/],
  ] as const) {
    const res = await admin.get(`/services/?at=${encodeURIComponent(bad)}`)
    assert.equal(res.statusCode, 422, `at=${bad}`)
    assert.match(String(res.headers['content-type']), /^text\/html/)
    assert.match(fieldError(res.payload) ?? '', reason, `at=${bad}`)
    assert.match(
      res.payload,
      /<input id="f-at" name="at" type="datetime-local"[^>]*aria-invalid="true" aria-describedby="f-at-error f-at-hint"/,
    )
    // What was typed stays in the field, to correct it.
    assert.ok(res.payload.includes(`value="${bad}"`), `the field keeps ${bad}`)
    // The board is there, as it is now.
    assert.equal(boardTable(res.payload).get('api')?.get('prod')?.version, '1.1')
    assert.doesNotMatch(res.payload, /Showing the board as it was at/)
  }
  const badZone = await admin.get('/services/?at=2026-11-20T10:00&tz=Mars%2FOlympus')
  assert.equal(badZone.statusCode, 422)
  assert.match(fieldError(badZone.payload) ?? '', /time zone name such as Europe\/Berlin/)
  assert.equal(boardTable(badZone.payload).get('api')?.get('prod')?.version, '1.1')
  // A value given twice is no form's doing: a 422 page that names it.
  const twice = await admin.get('/services/?at=2026-01-01T00:00:00Z&at=2026-01-02T00:00:00Z')
  assert.equal(twice.statusCode, 422)
  assert.match(twice.payload, /Give &quot;at&quot; once|Give "at" once/)
})

test('"x min ago" on the board as it was counts back from that instant, not from now', async (t) => {
  const { admin, t0 } = await twoReleases(t)
  const at = new Date(t0 + 85 * MIN).toISOString()
  const res = await admin.get(`/services/?at=${encodeURIComponent(at)}`)
  assert.equal(res.statusCode, 200)
  const prod = boardTable(res.payload).get('api')?.get('prod')
  assert.equal(prod?.version, '1.1')
  // 1.1 finished 25 minutes before the instant shown (and about a day before now).
  assert.match(prod?.text ?? '', /25 min ago/)
  // The script counts from the same instant.
  assert.match(res.payload, new RegExp(`data-relative-base="${at}"`))
  assert.match(res.payload, /count back from then/)
})

test('a time before the first deployment says so, and when the first one started', async (t) => {
  const { admin, t0 } = await twoReleases(t)
  const res = await admin.get(`/services/?at=${encodeURIComponent(new Date(t0 - 60 * MIN).toISOString())}`)
  assert.equal(res.statusCode, 200)
  assert.match(res.payload, /Nothing had been deployed yet at that time\./)
  const first = new Date(t0).toISOString()
  assert.match(
    res.payload,
    new RegExp(`The earliest deployment Shiplog holds started at <time datetime="${first}"`),
  )
  assert.equal(
    linkHref(res.payload, 'Show the board as it was then'),
    `/services/?at=${encodeURIComponent(first)}`,
  )
  assert.doesNotMatch(res.payload, /No service matches these filters/)
  // That link shows 1.0.
  const then = await admin.get(`/services/?at=${encodeURIComponent(first)}`)
  assert.equal(boardTable(then.payload).get('api')?.get('prod')?.version, '1.0')
})

test('with retention on, a time before the earliest kept deployment says history was removed, not that nothing ran', async (t) => {
  const { ctx, admin, t0 } = await twoReleases(t)
  await ctx.database.db
    .updateTable('accounts')
    .set({ retention_days: 30 })
    .where('id', '=', ctx.tenant.account.id)
    .execute()
  const res = await admin.get(`/services/?at=${encodeURIComponent(new Date(t0 - 60 * MIN).toISOString())}`)
  assert.equal(res.statusCode, 200)
  assert.doesNotMatch(res.payload, /Nothing had been deployed yet/)
  assert.match(res.payload, /Shiplog holds no deployment from that time\./)
  assert.match(res.payload, /This account keeps 30 days of history/)
  assert.match(
    res.payload,
    new RegExp(
      `the earliest deployment it still holds started at <time datetime="${new Date(t0).toISOString()}"`,
    ),
  )
})
