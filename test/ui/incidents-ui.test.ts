// Incident marks in the UI (issue 27): an admin marks a deployment on its page (link, note, fix),
// says "this fixed #N" from the fixing deployment and removes a mark, with CSRF and an audit entry;
// a member sees the mark but no form; /insights/ says which failures and restore times came from
// marks and counts deployments that arrived during a freeze, each with its list. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { incidentsOf } from '../../src/domain/deployments/incident-store.js'
import { buildTestApp, type TestApp } from '../helper.js'
import {
  assertRedirect,
  type Browser,
  deploy,
  shownVersions,
  unescapeHtml,
  userSession,
} from '../support/ui.js'

const MIN = 60_000
const DAY = 24 * 60 * MIN

/** The text of the element with this id, tags removed and white space folded (as a reader sees it). */
function textOf(page: string, id: string): string {
  const start = page.indexOf(`id="${id}"`)
  assert.ok(start !== -1, `the page has #${id}`)
  const open = page.lastIndexOf('<', start)
  const tag = /^<(\w+)/.exec(page.slice(open))?.[1] ?? 'section'
  const end = page.indexOf(`</${tag}>`, start)
  return unescapeHtml(
    page
      .slice(open, end)
      .replace(/<[^>]*>/g, ' ')
      .replace(/\s+/g, ' ')
      // Space a tag left inside brackets or before punctuation is no word break.
      .replace(/\( /g, '(')
      .replace(/ ([).,;:])/g, '$1')
      .trim(),
  )
}

/**
 * api in prod, one day ten days back (UTC), placed in time by occurred_at: a 1.0 at 06:00, b 1.1
 * failed at 07:00, c 1.2 at 08:00 (restores b after 60 min), d 1.3 at 09:00, e 1.4 at 10:30.
 */
async function history(ctx: TestApp) {
  const day = new Date(Date.now() - 10 * DAY).toISOString().slice(0, 10)
  const base = Date.parse(`${day}T06:00:00Z`)
  const ids: number[] = []
  for (const [version, status, minute] of [
    ['1.0', 'Deployed', 0],
    ['1.1', 'Failed', 60],
    ['1.2', 'Deployed', 120],
    ['1.3', 'Deployed', 180],
    ['1.4', 'Deployed', 270],
  ] as const) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'api',
      environment: 'prod',
      version,
      status,
      occurred_at: new Date(base + minute * MIN).toISOString(),
    })
    assert.equal(res.status, 201, JSON.stringify(res.body))
    ids.push(Number(res.body.id))
  }
  const next = new Date(Date.parse(`${day}T00:00:00Z`) + DAY).toISOString().slice(0, 10)
  const [a, b, c, d, e] = ids as [number, number, number, number, number]
  return { a, b, c, d, e, window: `environment=prod&range=custom&from=${day}&to=${next}&tz=UTC` }
}

async function page(browser: Browser, url: string, status = 200): Promise<string> {
  const res = await browser.get(url)
  assert.equal(res.statusCode, status, `${url}: ${res.payload.slice(0, 300)}`)
  return res.payload
}

