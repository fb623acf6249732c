// Single sign-on (SPEC §10) from the SHIPLOG_OIDC_* variables. The schema (variables.ts) checks
// each one on its own; here they are checked together (all or nothing, and enough to decide an
// account) and the account mappings are read. See README "Single sign-on".
import { nameProblem } from '../text-rules.js'
import { ConfigError } from './error.js'
import { ENVIRONMENT, type Environment, scopeList } from './variables.js'

export interface OidcConfig {
  /** The issuer identifier exactly as the provider names itself (discovery starts here). */
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** The provider's name on the login button: "Sign in with <name>". */
  readonly name: string
  readonly scopes: readonly string[]
  /** The ID token claim that lists the person's groups. */
  readonly groupsClaim: string
  /** Email domain (lower case) → account name, in the order given. */
  readonly accountByDomain: ReadonlyArray<readonly [string, string]>
  /** Group → account name, in the order given; a group match wins over the email domain. */
  readonly accountByGroup: ReadonlyArray<readonly [string, string]>
  /** Members of any of these groups are admins of their account; everyone else is a member. */
  readonly adminGroups: readonly string[]
  /** `<SHIPLOG_PUBLIC_URL>/login/oidc/callback`: what to register at the provider. */
  readonly redirectUri: string
  /** Where the provider sends the browser back after its own logout: `<SHIPLOG_PUBLIC_URL>/login?bye=1`. */
  readonly postLogoutRedirectUri: string
}

const OIDC_VARIABLES = Object.keys(ENVIRONMENT.properties).filter((name) => name.startsWith('SHIPLOG_OIDC_'))

/** "key=Account,key2=Other" → pairs; keys are unique, account names follow the rule for names. */
function parseOidcMapping(
  name: string,
  raw: string,
  key: 'domain' | 'group',
): Array<readonly [string, string]> {
  const pairs: Array<readonly [string, string]> = []
  for (const item of raw.split(',')) {
    if (item.trim() === '') continue
    const at = item.indexOf('=')
    const left = at < 0 ? '' : item.slice(0, at).trim()
    const account = at < 0 ? '' : item.slice(at + 1).trim()
    if (left === '' || account === '') {
      throw new ConfigError(
        `${name} must be a comma-separated list of ${key}=Account pairs, got "${item.trim()}"`,
      )
    }
    const mapped = key === 'domain' ? left.toLowerCase().replace(/^@/, '') : left
    if (
      key === 'domain' &&
      !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/.test(mapped)
    ) {
      throw new ConfigError(`${name}: "${left}" is not an email domain such as example.com`)
    }
    // The account is made at first sign-in with this name: it must be one Settings could make too.
    if (nameProblem(account) !== null) {
      throw new ConfigError(`${name}: the account name for "${left}" must be 1 to 100 printable characters`)
    }
    if (pairs.some(([k]) => k === mapped)) throw new ConfigError(`${name} names "${left}" twice`)
    pairs.push([mapped, account] as const)
  }
  return pairs
}

/** Single sign-on's configuration, or null when SHIPLOG_OIDC_ISSUER is unset (and so is the rest). */
export function oidcConfig(
  env: NodeJS.ProcessEnv,
  values: Environment,
  publicUrl: string | null,
): OidcConfig | null {
  const issuer = values.SHIPLOG_OIDC_ISSUER
  if (issuer === undefined) {
    const stray = OIDC_VARIABLES.find((name) => env[name]?.trim())
    if (stray)
      throw new ConfigError(
        `${stray} is set but SHIPLOG_OIDC_ISSUER is not: set it to turn single sign-on on`,
      )
    return null
  }
  const clientId = values.SHIPLOG_OIDC_CLIENT_ID
  if (clientId === undefined)
    throw new ConfigError('SHIPLOG_OIDC_CLIENT_ID must be set when SHIPLOG_OIDC_ISSUER is')
  const clientSecret = values.SHIPLOG_OIDC_CLIENT_SECRET
  if (clientSecret === undefined) {
    throw new ConfigError(
      'SHIPLOG_OIDC_CLIENT_SECRET must be set when SHIPLOG_OIDC_ISSUER is (Shiplog is a confidential client)',
    )
  }
  if (publicUrl === null) {
    throw new ConfigError(
      'single sign-on needs SHIPLOG_PUBLIC_URL: the provider sends users back to <SHIPLOG_PUBLIC_URL>/login/oidc/callback',
    )
  }
  const accountByDomain = parseOidcMapping(
    'SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN',
    values.SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN ?? '',
    'domain',
  )
  const accountByGroup = parseOidcMapping(
    'SHIPLOG_OIDC_ACCOUNT_BY_GROUP',
    values.SHIPLOG_OIDC_ACCOUNT_BY_GROUP ?? '',
    'group',
  )
  if (accountByDomain.length === 0 && accountByGroup.length === 0) {
    throw new ConfigError(
      'single sign-on needs SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN or SHIPLOG_OIDC_ACCOUNT_BY_GROUP to decide which account a person joins, e.g. SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN="example.com=Acme"',
    )
  }
  const adminGroups = (values.SHIPLOG_OIDC_ADMIN_GROUPS ?? '')
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g !== '')
  return Object.freeze({
    issuer,
    clientId,
    clientSecret,
    name: values.SHIPLOG_OIDC_NAME,
    scopes: Object.freeze(scopeList(values.SHIPLOG_OIDC_SCOPES)),
    groupsClaim: values.SHIPLOG_OIDC_GROUPS_CLAIM,
    accountByDomain: Object.freeze(accountByDomain),
    accountByGroup: Object.freeze(accountByGroup),
    adminGroups: Object.freeze(adminGroups),
    redirectUri: `${publicUrl}/login/oidc/callback`,
    postLogoutRedirectUri: `${publicUrl}/login?bye=1`,
  })
}
