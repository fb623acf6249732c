// /settings/guardrails/ (SPEC §11): the account's locks, freeze windows, promotion rules and bad
// versions; members read them, admins change them through the audited commands. Plain forms with
// CSRF; a refused form comes back (422) with each bad field named and nothing stored; a change
// redirects with a notice (post/redirect/get).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { environmentListing } from '../../domain/board/environments.js'
import type { FieldError } from '../../domain/events/event.js'
import {
  lockEnvironment,
  markVersionBad,
  markVersionGood,
  unlockById,
} from '../../domain/guardrails/commands.js'
import { addFreezeWindow, removeFreezeWindow } from '../../domain/guardrails/freeze-commands.js'
import {
  readBadVersionInput,
  readFreezeInput,
  readLockInput,
  readPromotionInput,
} from '../../domain/guardrails/inputs.js'
import { removePromotionRule, setPromotionRule } from '../../domain/guardrails/promotion-commands.js'
import { recurringWords } from '../../domain/guardrails/schedule-words.js'
import { loadBadVersions, loadFreezes, loadLocks, loadPromotionRules } from '../../domain/guardrails/store.js'
import { knownNames } from '../../domain/names/rename.js'
import { type SessionUser, takeFlash } from '../../domain/sessions.js'
import { MAX_ID, parseWholeNumber } from '../../domain/whole-numbers.js'
import { guardrailsPage, promotionText, type RefusedForm } from '../../views/guardrails-page.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem } from '../problem.js'
import { auditSource } from './audit-context.js'
import type { UiContext } from './context.js'
import { formValues, freezeFields, freezeRow, inZone, utcText, viewerZone } from './guardrail-fields.js'

// Generous limits: a value too long for its field is refused by the domain, beside the field (422).
const text = (maxLength = 10_000) => Type.Optional(Type.String({ maxLength }))
const CSRF = { _csrf: text(200) }
const LockBody = Type.Object({
  ...CSRF,
  environment: text(),
  service: text(),
  reason: text(),
  until: text(),
  tz: text(200),
})
const FreezeBody = Type.Object({
  ...CSRF,
  environment: text(),
  kind: text(40),
  from: text(),
  to: text(),
  weekly: text(),
  cron: text(),
  duration_minutes: text(),
  time_zone: text(200),
  tz: text(200),
  reason: text(),
})
const PromotionBody = Type.Object({
  ...CSRF,
  environment: text(),
  after_environment: text(),
  min_minutes: text(),
  require_good: text(40),
})
const PromotionTarget = Type.Object({ ...CSRF, environment: text(), after_environment: text() })
const BadVersionBody = Type.Object({ ...CSRF, service: text(), version: text(), reason: text() })
const VersionTarget = Type.Object({ ...CSRF, service: text(), version: text() })
const IdParams = Type.Object({ id: Type.String({ maxLength: 40 }) })
const CsrfOnly = Type.Object(CSRF)

const PAGE = '/settings/guardrails/'

const notFound = (what: string) =>
  new HttpProblem(
    404,
    'not-found',
    `No such ${what}`,
    `This account has no such ${what}: it may have been removed already.`,
  )

function idParam(raw: string, what: string): number {
  const id = parseWholeNumber(raw, 1, MAX_ID)
  if (id === undefined) throw notFound(what)
  return id
}

const TIME_ZONES = ['UTC', ...Intl.supportedValuesOf('timeZone').filter((z) => z !== 'UTC')]

