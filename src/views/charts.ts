// Charts as SVG drawn on the server: functions from numbers to markup, with a title, labelled axes,
// light gridlines, a legend, and every bar or point a link to the rows behind it.
import { html, type SafeHtml } from './html.js'

export interface Series {
  key: string
  name: string
  /** A fill colour safe for colour-blind readers next to the others (blue, orange, grey…). */
  colour: string
}

export interface StackedBar {
  /** Shown under the bar (thinned out when there are many). */
  label: string
  /** Said in the bar's tooltip and to screen readers. */
  longLabel: string
  values: Record<string, number>
  href: string | null
}

const WIDTH = 720
const HEIGHT = 260
const PAD = { top: 28, right: 12, bottom: 46, left: 48 }

/** A round upper bound for the axis, and the step between gridlines. */
export function niceScale(max: number, ticks = 4): { top: number; step: number } {
  if (!(max > 0)) return { top: ticks, step: 1 }
  const raw = max / ticks
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude
  return { top: step * Math.ceil(max / step), step }
}

function axis(top: number, step: number, format: (n: number) => string): SafeHtml[] {
  const lines: SafeHtml[] = []
  const plotHeight = HEIGHT - PAD.top - PAD.bottom
  for (let v = 0; v <= top + step / 2; v += step) {
    const y = PAD.top + plotHeight - (v / top) * plotHeight
    lines.push(
      html`<line class="grid" x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}"/><text class="tick" x="${PAD.left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${format(v)}</text>`,
    )
  }
  return lines
}

function xLabels(labels: readonly string[], slot: number): SafeHtml[] {
  // At most about twelve labels, so they never overlap.
  const every = Math.max(1, Math.ceil(labels.length / 12))
  return labels.flatMap((label, i) =>
    i % every === 0
      ? [
          html`<text class="tick" x="${(PAD.left + slot * i + slot / 2).toFixed(1)}" y="${HEIGHT - PAD.bottom + 16}" text-anchor="middle">${label}</text>`,
        ]
      : [],
  )
}

function legend(series: readonly Series[]): SafeHtml[] {
  let x = PAD.left
  return series.map((s) => {
    const item = html`<rect x="${x}" y="8" width="10" height="10" fill="${s.colour}"/><text class="legend" x="${x + 14}" y="17">${s.name}</text>`
    x += 24 + s.name.length * 7
    return item
  })
}

/** Bars stacked by series, one per period (a day), each segment a link to what it counts. */
export function stackedBarChart(options: {
  title: string
  yLabel: string
  xLabel: string
  series: readonly Series[]
  bars: readonly StackedBar[]
}): SafeHtml {
  const { series, bars } = options
  const totals = bars.map((b) => series.reduce((sum, s) => sum + (b.values[s.key] ?? 0), 0))
  const { top, step } = niceScale(Math.max(0, ...totals))
  const plotHeight = HEIGHT - PAD.top - PAD.bottom
  const slot = (WIDTH - PAD.left - PAD.right) / Math.max(1, bars.length)
  const barWidth = Math.max(1, Math.min(32, slot * 0.7))
  const columns = bars.map((bar, i) => {
    let base = PAD.top + plotHeight
    const x = PAD.left + slot * i + (slot - barWidth) / 2
    const parts = series.flatMap((s) => {
      const value = bar.values[s.key] ?? 0
      if (value <= 0) return []
      const h = (value / top) * plotHeight
      base -= h
      return [
        html`<rect x="${x.toFixed(1)}" y="${base.toFixed(1)}" width="${barWidth.toFixed(1)}" height="${h.toFixed(1)}" fill="${s.colour}"><title>${bar.longLabel}: ${value} ${s.name.toLowerCase()}</title></rect>`,
      ]
    })
    const total = totals[i] ?? 0
    const label = `${bar.longLabel}: ${total} in all`
    return bar.href && total > 0
      ? html`<a href="${bar.href}" aria-label="${label}">${parts}</a>`
      : html`<g aria-label="${label}">${parts}</g>`
  })
  return html`<svg class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="chart-${slug(options.title)}">
<title id="chart-${slug(options.title)}">${options.title}</title>
${legend(series)}
${axis(top, step, (n) => String(Math.round(n * 100) / 100))}
<line class="axis" x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${PAD.top + plotHeight}" y2="${PAD.top + plotHeight}"/>
${columns}
${xLabels(
  bars.map((b) => b.label),
  slot,
)}
<text class="axis-label" x="${(PAD.left + WIDTH - PAD.right) / 2}" y="${HEIGHT - 6}" text-anchor="middle">${options.xLabel}</text>
<text class="axis-label" transform="rotate(-90)" x="${-(PAD.top + plotHeight / 2)}" y="12" text-anchor="middle">${options.yLabel}</text>
</svg>`
}

export interface LinePoint {
  label: string
  longLabel: string
  /** Null: nothing measured in that period (the line breaks there). */
  value: number | null
  href: string | null
}

/** A line with a point per period (e.g. the median duration per day), points linked. */
export function lineChart(options: {
  title: string
  yLabel: string
  xLabel: string
  points: readonly LinePoint[]
  format: (value: number) => string
  colour: string
}): SafeHtml {
  const { points } = options
  const values = points.flatMap((p) => (p.value === null ? [] : [p.value]))
  const { top, step } = niceScale(Math.max(0, ...values))
  const plotHeight = HEIGHT - PAD.top - PAD.bottom
  const slot = (WIDTH - PAD.left - PAD.right) / Math.max(1, points.length)
  const at = (i: number, v: number) => ({
    x: PAD.left + slot * i + slot / 2,
    y: PAD.top + plotHeight - (v / top) * plotHeight,
  })
  const segments: string[] = []
  let current = ''
  points.forEach((p, i) => {
    if (p.value === null) {
      if (current) segments.push(current)
      current = ''
      return
    }
    const { x, y } = at(i, p.value)
    current += `${current ? ' L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`
  })
  if (current) segments.push(current)
  const dots = points.flatMap((p, i) => {
    if (p.value === null) return []
    const { x, y } = at(i, p.value)
    const dot = html`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="4" fill="${options.colour}"><title>${p.longLabel}: ${options.format(p.value)}</title></circle>`
    return [
      p.href
        ? html`<a href="${p.href}" aria-label="${p.longLabel}: ${options.format(p.value)}">${dot}</a>`
        : dot,
    ]
  })
  return html`<svg class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="chart-${slug(options.title)}">
<title id="chart-${slug(options.title)}">${options.title}</title>
${axis(top, step, options.format)}
<line class="axis" x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${PAD.top + plotHeight}" y2="${PAD.top + plotHeight}"/>
${segments.map((d) => html`<path d="${d}" fill="none" stroke="${options.colour}" stroke-width="2"/>`)}
${dots}
${xLabels(
  points.map((p) => p.label),
  slot,
)}
<text class="axis-label" x="${(PAD.left + WIDTH - PAD.right) / 2}" y="${HEIGHT - 6}" text-anchor="middle">${options.xLabel}</text>
<text class="axis-label" transform="rotate(-90)" x="${-(PAD.top + plotHeight / 2)}" y="12" text-anchor="middle">${options.yLabel}</text>
</svg>`
}

function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-')
}
