// The insights calendar and views as pure functions: windows of local days across DST changes (no
// day missing or twice, 23- and 25-hour days), deployments bucketed into the right local day, durations
// written for people, and the charts' SVG (bars, links, legend, textures, escaping).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  dayBuckets,
  daysBetween,
  isIsoDate,
  listFor,
  namedWindow,
  windowOf,
} from '../../src/domain/deployments/insights.js'
import { computeMetrics } from '../../src/domain/deployments/metrics.js'
import type { Deployment } from '../../src/domain/deployments/rules.js'
import { countScale, lineChart, NARROW, stackedBarChart } from '../../src/views/charts.js'
import { durationScale, formatAxisDuration, formatDuration } from '../../src/views/duration.js'

const H = 3_600_000
const BERLIN = 'Europe/Berlin'

function finished(id: number, iso: string, extra: Partial<Deployment> = {}): Deployment {
  const end = Date.parse(iso)
  return {
    id,
    service: 'api',
    environment: 'prod',
    version: `v${id}`,
    startedAt: end - 5 * 60_000,
    finishedAt: end,
    result: 'succeeded',
    instant: false,
    finishEventId: id,
    rollback: false,
    rolledBack: false,
    deployer: null,
    apiKeyName: null,
    commitTime: null,
    eventIds: [id],
    ...extra,
  }
}

test('a window across the spring change in Berlin has each date once, the 29th with 23 hours', () => {
  const w = windowOf('2026-03-27', '2026-04-01', BERLIN)
  assert.deepEqual(
    w.days.map((d) => d.date),
    ['2026-03-27', '2026-03-28', '2026-03-29', '2026-03-30', '2026-03-31'],
  )
  assert.deepEqual(
    w.days.map((d) => (d.end - d.start) / H),
    [24, 24, 23, 24, 24],
  )
  assert.equal(w.from, Date.parse('2026-03-26T23:00:00Z'), 'midnight CET')
  assert.equal(w.to, Date.parse('2026-03-31T22:00:00Z'), 'midnight CEST')
  for (let i = 1; i < w.days.length; i++)
    assert.equal(w.days[i]?.start, w.days[i - 1]?.end, 'no gap, no overlap')
})

test('the autumn change gives a 25-hour day, and named ranges end with today in the zone', () => {
  const autumn = windowOf('2026-10-24', '2026-10-27', BERLIN)
  assert.deepEqual(
    autumn.days.map((d) => (d.end - d.start) / H),
    [24, 25, 24],
  )
  // 30 days up to 2026-04-05 in Berlin, across the spring change: 30 distinct, consecutive dates.
  const now = Date.parse('2026-04-04T22:30:00Z') // already 00:30 on the 5th in Berlin
  const w = namedWindow('30', now, BERLIN)
  assert.equal(w.days.length, 30)
  assert.equal(w.days.at(-1)?.date, '2026-04-05')
  assert.equal(w.days[0]?.date, '2026-03-07')
  assert.equal(new Set(w.days.map((d) => d.date)).size, 30)
  assert.equal(namedWindow('30', now, 'UTC').days.at(-1)?.date, '2026-04-04', 'still the 4th in UTC')
  assert.equal(namedWindow('7', now, 'UTC').days.length, 7)
})

test('deployments near midnight land in the local day they finished in', () => {
  const deployments = [
    finished(1, '2026-03-28T22:59:00Z'), // 23:59 CET on the 28th
    finished(2, '2026-03-28T23:00:00Z'), // 00:00 CET on the 29th
    finished(3, '2026-03-29T21:59:59Z'), // 23:59:59 CEST on the 29th
    finished(4, '2026-03-29T22:00:00Z', { result: 'failed' }), // 00:00 CEST on the 30th
    finished(5, '2026-03-30T10:00:00Z', { rolledBack: true }),
    finished(6, '2026-03-31T22:00:00Z'), // 00:00 on 1 April: outside the window
  ]
  const w = windowOf('2026-03-28', '2026-04-01', BERLIN)
  const metrics = computeMetrics(
    { environment: 'prod', service: null, from: w.from, to: w.to },
    deployments,
    new Map(),
  )
  const buckets = dayBuckets(metrics, w.days)
  assert.deepEqual(
    buckets.map((b) => [b.day.date, b.succeeded, b.failed, b.rolledBack, b.durationCount]),
    [
      ['2026-03-28', 1, 0, 0, 1],
      ['2026-03-29', 2, 0, 0, 2],
      ['2026-03-30', 0, 1, 1, 2],
      ['2026-03-31', 0, 0, 0, 0],
    ],
  )
  assert.equal(buckets[0]?.durationMedianMs, 5 * 60_000)
  assert.equal(buckets[3]?.durationMedianMs, null)
  assert.deepEqual(
    listFor(metrics, 'finished').rows.map((r) => r.deployment.id),
    [5, 4, 3, 2, 1],
  )
  assert.deepEqual(
    listFor(metrics, 'rolled_back').rows.map((r) => r.deployment.id),
    [5],
  )
})

