// Helpers for the guardrails UI tests: deployments recorded through POST /deploy as a pipeline sends
// them, with the guardrails recording finds on the event; guardrails set through the audited
// commands, as Settings and `shiplog` set them.
import assert from 'node:assert/strict'
import type { AuditSource } from '../../src/domain/audit/log.js'
import type { TestApp } from '../helper.js'
import { deploy } from './ui.js'

/** Who the tests' guardrails are set by (from the command line), named in every lock and mark. */
export const OPERATOR = 'ops <lead> "on call"'
export const OPERATOR_SOURCE: AuditSource = {
  actor: { kind: 'cli', id: null, name: OPERATOR },
  address: null,
}

export interface Recorded {
  id: number
  rules: readonly string[]
}

/**
 * Records one event through POST /deploy and returns its id and the rules it broke. What it broke
 * is what the guardrails say for it at its arrival (the check's own rules): ingest stores that on
 * the event; where this tree's ingest does not flag events yet (it arrives with the API branch of
 * issue 27), the same answer is written to the event, so the pages are tested on what recording
 * stores either way.
 */
export async function record(ctx: TestApp, fields: Record<string, string>): Promise<Recorded> {
  const { status, body } = await deploy(ctx.app, ctx.tenant.key, { status: 'Deployed', ...fields })
  assert.equal(status, 201, JSON.stringify(body))
  const id = Number(body.id)
  const row = await ctx.database.db
    .selectFrom('events')
    .select(['guardrails', 'received_at', 'service', 'environment', 'version'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow()
  ctx.app.guardrails.invalidate(ctx.tenant.account.id)
  const expected = await ctx.app.guardrails.brokenBy(
    ctx.tenant.account.id,
    { service: row.service, environment: row.environment, version: row.version },
    Number(row.received_at),
  )
  if (row.guardrails === null) {
    if (expected.length > 0) {
      await ctx.database.db
        .updateTable('events')
        .set({ guardrails: expected.join(',') })
        .where('id', '=', id)
        .execute()
    }
  } else {
    assert.equal(row.guardrails, expected.join(','), 'recording flagged the event by the rules')
  }
  await ctx.app.deployments.current()
  return { id, rules: expected }
}

/** "2026-11-28T10:00:00.000Z" for an event time `minutes` after `base`. */
export function minutesAfter(base: number, minutes: number): string {
  return new Date(base + minutes * 60_000).toISOString()
}
