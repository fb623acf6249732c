// The process's own metrics (CPU, memory, event loop, GC), shared by every app of the process and
// appended to each scrape (metrics.ts).
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client'

/**
 * Process metrics (CPU, memory, event loop, GC) belong to the process, not to one app: collected
 * once into a registry of their own and appended to every app's scrape, so tests that build many
 * apps in one process do not start a set of observers for each.
 */
let processRegistry: Registry | null = null
export function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry()
    collectDefaultMetrics({ register: processRegistry, prefix: 'shiplog_' })
    renameTotalGauges(processRegistry)
  }
  return processRegistry
}

/** The parts of `process` prom-client reads for its totals (internal, hence not in @types/node). */
interface ProcessInternals {
  _getActiveHandles?: () => unknown[]
  _getActiveRequests?: () => unknown[]
  getActiveResourcesInfo?: () => string[]
}

/**
 * prom-client's default set has three gauges named `…_total`, a suffix Prometheus keeps for
 * counters (`promtool check metrics` refuses them). They are replaced by the same figures under
 * gauge names: shiplog_nodejs_{handles,requests,resources}_active.
 */
function renameTotalGauges(registry: Registry): void {
  const internals = process as unknown as ProcessInternals
  const renamed = [
    [
      'active_handles_total',
      'handles_active',
      'Active libuv handles (all types).',
      internals._getActiveHandles,
    ],
    [
      'active_requests_total',
      'requests_active',
      'Active libuv requests (all types).',
      internals._getActiveRequests,
    ],
    [
      'active_resources_total',
      'resources_active',
      'Active resources keeping the event loop alive (all types).',
      internals.getActiveResourcesInfo,
    ],
  ] as const
  for (const [old, name, help, read] of renamed) {
    registry.removeSingleMetric(`shiplog_nodejs_${old}`)
    if (typeof read !== 'function') continue
    new Gauge({
      name: `shiplog_nodejs_${name}`,
      help,
      registers: [registry],
      collect() {
        this.set(read.call(process).length)
      },
    })
  }
}
