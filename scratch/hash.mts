import Database from 'better-sqlite3'
import { columnList, linkFrom, rowDigest, streamSpec, linkedValues } from '/work/main/src/domain/chain/canonical.ts'
const spec = streamSpec('events')
const db = new Database('/tmp/cp/c2.db', { readonly: true })
const rows = db.prepare(`select ${columnList(spec)} from events order by id limit 100000`).all() as Record<string, unknown>[]
for (let round = 0; round < 3; round++) {
  const t0 = process.cpuUsage()
  let link = '00'.repeat(32)
  for (const r of rows) { const d = rowDigest(spec, r); const v = linkedValues(spec, r); link = linkFrom(link, d, v.accountId, v.at) }
  const u = process.cpuUsage(t0)
  console.log(((u.user + u.system) / rows.length).toFixed(2), 'µs/row', link.slice(0, 16))
}
