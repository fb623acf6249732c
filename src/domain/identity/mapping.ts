// Which account and role a person signing in with single sign-on gets: pure rules over the ID token's claims.
import type { OidcConfig } from '../../config.js'
import type { UserRole } from '../../db/schema.js'

/** Why a sign-in is refused, as stable codes (audit details) with a sentence for the person. */
export type RefusalReason =
  | 'email_missing'
  | 'email_unverified'
  | 'no_account_mapping'
  | 'identity_mismatch'
  | 'provider_error'
  | 'invalid_response'
  | 'unknown_state'
  | 'expired_state'
  | 'other_browser'
  | 'provider_unavailable'

export type Membership =
  | { readonly ok: true; readonly email: string; readonly accountName: string; readonly role: UserRole }
  | { readonly ok: false; readonly reason: RefusalReason; readonly email: string | null }

/** The groups claim as a list of names; a single string counts as one group, anything else as none. */
export function groupsOf(claims: Readonly<Record<string, unknown>>, claim: string): string[] {
  const raw = claims[claim]
  if (typeof raw === 'string') return [raw]
  if (Array.isArray(raw)) return raw.filter((g): g is string => typeof g === 'string')
  return []
}

/**
 * Decides the account (the first group mapping the person is in, else their email's domain) and
 * the role (admin when in an admin group). Only a verified email counts: an unverified one could be
 * anyone's address, and the email is what matches a Shiplog user.
 */
export function decideMembership(
  claims: Readonly<Record<string, unknown>>,
  config: Pick<OidcConfig, 'groupsClaim' | 'accountByDomain' | 'accountByGroup' | 'adminGroups'>,
): Membership {
  const rawEmail = claims.email
  if (typeof rawEmail !== 'string' || !/^[^\s@]+@[^\s@]+$/.test(rawEmail.trim()) || rawEmail.length > 254) {
    return { ok: false, reason: 'email_missing', email: null }
  }
  const email = rawEmail.trim().toLowerCase()
  // Some providers send the flag as the string "true"; nothing else means verified.
  const verified = claims.email_verified === true || claims.email_verified === 'true'
  if (!verified) return { ok: false, reason: 'email_unverified', email }
  const groups = groupsOf(claims, config.groupsClaim)
  const byGroup = config.accountByGroup.find(([group]) => groups.includes(group))
  const domain = email.slice(email.lastIndexOf('@') + 1)
  const byDomain = config.accountByDomain.find(([mapped]) => mapped === domain)
  const accountName = byGroup?.[1] ?? byDomain?.[1]
  if (accountName === undefined) return { ok: false, reason: 'no_account_mapping', email }
  const role: UserRole = config.adminGroups.some((g) => groups.includes(g)) ? 'admin' : 'member'
  return { ok: true, email, accountName, role }
}

/** What the person reads on the refusal page, for each reason. */
export function refusalMessage(
  reason: RefusalReason,
  providerName: string,
): { title: string; detail: string } {
  switch (reason) {
    case 'email_missing':
      return {
        title: 'No email address from your provider',
        detail: `${providerName} did not tell Shiplog your email address. Ask your administrator to release the "email" claim to Shiplog.`,
      }
    case 'email_unverified':
      return {
        title: 'Your email address is not verified',
        detail: `${providerName} says your email address is not verified, so Shiplog cannot tell it is yours. Verify it with ${providerName}, then sign in again.`,
      }
    case 'no_account_mapping':
      return {
        title: 'No Shiplog account for you',
        detail:
          'You signed in, but neither your email domain nor your groups belong to a Shiplog account on this server. Ask your Shiplog administrator to add them.',
      }
    case 'identity_mismatch':
      return {
        title: 'This address belongs to someone else',
        detail: `The Shiplog user with this email address is linked to another identity at ${providerName}. Ask your Shiplog administrator.`,
      }
    case 'provider_error':
      return {
        title: 'Sign-in was not completed',
        detail: `${providerName} did not sign you in (it was cancelled or refused). Try again from the login page.`,
      }
    case 'invalid_response':
      return {
        title: 'Sign-in answer refused',
        detail: `The answer from ${providerName} failed Shiplog's checks (signature, issuer, audience, expiry or nonce), so nobody was signed in. Try again from the login page.`,
      }
    case 'unknown_state':
      return {
        title: 'This sign-in link is not valid',
        detail:
          'The link back from your provider was already used or was never issued by Shiplog. Start again from the login page.',
      }
    case 'expired_state':
      return {
        title: 'This sign-in took too long',
        detail: 'Signing in at your provider must finish within 10 minutes. Start again from the login page.',
      }
    case 'other_browser':
      return {
        title: 'Sign-in started in another browser',
        detail:
          'Finish signing in in the browser where you started it, or start again here from the login page.',
      }
    case 'provider_unavailable':
      return {
        title: 'The sign-in provider is unavailable',
        detail: `Shiplog could not reach ${providerName}. Try again in a moment, or sign in with your password if your account allows it.`,
      }
  }
}
