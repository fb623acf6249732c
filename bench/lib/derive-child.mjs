// Derives every deployment of a seeded database from its events, in this process alone, and prints
// the CPU it took: the per-event cost of deriving deployments, measured without HTTP (the way
// docs/PERFORMANCE.md measures the cost of inserting an event). Run by bench/lib/insights.mjs.
import { parseDatabaseUrl } from '../../dist/config.js'
import { openDatabase } from '../../dist/db/connect.js'
import { rebuildDeployments } from '../../dist/domain/deployments/store.js'

const url = process.argv[2]
if (!url) {
  console.error('usage: node bench/lib/derive-child.mjs DATABASE_URL')
  process.exit(2)
}
const database = openDatabase(parseDatabaseUrl(url))
try {
  const before = process.cpuUsage()
  const t0 = performance.now()
  const events = await rebuildDeployments(database)
  const cpu = process.cpuUsage(before)
  console.log(
    JSON.stringify({
      events,
      cpuMs: (cpu.user + cpu.system) / 1000,
      seconds: (performance.now() - t0) / 1000,
    }),
  )
} finally {
  await database.close()
}