test('dates are checked as calendar dates', () => {
  assert.ok(isIsoDate('2026-02-28'))
  assert.ok(isIsoDate('2028-02-29'))
  for (const bad of ['2026-02-29', '2026-13-01', '2026-1-01', '26-01-01', '2026-01-01T00:00', '', 'today']) {
    assert.ok(!isIsoDate(bad), bad)
  }
  assert.equal(daysBetween('2026-03-01', '2026-04-01'), 31)
  assert.equal(daysBetween('2026-04-01', '2026-03-01'), -31)
})

test('durations read as people say them', () => {
  assert.equal(formatDuration(null), '—')
  assert.equal(formatDuration(0), '0 s')
  assert.equal(formatDuration(450), '450 ms')
  assert.equal(formatDuration(42_000), '42 s')
  assert.equal(formatDuration(59_600), '1 min')
  assert.equal(formatDuration(4 * 60_000 + 12_000), '4 min 12 s')
  assert.equal(formatDuration(2 * H + 5 * 60_000), '2 h 5 min')
  assert.equal(formatDuration(3 * 24 * H + 4 * H), '3 d 4 h')
  assert.equal(formatDuration(24 * H + 40 * 60_000), '1 d 1 h')
  const scale = durationScale(47 * 60_000)
  assert.equal(scale.step % 60_000, 0, 'minute steps')
  assert.ok(scale.top >= 47 * 60_000)
  assert.equal(formatAxisDuration(scale.step), `${scale.step / 60_000} min`)
  assert.deepEqual(countScale(2), { top: 2, step: 1 }, 'no gridline at half a deployment')
})

test('the bar chart: a titled SVG with legend, textures, a linked bar per day, names escaped', () => {
  const svg = stackedBarChart({
    id: 'c1',
    title: 'Deployments <per> day',
    yLabel: 'Deployments',
    xLabel: 'Day',
    series: [
      { key: 'ok', name: 'Succeeded', colour: '#0072b2' },
      { key: 'bad', name: 'Failed', colour: '#d55e00', pattern: 'hatch' },
    ],
    bars: [
      { label: '1 Oct', longLabel: 'Thu 1 Oct', values: { ok: 2, bad: 1 }, href: '/x?a=1&b=<2>' },
      { label: '2 Oct', longLabel: 'Thu 2 Oct', values: { ok: 0, bad: 0 }, href: '/x?a=2' },
    ],
  }).toString()
  assert.match(svg, /^<svg class="chart" viewBox="0 0 960 300"/)
  assert.match(svg, /<title id="c1-title">Deployments &lt;per&gt; day<\/title>/)
  assert.match(svg, /<pattern id="c1-p-bad"/)
  assert.equal((svg.match(/<rect class="bar"/g) ?? []).length, 2)
  assert.match(svg, /<a href="\/x\?a=1&amp;b=&lt;2&gt;" aria-label="Thu 1 Oct: 3 in all">/)
  assert.doesNotMatch(svg, /href="\/x\?a=2"/, 'an empty day has nothing to link to')
  assert.match(svg, />Succeeded<\/text>/)
  const narrow = lineChart({
    id: 'l1',
    title: 'Median',
    yLabel: 'Duration',
    xLabel: 'Day',
    points: Array.from({ length: 30 }, (_, i) => ({
      label: `${i + 1}`,
      longLabel: `day ${i + 1}`,
      value: i % 3 === 0 ? null : i * 60_000,
      href: `/d/${i}`,
    })),
    format: formatAxisDuration,
    scale: durationScale,
    colour: '#0072b2',
    size: NARROW,
  }).toString()
  assert.match(narrow, /viewBox="0 0 360 240"/)
  const xTicks = narrow.match(/<text class="tick" x="[\d.]+" y="210"/g) ?? []
  assert.ok(xTicks.length <= NARROW.maxXLabels, `${xTicks.length} labels under the axis`)
  assert.equal((narrow.match(/<circle class="point"/g) ?? []).length, 20)
  assert.equal((narrow.match(/<path d=/g) ?? []).length, 10, 'the line breaks where nothing was measured')
})