export const guardrailRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  const page = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    shown: { notice?: string; refused?: RefusedForm },
  ) => {
    const now = Date.now()
    const [listing, services, locks, freezes, promotions, badVersions] = await Promise.all([
      environmentListing(db, user.accountId),
      knownNames(db, user.accountId, 'service'),
      loadLocks(db, user.accountId),
      loadFreezes(db, user.accountId),
      loadPromotionRules(db, user.accountId),
      loadBadVersions(db, user.accountId),
    ])
    const body = guardrailsPage({
      user,
      csrfToken: ctx.csrfToken(request, reply),
      now,
      environments: listing.all.map((e) => e.name),
      services: services.sort((a, b) => a.localeCompare(b)),
      timeZones: TIME_ZONES,
      locks,
      freezes: freezes.map((f) => freezeRow(f, now)),
      promotions,
      badVersions,
      notice: shown.notice,
      refused: shown.refused,
    })
    return ctx.page(reply, body, shown.refused ? 422 : 200)
  }

  /** A change was made: recording sees it at once, and the page says what it was. */
  const changed = (reply: FastifyReply, user: SessionUser, anchor: string, notice: string) => {
    app.guardrails.invalidate(user.accountId)
    return ctx.redirectWithFlash(reply, user, `${PAGE}#${anchor}`, { notice })
  }

  const admin = (request: FastifyRequest, reply: FastifyReply) => ctx.requireAdmin(request, reply)

  app.get('/settings/guardrails', async (_request, reply) => reply.redirect(PAGE, 301))

  app.get(PAGE, FRESH, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const flash = await takeFlash(db, user)
    return page(request, reply, user, flash?.notice ? { notice: flash.notice } : {})
  })

  app.post('/settings/guardrails/locks', { schema: { body: LockBody }, ...FRESH }, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const b = request.body
    const now = Date.now()
    const zoneErrors: FieldError[] = []
    const zone = viewerZone(b.tz, zoneErrors)
    const read = readLockInput({ ...b, until: inZone(b.until, zone) }, now)
    const refuse = (errors: FieldError[]) =>
      page(request, reply, user, { refused: { form: 'lock', values: formValues(b), errors } })
    if (!read.ok || zoneErrors.length > 0) return refuse([...zoneErrors, ...(read.ok ? [] : read.errors)])
    const done = await lockEnvironment(db, user.accountId, read.value, auditSource(request, user), now)
    if (!done.ok) return refuse(done.errors)
    const { environment, service, endsAt } = read.value
    return changed(
      reply,
      user,
      'locks-heading',
      `${environment} is locked for ${service === null ? 'all services' : service} ${endsAt === null ? 'until someone unlocks it' : `until ${utcText(endsAt)}`}.`,
    )
  })

  app.post(
    '/settings/guardrails/locks/:id/unlock',
    { schema: { params: IdParams, body: CsrfOnly } },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const id = idParam(request.params.id, 'lock')
      const lock = (await loadLocks(db, user.accountId)).find((l) => l.id === id)
      const done = await unlockById(db, user.accountId, id, auditSource(request, user))
      if (!done.ok || !lock) throw notFound('lock')
      return changed(
        reply,
        user,
        'locks-heading',
        `The lock on ${lock.environment} (${lock.service ?? 'all services'}) is lifted.`,
      )
    },
  )

  app.post(
    '/settings/guardrails/freezes',
    { schema: { body: FreezeBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const b = request.body
      const now = Date.now()
      const errors: FieldError[] = []
      const { kind, fields } = freezeFields(b, viewerZone(b.tz, errors), errors)
      const read = readFreezeInput({ environment: b.environment, reason: b.reason, ...fields }, now)
      const refuse = (problems: FieldError[]) =>
        page(request, reply, user, { refused: { form: 'freeze', values: formValues(b), errors: problems } })
      if (!read.ok || errors.length > 0) return refuse([...errors, ...(read.ok ? [] : read.errors)])
      const done = await addFreezeWindow(db, user.accountId, read.value, auditSource(request, user), now)
      // The commands name a recurring window's schedule `cron`; this form may have sent it as `weekly`.
      if (!done.ok)
        return refuse(
          done.errors.map((e) => (kind === 'weekly' && e.field === 'cron' ? { ...e, field: 'weekly' } : e)),
        )
      const s = read.value.schedule
      const words =
        s.kind === 'once'
          ? `from ${utcText(s.startsAt)} to ${utcText(s.endsAt)}`
          : `${recurringWords(s.cron, s.durationMinutes)} (${s.timeZone})`
      return changed(
        reply,
        user,
        'freezes-heading',
        `A freeze window is added to ${read.value.environment}: ${words}.`,
      )
    },
  )

  app.post(
    '/settings/guardrails/freezes/:id/remove',
    { schema: { params: IdParams, body: CsrfOnly } },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const id = idParam(request.params.id, 'freeze window')
      const done = await removeFreezeWindow(db, user.accountId, id, auditSource(request, user))
      if (!done.ok) throw notFound('freeze window')
      return changed(reply, user, 'freezes-heading', 'The freeze window is removed.')
    },
  )

  app.post(
    '/settings/guardrails/promotions',
    { schema: { body: PromotionBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const b = request.body
      const read = readPromotionInput(b)
      const refuse = (errors: FieldError[]) =>
        page(request, reply, user, { refused: { form: 'promotion', values: formValues(b), errors } })
      if (!read.ok) return refuse(read.errors)
      const done = await setPromotionRule(db, user.accountId, read.value, auditSource(request, user))
      if (!done.ok) return refuse(done.errors)
      return changed(
        reply,
        user,
        'promotions-heading',
        `${done.value.replaced ? 'Rule replaced' : 'Rule set'}: ${promotionText(read.value)}.`,
      )
    },
  )

  app.post(
    '/settings/guardrails/promotions/remove',
    { schema: { body: PromotionTarget } },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const target = {
        environment: request.body.environment ?? '',
        afterEnvironment: request.body.after_environment ?? '',
      }
      const done = await removePromotionRule(db, user.accountId, target, auditSource(request, user))
      if (!done.ok) throw notFound('promotion rule')
      return changed(
        reply,
        user,
        'promotions-heading',
        `${target.environment} no longer needs success in ${target.afterEnvironment} first.`,
      )
    },
  )

  app.post(
    '/settings/guardrails/bad-versions',
    { schema: { body: BadVersionBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const b = request.body
      const read = readBadVersionInput(b)
      const refuse = (errors: FieldError[]) =>
        page(request, reply, user, { refused: { form: 'bad_version', values: formValues(b), errors } })
      if (!read.ok) return refuse(read.errors)
      const done = await markVersionBad(db, user.accountId, read.value, auditSource(request, user))
      if (!done.ok) return refuse(done.errors)
      const { service, version } = read.value
      return changed(
        reply,
        user,
        'bad-versions-heading',
        `${service} ${version} is marked bad${done.value.replaced ? ' (its reason is replaced)' : ''}.`,
      )
    },
  )

  app.post(
    '/settings/guardrails/bad-versions/good',
    { schema: { body: VersionTarget } },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const target = { service: request.body.service ?? '', version: request.body.version ?? '' }
      const done = await markVersionGood(db, user.accountId, target, auditSource(request, user))
      if (!done.ok) throw notFound('bad version')
      return changed(
        reply,
        user,
        'bad-versions-heading',
        `${target.service} ${target.version} is no longer marked bad.`,
      )
    },
  )
}
