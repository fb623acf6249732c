import { performance } from 'node:perf_hooks'
import { createBrotliDecompress, createGunzip } from 'node:zlib'
import { csvCounter, jsonLinesCounter, request } from './http.mjs'
import { cpuSeconds, idleRss, memory, resetPeak, sampleRss } from './proc.mjs'
import { EXPORT_COLUMNS, exportLimitSeconds, loadAverage } from './read-common.mjs'

/** @typedef {import('./read-common.mjs').ExportRow} ExportRow */

/**
 * Downloads /logs/export.<format> whole, counting records and bytes while sampling the server's RSS.
 * With a compressed encoding the client inflates as the bytes arrive, as a browser does, and the
 * time runs to the last inflated byte.
 * @param {number} pid @param {import('./http.mjs').Session} session @param {'csv' | 'json'} format
 * @param {'identity' | 'gzip' | 'br'} encoding
 * @param {number} n @param {string} scenario @param {string} target @param {number} settleMs
 * @returns {Promise<ExportRow>}
 */
export async function measureExport(pid, session, format, encoding, n, scenario, target, settleMs) {
  /** @type {string[]} */
  const problems = []
  const idle = await idleRss(pid, settleMs)
  const load = loadAverage()
  const hwmReset = resetPeak(pid)
  const cpuBefore = cpuSeconds(pid)
  const counter = format === 'csv' ? csvCounter() : jsonLinesCounter()
  let bytes = 0
  /** @type {number | null} */
  let firstByteMs = null
  const sampler = sampleRss(pid, 50)
  const t0 = performance.now()
  /** @type {Awaited<ReturnType<typeof request>> | null} */
  let res = null
  let seconds = null
  let sampling = null
  const inflater = encoding === 'gzip' ? createGunzip() : encoding === 'br' ? createBrotliDecompress() : null
  const inflated = inflater
    ? new Promise((resolve, reject) => {
        inflater.on('data', (/** @type {Buffer} */ chunk) => counter.push(chunk))
        inflater.once('end', resolve)
        inflater.once('error', reject)
      })
    : null
  try {
    res = await request(session, {
      path: `/logs/export.${format}`,
      headers: encoding === 'identity' ? {} : { 'accept-encoding': encoding },
      timeoutMs: exportLimitSeconds(n) * 1000,
      onData: (chunk) => {
        if (firstByteMs === null) firstByteMs = performance.now() - t0
        bytes += chunk.length
        if (inflater) inflater.write(chunk)
        else counter.push(chunk)
      },
    })
    if (inflater) {
      inflater.end()
      await inflated
    }
    seconds = (performance.now() - t0) / 1000
  } catch (err) {
    problems.push(`download failed: ${err instanceof Error ? err.message : String(err)}`)
  } finally {
    sampling = sampler.stop()
  }
  const cpuAfter = cpuSeconds(pid)
  const hwm = memory(pid)?.hwm ?? null
  const counted = counter.result()
  if (res) {
    if (res.status !== 200) problems.push(`HTTP ${res.status}`)
    const sent = res.headers['content-encoding'] ?? 'identity'
    if (sent !== encoding) problems.push(`Content-Encoding ${sent}, ${encoding} asked for`)
    const type = String(res.headers['content-type'] ?? '')
    if (!type.startsWith(format === 'csv' ? 'text/csv' : 'application/json'))
      problems.push(`content-type ${type}`)
    const disposition = String(res.headers['content-disposition'] ?? '')
    if (!new RegExp(`^attachment; filename="shiplog-events-[^"]+\\.${format}"$`).test(disposition))
      problems.push(`content-disposition ${disposition}`)
    if (counted.records !== n) problems.push(`${counted.records} records downloaded, ${n} in the database`)
    if ('header' in counted) {
      if (counted.header !== EXPORT_COLUMNS.join(',')) problems.push(`CSV header "${counted.header}"`)
      if (!counted.endsWithNewline || counted.unbalancedQuotes) problems.push('CSV does not end cleanly')
    } else {
      if (!counted.startsWithBracket || !counted.endsWithBracket) problems.push('JSON is not one array')
      if (n > 0 && counted.firstKeys?.join(',') !== EXPORT_COLUMNS.join(','))
        problems.push(`JSON keys ${counted.firstKeys?.join(',') ?? '(unparsable first object)'}`)
    }
  }
  const peak = sampling.peak || null
  return {
    scenario,
    target,
    n,
    format,
    encoding,
    records: res ? counted.records : null,
    bytes: res ? bytes : null,
    seconds,
    firstByteMs,
    rowsPerSecond: seconds && res ? counted.records / seconds : null,
    idleRss: idle,
    peakRss: peak,
    growth: peak !== null && idle !== null ? peak - idle : null,
    quarterPeaks: sampling.quarters,
    hwm,
    hwmReset,
    serverCpuSeconds: cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null,
    sampling: { samples: sampling.samples, longestGapMs: sampling.longestGapMs },
    load,
    problems,
  }
}
