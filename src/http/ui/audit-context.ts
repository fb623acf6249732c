// Who did it and from where, for an audit entry made while answering a request: the signed-in
// user, else the API key that authenticated the request, else nobody known.
import type { FastifyRequest } from 'fastify'
import type { AuditActor, AuditSource } from '../../domain/audit/log.js'
import type { SessionUser } from '../../domain/sessions.js'

/** The actor of the request: `user` when given (the handler's checked user), else the session's. */
export function requestActor(request: FastifyRequest, user?: SessionUser | null): AuditActor {
  const session = user ?? request.user
  if (session) return { kind: 'user', id: session.userId, name: session.email }
  return { kind: 'anonymous', id: null, name: 'anonymous' }
}

/** The actor for a request authenticated by an API key (named by its name, never by its value). */
export function keyActor(key: { id: number; name: string }): AuditActor {
  return { kind: 'key', id: key.id, name: key.name }
}

/** actor, address and account of a signed-in user's request, ready to spread into recordAudit. */
export function auditFrom(request: FastifyRequest, user: SessionUser) {
  return { accountId: user.accountId, actor: requestActor(request, user), address: request.ip }
}

/** Who and from where, for an audited domain command called while answering a signed-in user. */
export function auditSource(request: FastifyRequest, user: SessionUser): AuditSource {
  return { actor: requestActor(request, user), address: request.ip }
}
