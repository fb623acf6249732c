// What the deployments of a database should be (the plain rules over all its events) and what is
// stored, per account: the two sides of every "derived equals plain" check.
import type { Database } from '../../src/db/connect.js'
import { type Deployment, deriveDeployments } from '../../src/domain/deployments/rules.js'
import { rowToDeployment } from '../../src/domain/deployments/store.js'

export async function expectedDeployments(database: Database): Promise<Map<number, Deployment[]>> {
  const rows = await database.db.selectFrom('events').selectAll().orderBy('id').execute()
  const byAccount = new Map<number, Deployment[]>()
  for (const accountId of new Set(rows.map((r) => Number(r.account_id)))) {
    byAccount.set(
      accountId,
      deriveDeployments(
        rows
          .filter((r) => Number(r.account_id) === accountId)
          .map((r) => ({
            id: Number(r.id),
            service: r.service,
            environment: r.environment,
            version: r.version,
            status: r.status,
            receivedAt: Number(r.received_at),
            deployer: r.deployer,
            apiKeyName: r.api_key_name,
          })),
      ),
    )
  }
  return byAccount
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
