// shiplog webhooks create|list|delete: thin callers of the audited domain commands, which write
// the change and its audit entry together.
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.js'
import { resolveAppSecret, secretStatus } from '../domain/app-secret.js'
import { cliSource } from '../domain/audit/log.js'
import { createWebhookAudited, deleteWebhookAudited } from '../domain/webhooks/commands.js'
import { listWebhooks, WebhookInputError } from '../domain/webhooks/queries.js'
import { webhookOpens } from '../domain/webhooks/secrets.js'
import { printableName } from '../text-rules.js'
import { CliError, withDatabase } from './common.js'
import { accountAndPositionals, accountOrFail, formatTime, printTable, required } from './options.js'

function listOption(values: Record<string, unknown>, name: string): string[] {
  const value = values[name]
  if (!Array.isArray(value)) return []
  return value
    .flatMap((v) => String(v).split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '')
}

export async function webhooksCreate(args: string[]): Promise<void> {
  const usage =
    'shiplog webhooks create --account NAME --url URL --format json|slack|grafana [--status ..] [--outcome ..]'
  const multiple = { type: 'string', multiple: true } as const
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      url: { type: 'string' },
      format: { type: 'string' },
      status: multiple,
      outcome: multiple,
      environment: multiple,
      service: multiple,
      'grafana-token': { type: 'string' },
    },
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  const url = required(values, 'url', usage)
  const format = required(values, 'format', usage)
  const config = loadConfig()
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const appSecret = await resolveAppSecret(config, database.db)
    try {
      const { webhook, secret } = await createWebhookAudited(
        database.db,
        appSecret,
        {
          accountId: account.id,
          url,
          format,
          statuses: listOption(values, 'status'),
          outcomes: listOption(values, 'outcome'),
          environments: listOption(values, 'environment'),
          services: listOption(values, 'service'),
          grafanaToken: values['grafana-token'] ?? null,
        },
        { allowPrivate: config.webhookAllowPrivate },
        cliSource(),
      )
      process.stderr.write(
        `created webhook ${webhook.id}; its signing secret follows (it is not shown again)\n`,
      )
      // stdout carries the secret alone so scripts can capture it.
      process.stdout.write(`${secret}\n`)
    } catch (err) {
      if (err instanceof WebhookInputError) throw new CliError(err.message, 2)
      throw err
    }
  })
}

function namesOf(json: string): string {
  const names = JSON.parse(json) as string[]
  return names.length === 0 ? 'all' : names.map(printableName).join(',')
}

export async function webhooksList(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { account: { type: 'string' } }, strict: true })
  const accountName = required(values, 'account', 'shiplog webhooks list --account NAME')
  const config = loadConfig()
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const hooks = await listWebhooks(database.db, account.id)
    // As Settings says it: a webhook whose secret does not open with this installation's secret
    // cannot sign, whatever its last delivery did. Read only: listing creates no secret.
    const { secret } = await secretStatus(config, database.db)
    const cannotSign = (w: { secret: string; grafana_token: string | null }) =>
      secret === null || !webhookOpens(secret, w)
    const rows = [
      ['ID', 'FORMAT', 'URL', 'STATUSES', 'OUTCOMES', 'ENVIRONMENTS', 'SERVICES', 'STATE'],
      ...hooks.map((w) => [
        String(w.id),
        w.format,
        printableName(w.url),
        JSON.parse(w.statuses).length === 0 ? '-' : namesOf(w.statuses),
        JSON.parse(w.outcomes).length === 0 ? '-' : namesOf(w.outcomes),
        namesOf(w.environments),
        namesOf(w.services),
        w.enabled !== 1
          ? `disabled ${formatTime(w.disabled_at)}`
          : cannotSign(w)
            ? 'failing: cannot sign (see README "The secret")'
            : w.failing_since !== null
              ? `failing since ${formatTime(w.failing_since)}`
              : 'active',
      ]),
    ]
    printTable(rows)
  })
}

export async function webhooksDelete(args: string[]): Promise<void> {
  const usage = 'shiplog webhooks delete --account NAME ID'
  const { accountName, positionals } = accountAndPositionals(args, usage)
  const id = positionals[0]
  if (positionals.length !== 1 || !id || !/^\d{1,15}$/.test(id))
    throw new CliError(`one webhook id is required (${usage})`, 2)
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    if (!(await deleteWebhookAudited(database.db, account.id, Number(id), cliSource()))) {
      throw new CliError(`account "${account.name}" has no webhook ${id}`)
    }
    process.stderr.write(`deleted webhook ${id}\n`)
  })
}
