// Types for the parts of oidc-provider (which ships none) that the test provider uses.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http'

  export interface KoaContext {
    path: string
    method: string
    status: number
    body: unknown
  }
  export type Middleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void>

  export interface AccountClaims {
    sub: string
    [claim: string]: unknown
  }
  export interface Account {
    accountId: string
    claims(use: string, scope: string): Promise<AccountClaims> | AccountClaims
  }

  export interface GrantInstance {
    addOIDCScope(scope: string): void
    addOIDCClaims(claims: string[]): void
    save(): Promise<string>
  }

  export interface OidcContext {
    oidc: {
      client?: { clientId: string }
      session?: { accountId?: string }
      provider: Provider
    }
  }

  export interface Configuration {
    clients?: Array<Record<string, unknown>>
    jwks?: { keys: Array<Record<string, unknown>> }
    cookies?: { keys: string[] }
    claims?: Record<string, string[]>
    scopes?: string[]
    conformIdTokenClaims?: boolean
    features?: Record<string, { enabled: boolean } & Record<string, unknown>>
    findAccount?: (ctx: unknown, id: string) => Promise<Account | undefined>
    loadExistingGrant?: (ctx: OidcContext) => Promise<GrantInstance | undefined>
    pkce?: { required: () => boolean }
    ttl?: Record<string, number>
    renderError?: (ctx: KoaContext, out: Record<string, string>, error: Error) => Promise<void>
  }

  export default class Provider {
    constructor(issuer: string, configuration: Configuration)
    readonly issuer: string
    Grant: new (init: {
      accountId: string
      clientId: string
    }) => GrantInstance
    callback(): (req: IncomingMessage, res: ServerResponse) => void
    use(middleware: Middleware): void
    on(event: string, listener: (...args: unknown[]) => void): void
  }
}
