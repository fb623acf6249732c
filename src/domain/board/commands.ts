// The board's settings as audited commands: a service's details, the environments' order and
// visibility, the stall time and the badge token. Each owns its transaction and writes its entry
// with the change (an entry exists exactly when the change does), whoever asks: Settings today, the
// command line or an API tomorrow, with the same entry.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type AuditDetail, type AuditSource, recordAudit } from '../audit/log.js'
import { type ServiceMeta, saveServiceMeta, serviceMeta } from '../services.js'
import { changeEnvironment, type EnvironmentMove, environmentListing } from './environments.js'
import { boardSettings, rotateBadgeToken, setStallMinutes } from './settings.js'

const META_FIELDS = ['team', 'description', 'repositoryUrl', 'runbookUrl', 'dashboardUrl'] as const

/** Saves a service's details; the entry names each field that changed, "before → after". */
export function saveServiceMetaAudited(
  db: Kysely<DB>,
  accountId: number,
  service: string,
  meta: Omit<ServiceMeta, 'name'>,
  who: AuditSource,
): Promise<void> {
  return db.transaction().execute(async (trx) => {
    const before = await serviceMeta(trx, accountId, service)
    await saveServiceMeta(trx, accountId, service, meta)
    const details: Record<string, AuditDetail> = {}
    for (const field of META_FIELDS) {
      if (before[field] !== meta[field]) {
        details[field] = `${before[field] ?? '(none)'} → ${meta[field] ?? '(none)'}`
      }
    }
    if (Object.keys(details).length === 0) return
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'settings.changed',
      target: `service ${service}`,
      details,
    })
  })
}

/** Moves, hides or shows one environment; false, and no entry, when the account has no such one. */
export function changeEnvironmentAudited(
  db: Kysely<DB>,
  accountId: number,
  environment: string,
  move: EnvironmentMove,
  who: AuditSource,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const listed = (l: { all: { name: string; hidden: boolean }[] }) =>
      l.all.map((e) => (e.hidden ? `${e.name} (hidden)` : e.name))
    const before = listed(await environmentListing(trx, accountId))
    if (!(await changeEnvironment(trx, accountId, environment, move))) return false
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'settings.changed',
      target: 'environments',
      details: {
        environment,
        change: move,
        from: before,
        to: listed(await environmentListing(trx, accountId)),
      },
    })
    return true
  })
}

/** Sets the stall time (minutes, already checked by parseStallMinutes). */
export function setStallMinutesAudited(
  db: Kysely<DB>,
  accountId: number,
  minutes: number,
  who: AuditSource,
): Promise<void> {
  return db.transaction().execute(async (trx) => {
    const before = await boardSettings(trx, accountId)
    await setStallMinutes(trx, accountId, minutes)
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'settings.changed',
      target: 'stall minutes',
      details: { from: before.stallMinutes, to: minutes },
    })
  })
}

/** A new badge token: old badge links stop working. The entry never holds the token (a secret). */
export function rotateBadgeTokenAudited(db: Kysely<DB>, accountId: number, who: AuditSource): Promise<void> {
  return db.transaction().execute(async (trx) => {
    await rotateBadgeToken(trx, accountId)
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'settings.changed',
      target: 'badge link',
      details: { change: 'rotated: old badge links stop working' },
    })
  })
}
