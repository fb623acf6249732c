// What a delivery's payload is built from (rules.ts builds it): its event, and the deployment it
// concerns, read fresh at each attempt (a deployment may have finished or been renamed meanwhile).
import type { Kysely } from 'kysely'
import type { DB, DeliveryRow, DeploymentRow, EventRow } from '../../db/schema.js'
import type { Outcome, PayloadInput } from './rules.js'

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(Number(ms)).toISOString()
}

/** The payload's values for delivery `d`, or null when its event no longer exists. */
export async function payloadInput(
  db: Kysely<DB>,
  d: DeliveryRow,
  publicUrl: string | null,
): Promise<PayloadInput | null> {
  const event = (await db
    .selectFrom('events')
    .selectAll()
    .where('id', '=', Number(d.event_id))
    .executeTakeFirst()) as EventRow | undefined
  if (!event) return null
  const deployment =
    d.deployment_id === null
      ? undefined
      : ((await db
          .selectFrom('deployments')
          .selectAll()
          .where('id', '=', Number(d.deployment_id))
          .executeTakeFirst()) as DeploymentRow | undefined)
  return {
    deliveryId: d.delivery_id,
    kind: d.kind,
    event: {
      id: Number(event.id),
      service: event.service,
      environment: event.environment,
      version: event.version,
      status: event.status,
      receivedAt: new Date(Number(event.received_at)).toISOString(),
      deployer: event.deployer,
      url: event.url,
      commit: event.commit_sha,
      description: event.description,
      guardrails: event.guardrails === null || event.guardrails === '' ? [] : event.guardrails.split(','),
      overrideReason: event.override_reason,
    },
    deployment: deployment
      ? {
          id: Number(deployment.id),
          service: deployment.service,
          environment: deployment.environment,
          version: deployment.version,
          startedAt: new Date(Number(deployment.started_at)).toISOString(),
          finishedAt: iso(deployment.finished_at),
          result: deployment.result as Outcome | null,
          // None while open, nor when its end was received "before" its start (clocks that disagree).
          durationSeconds:
            deployment.finished_at === null || Number(deployment.finished_at) < Number(deployment.started_at)
              ? null
              : Math.round((Number(deployment.finished_at) - Number(deployment.started_at)) / 1000),
          rollback: Number(deployment.rollback) === 1,
        }
      : null,
    // The service's page under the name its deployments have now (a renamed one's old page is gone).
    serviceUrl: publicUrl
      ? `${publicUrl}/services/${encodeURIComponent(deployment?.service ?? event.service)}`
      : null,
  }
}