test('an admin marks, names the fix, says "this fixed", removes; insights say what came from marks', async (t) => {
  const ctx = await buildTestApp(t)
  const { a, b, c, d, e, window } = await history(ctx)
  const { browser: admin } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  const { browser: member } = await userSession(ctx, ctx.tenant.account.id, 'mel@example.com', 'member')

  // Before any mark: the plain figure, and no word of marks.
  const plain = await page(admin, `/insights/?${window}`)
  assert.match(
    textOf(plain, 'figure-failure-rate'),
    /\(1 failed \+ 0 rolled back\) ÷ \(4 succeeded \+ 1 failed\) = 20 %/,
  )
  assert.ok(!plain.includes('failure-rate-marks'))
  assert.ok(!plain.includes('restore-marks'))

  const dPage = `/deployments/${d}/`
  const before = await page(admin, dPage)
  assert.match(textOf(before, 'incident-state'), /Not marked as having caused an incident/)
  assert.ok(before.includes('id="incident-form"'))
  // The fix is chosen from the later successes of api in prod: only e.
  const fixChoices = before.slice(before.indexOf('id="inc-fixed-by"'), before.indexOf('</select>'))
  assert.deepEqual(
    [...fixChoices.matchAll(/<option value="(\d+)"/g)].map((m) => Number(m[1])),
    [e],
  )
  assertRedirect(await admin.get(`/deployments/${d}`), dPage, 301)

  // A bad link: 422 beside its field, nothing stored.
  const refused = await admin.submit(dPage, `${dPage}incident`, {
    link: 'status page',
    note: '',
    fixed_by: '',
  })
  assert.equal(refused.statusCode, 422)
  assert.match(textOf(refused.payload, 'inc-link-problem'), /link must be an absolute http\(s\) address/)
  assert.equal((await incidentsOf(ctx.database.db, ctx.tenant.account.id, [d])).size, 0)

  const marked = await admin.submit(dPage, `${dPage}incident`, {
    link: 'https://status.example.com/incidents/42',
    note: 'checkout <b>500s</b>',
    fixed_by: String(e),
  })
  assertRedirect(marked, dPage, 303)
  const after = await page(admin, dPage)
  assert.match(after, /is marked as having caused an incident/)
  const state = textOf(after, 'incident-state')
  assert.match(state, /Caused an incident: https:\/\/status\.example\.com\/incidents\/42/)
  assert.match(state, /checkout <b>500s<\/b>/, 'the note is shown as text')
  assert.match(state, new RegExp(`Fixed by #${e} 1\\.4`))
  assert.match(state, /Marked by ada@example\.com/)
  assert.ok(!after.includes('<b>500s</b>'), 'escaped')

  // The fixing deployment's page names what it fixed.
  assert.match(
    textOf(await page(member, `/deployments/${e}/`), 'fixes-state'),
    new RegExp(`Fixed #${d} 1\\.3`),
  )

  // Insights: (1 failed + 0 rolled back + 1 marked) ÷ 5 = 40 %; restore times 60 (b → c) and
  // 90 min (d → e, its fix): median 75 min.
  const one = await page(member, `/insights/?${window}`)
  assert.match(
    textOf(one, 'figure-failure-rate'),
    /\(1 failed \+ 0 rolled back \+ 1 marked incident\) ÷ \(4 succeeded \+ 1 failed\) = 40 %/,
  )
  assert.match(textOf(one, 'failure-rate-marks'), /^1 of 2 failures from incident marks/)
  assert.match(
    textOf(one, 'restore-marks'),
    /^1 of 2 restore times from incident marks; 1 was measured to the fix/,
  )
  assert.match(textOf(one, 'figure-restore'), /median 1 h 15 min/)
  const listHref = /href="(\/insights\/deployments\?[^"]*kind=incident)"/.exec(one)?.[1]
  assert.ok(listHref, 'the marks link to their list')
  const list = await page(member, unescapeHtml(listHref))
  assert.deepEqual(shownVersions(list), ['1.3'])
  assert.ok(list.includes(`href="/deployments/${d}/"`))

  // "This fixed #a", from c's page: a is marked, fixed by c. CFR (1 + 2) ÷ 5.
  const cPage = `/deployments/${c}/`
  const choices = await page(admin, cPage)
  assert.ok(choices.includes(`<option value="${a}"`) && choices.includes(`<option value="${b}"`))
  assertRedirect(await admin.submit(cPage, `${cPage}fixed`, { incident: String(a) }), cPage, 303)
  const two = await page(member, `/insights/?${window}`)
  assert.match(textOf(two, 'figure-failure-rate'), /= 60 %/)
  assert.match(textOf(two, 'failure-rate-marks'), /^2 of 3 failures from incident marks/)
  // A fix must be later: c cannot have fixed e.
  const late = await admin.submit(cPage, `${cPage}fixed`, { incident: String(e) })
  assert.equal(late.statusCode, 422)
  assert.match(textOf(late.payload, 'fix-incident-problem'), /finished before/)

  // Removing both marks gives back the plain page's figures.
  for (const id of [a, d]) {
    const p = `/deployments/${id}/`
    assertRedirect(await admin.submit(p, `${p}incident/remove`, {}), p, 303)
  }
  assert.equal(
    textOf(await page(member, `/insights/?${window}`), 'figure-failure-rate'),
    textOf(plain, 'figure-failure-rate'),
  )

  // A member sees marks, never a form, and cannot post one.
  const memberView = await page(member, dPage)
  assert.ok(!memberView.includes('id="incident-form"') && !memberView.includes('incident/remove'))
  const memberPost = await member.submit(dPage, `${dPage}incident`, { note: 'x' })
  assert.equal(memberPost.statusCode, 403)
  assert.equal(await page(member, '/deployments/999999/', 404).then(() => 'ok'), 'ok')

  // Every change audited with the admin's name.
  const entries = await ctx.database.db
    .selectFrom('audit_entries')
    .select(['action', 'actor', 'target'])
    .where('action', 'like', 'deployment.%')
    .orderBy('id')
    .execute()
  assert.deepEqual(
    entries.map((x) => [x.action, x.actor, x.target]),
    [
      ['deployment.incident_marked', 'ada@example.com', `api 1.3 in prod (#${d})`],
      ['deployment.incident_marked', 'ada@example.com', `api 1.0 in prod (#${a})`],
      ['deployment.incident_unmarked', 'ada@example.com', `api 1.0 in prod (#${a})`],
      ['deployment.incident_unmarked', 'ada@example.com', `api 1.3 in prod (#${d})`],
    ],
  )
})

test('insights count deployments that arrived during a freeze, and the other guardrails broken', async (t) => {
  const ctx = await buildTestApp(t)
  const { a, c, e, window } = await history(ctx)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'mel@example.com', 'member')
  const none = await page(browser, `/insights/?${window}`)
  assert.match(textOf(none, 'figure-freeze'), /Deployed during a freeze 0 0 deployments of 5 finished/)
  assert.match(textOf(none, 'guardrail-flags'), /No other guardrail was broken/)

  // The flags recording stores (SPEC §11), set on the stored events as ingest would have set them.
  const db = ctx.database.db
  await db.updateTable('events').set({ guardrails: 'freeze' }).where('id', '=', e).execute()
  await db.updateTable('events').set({ guardrails: 'lock,freeze' }).where('id', '=', c).execute()
  await db.updateTable('events').set({ override_reason: 'hotfix' }).where('id', '=', a).execute()
  const flagged = await page(browser, `/insights/?${window}`)
  assert.match(textOf(flagged, 'figure-freeze'), /Deployed during a freeze 2 2 deployments of 5 finished/)
  assert.equal(
    textOf(flagged, 'guardrail-flags'),
    'Also: 1 into a locked environment · 1 with the check overridden.',
  )
  const freezeHref = /href="(\/insights\/deployments\?[^"]*kind=freeze)"/.exec(flagged)?.[1]
  assert.ok(freezeHref)
  assert.deepEqual(shownVersions(await page(browser, unescapeHtml(freezeHref))), ['1.4', '1.2'])
  const overrideHref = /href="(\/insights\/deployments\?[^"]*kind=override)"/.exec(flagged)?.[1]
  assert.ok(overrideHref)
  assert.deepEqual(shownVersions(await page(browser, unescapeHtml(overrideHref))), ['1.0'])
})
