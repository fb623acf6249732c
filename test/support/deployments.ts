// What the deployments of a database should be (the plain rules over all its events) and what is
// stored, per account: the two sides of every "derived equals plain" check.
import type { Database } from '../../src/db/connect.js'
import type { EventRow } from '../../src/db/schema.js'
import { type Deployment, deriveDeployments } from '../../src/domain/deployments/rules.js'
import { rowToDeployment } from '../../src/domain/deployments/store.js'

/** The plain rules over the given events, per account (events in id order). */
export function plainDeployments(events: readonly EventRow[]): Map<number, Deployment[]> {
  const byAccount = new Map<number, EventRow[]>()
  for (const e of events) {
    const account = Number(e.account_id)
    const list = byAccount.get(account) ?? []
    list.push(e)
    byAccount.set(account, list)
  }
  const result = new Map<number, Deployment[]>()
  for (const [account, rows] of byAccount) {
    result.set(
      account,
      deriveDeployments(
        rows.map((r) => ({
          id: Number(r.id),
          service: r.service,
          environment: r.environment,
          version: r.version,
          status: r.status,
          occurredAt: Number(r.occurred_at),
          commitTime: r.commit_time === null ? null : Number(r.commit_time),
          deployer: r.deployer,
          apiKeyName: r.api_key_name,
        })),
      ),
    )
  }
  return result
}

export async function expectedDeployments(database: Database): Promise<Map<number, Deployment[]>> {
  return plainDeployments(await database.db.selectFrom('events').selectAll().orderBy('id').execute())
}

export async function storedDeployments(database: Database): Promise<Map<number, Deployment[]>> {
  const rows = await database.db.selectFrom('deployments').selectAll().orderBy('id').execute()
  const byAccount = new Map<number, Deployment[]>()
  for (const row of rows) {
    const accountId = Number(row.account_id)
    const list = byAccount.get(accountId) ?? []
    list.push(rowToDeployment(row))
    byAccount.set(accountId, list)
  }
  return byAccount
}
