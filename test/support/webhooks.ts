// A webhook of the test account made straight in the database: the fields a test cares about, the rest empty.
import { createWebhook, type NewWebhook } from '../../src/domain/webhooks/queries.js'
import { TEST_SECRET, type TestApp } from '../helper.js'

/** Creates a webhook for the test account (a JSON one on every status unless told), private targets allowed. */
export async function addWebhook(
  ctx: TestApp,
  fields: Partial<NewWebhook> & { url: string },
): Promise<Awaited<ReturnType<typeof createWebhook>>> {
  return createWebhook(
    ctx.database.db,
    TEST_SECRET,
    {
      accountId: ctx.tenant.account.id,
      format: 'json',
      statuses: ['Deploying', 'Deployed', 'Failed'],
      outcomes: [],
      environments: [],
      services: [],
      grafanaToken: null,
      createdBy: 'test',
      ...fields,
    },
    { allowPrivate: true },
  )
}
