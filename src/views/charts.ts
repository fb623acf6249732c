// Charts as SVG drawn on the server: functions from numbers to markup, with a title, labelled axes,
// light gridlines, a legend, and every bar or point a link to the rows behind it.
import { html, type SafeHtml } from './html.js'

export interface Series {
  key: string
  name: string
  /** A fill colour safe for colour-blind readers next to the others (blue, orange, grey…). */
  colour: string
  /**
   * A texture over the colour, so the series are told apart without colour too (printouts,
   * greyscale, colour-blind readers): solid, diagonal hatching or dots.
   */
  pattern?: 'solid' | 'hatch' | 'dots'
}

export interface StackedBar {
  /** Shown under the bar (thinned out when there are many). */
  label: string
  /** Said in the bar's tooltip and to screen readers. */
  longLabel: string
  values: Record<string, number>
  /** Where the whole bar leads (every deployment it counts). */
  href: string | null
  /** Where each segment leads, by series key; a segment without one leads where the bar does. */
  segmentHrefs?: Record<string, string>
}

/** The drawing's size in its own units; the SVG scales to its box (viewBox) and keeps its shape. */
export interface ChartSize {
  width: number
  height: number
  /** At most this many labels under the x axis; the rest are thinned out evenly. */
  maxXLabels: number
}

export const WIDE: ChartSize = { width: 960, height: 300, maxXLabels: 12 }
/** For a phone: drawn at about the size it is shown, so its text stays readable. */
export const NARROW: ChartSize = { width: 360, height: 240, maxXLabels: 5 }

const PAD = { top: 40, right: 16, bottom: 46, left: 66 }

/** A round upper bound for the axis, and the step between gridlines. */
export function niceScale(max: number, ticks = 4): { top: number; step: number } {
  if (!(max > 0)) return { top: ticks, step: 1 }
  const raw = max / ticks
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude
  return { top: step * Math.ceil(max / step), step }
}

/**
 * Like niceScale, but for whole counts: a step below one would label gridlines 0.25, 0.5…, which
 * no count can be.
 */
export function countScale(max: number, ticks = 4): { top: number; step: number } {
  const scale = niceScale(max, ticks)
  if (scale.step >= 1) return scale
  return { top: Math.max(1, Math.ceil(max)), step: 1 }
}

function plotHeight(size: ChartSize): number {
  return size.height - PAD.top - PAD.bottom
}

function axis(size: ChartSize, top: number, step: number, format: (n: number) => string): SafeHtml[] {
  const lines: SafeHtml[] = []
  const h = plotHeight(size)
  for (let i = 0; i * step <= top + step / 2; i++) {
    const v = i * step
    const y = PAD.top + h - (v / top) * h
    lines.push(
      html`<line class="grid" x1="${PAD.left}" x2="${size.width - PAD.right}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}"/><text class="tick" x="${PAD.left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${format(v)}</text>`,
    )
  }
  return lines
}

function xLabels(size: ChartSize, labels: readonly string[], slot: number): SafeHtml[] {
  // Thinned out evenly so they never overlap; the last one is always shown (the window's end).
  const every = Math.max(1, Math.ceil(labels.length / size.maxXLabels))
  const last = labels.length - 1
  return labels.flatMap((label, i) => {
    if ((last - i) % every !== 0) return []
    // A label wider than its slot near an edge is aligned to the edge instead of crossing it.
    const centre = PAD.left + slot * i + slot / 2
    const half = (label.length * 6.2) / 2
    const [x, anchor] =
      centre + half > size.width - 2
        ? [size.width - 2, 'end']
        : centre - half < PAD.left
          ? [PAD.left, 'start']
          : [centre, 'middle']
    return [
      html`<text class="tick" x="${x.toFixed(1)}" y="${size.height - PAD.bottom + 16}" text-anchor="${anchor}">${label}</text>`,
    ]
  })
}

function patternId(chartId: string, s: Series): string {
  return `${chartId}-p-${slug(s.key)}`
}

/** The textures of the series, in a <defs> block. */
function patterns(chartId: string, series: readonly Series[]): SafeHtml {
  const defs = series.flatMap((s) => {
    const id = patternId(chartId, s)
    if (s.pattern === 'hatch') {
      return [
        html`<pattern id="${id}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="${s.colour}"/><line x1="0" y1="0" x2="0" y2="6" stroke="#ffffff" stroke-width="2" stroke-opacity="0.7"/></pattern>`,
      ]
    }
    if (s.pattern === 'dots') {
      return [
        html`<pattern id="${id}" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" fill="${s.colour}"/><circle cx="2.5" cy="2.5" r="1.1" fill="#ffffff" fill-opacity="0.8"/></pattern>`,
      ]
    }
    return []
  })
  return defs.length > 0 ? html`<defs>${defs}</defs>` : html``
}

function fillOf(chartId: string, s: Series): string {
  return s.pattern === 'hatch' || s.pattern === 'dots' ? `url(#${patternId(chartId, s)})` : s.colour
}

/** The legend, wrapped onto a second row when the chart is narrow. */
function legend(chartId: string, size: ChartSize, series: readonly Series[]): SafeHtml[] {
  let x = PAD.left
  let y = 8
  return series.map((s) => {
    const width = 24 + s.name.length * 7
    if (x + width > size.width - PAD.right && x > PAD.left) {
      x = PAD.left
      y += 16
    }
    const item = html`<rect x="${x}" y="${y}" width="12" height="12" fill="${fillOf(chartId, s)}" stroke="${s.colour}"/><text class="legend" x="${x + 16}" y="${y + 10}">${s.name}</text>`
    x += width
    return item
  })
}

function frame(
  chartId: string,
  size: ChartSize,
  options: { title: string; xLabel: string; yLabel: string },
  inner: SafeHtml,
): SafeHtml {
  const h = plotHeight(size)
  // A group, not an image: an image's insides are hidden from screen readers, and the bars and
  // points are links they must reach.
  return html`<svg class="chart" viewBox="0 0 ${size.width} ${size.height}" role="group" aria-labelledby="${chartId}-title" data-chart="${chartId}">
<title id="${chartId}-title">${options.title}</title>
${inner}
<line class="axis" x1="${PAD.left}" x2="${size.width - PAD.right}" y1="${PAD.top + h}" y2="${PAD.top + h}"/>
<text class="axis-label" x="${(PAD.left + size.width - PAD.right) / 2}" y="${size.height - 6}" text-anchor="middle">${options.xLabel}</text>
<text class="axis-label" transform="rotate(-90)" x="${-(PAD.top + h / 2)}" y="14" text-anchor="middle">${options.yLabel}</text>
</svg>`
}

/** Bars stacked by series, one per period (a day), each segment a link to what it counts. */
export function stackedBarChart(options: {
  /** Unique on the page: it names the title and the textures. */
  id?: string
  title: string
  yLabel: string
  xLabel: string
  series: readonly Series[]
  bars: readonly StackedBar[]
  size?: ChartSize
}): SafeHtml {
  const { series, bars } = options
  const size = options.size ?? WIDE
  const chartId = options.id ?? `chart-${slug(options.title)}`
  const totals = bars.map((b) => series.reduce((sum, s) => sum + (b.values[s.key] ?? 0), 0))
  const { top, step } = countScale(Math.max(0, ...totals))
  const h = plotHeight(size)
  const slot = (size.width - PAD.left - PAD.right) / Math.max(1, bars.length)
  const barWidth = Math.max(1, Math.min(32, slot * 0.7))
  const columns = bars.map((bar, i) => {
    let base = PAD.top + h
    const x = PAD.left + slot * i + (slot - barWidth) / 2
    const parts = series.flatMap((s) => {
      const value = bar.values[s.key] ?? 0
      if (value <= 0) return []
      const height = (value / top) * h
      base -= height
      const rect = html`<rect class="bar" x="${x.toFixed(1)}" y="${base.toFixed(1)}" width="${barWidth.toFixed(1)}" height="${height.toFixed(1)}" fill="${fillOf(chartId, s)}" stroke="${s.colour}" stroke-width="0.5"><title>${bar.longLabel}: ${value} ${s.name.toLowerCase()}</title></rect>`
      const href = bar.segmentHrefs?.[s.key]
      return [
        href
          ? html`<a href="${href}" aria-label="${bar.longLabel}: ${value} ${s.name.toLowerCase()}">${rect}</a>`
          : rect,
      ]
    })
    const total = totals[i] ?? 0
    const label = `${bar.longLabel}: ${total} in all`
    // Segments with their own links sit inside a group; a bar without them is one link.
    return bar.href && total > 0 && !bar.segmentHrefs
      ? html`<a href="${bar.href}" aria-label="${label}">${parts}</a>`
      : html`<g aria-label="${label}">${parts}</g>`
  })
  return frame(
    chartId,
    size,
    options,
    html`${patterns(chartId, series)}
${legend(chartId, size, series)}
${axis(size, top, step, (n) => String(Math.round(n * 100) / 100))}
${columns}
${xLabels(
  size,
  bars.map((b) => b.label),
  slot,
)}`,
  )
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
  id?: string
  title: string
  yLabel: string
  xLabel: string
  points: readonly LinePoint[]
  format: (value: number) => string
  /** The axis scale for the values (e.g. round minutes or hours for durations); niceScale by default. */
  scale?: (max: number) => { top: number; step: number }
  colour: string
  /** The line's name in the legend. */
  seriesName?: string
  size?: ChartSize
}): SafeHtml {
  const { points } = options
  const size = options.size ?? WIDE
  const chartId = options.id ?? `chart-${slug(options.title)}`
  const values = points.flatMap((p) => (p.value === null ? [] : [p.value]))
  const { top, step } = (options.scale ?? niceScale)(Math.max(0, ...values))
  const h = plotHeight(size)
  const slot = (size.width - PAD.left - PAD.right) / Math.max(1, points.length)
  const at = (i: number, v: number) => ({
    x: PAD.left + slot * i + slot / 2,
    y: PAD.top + h - (v / top) * h,
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
    const dot = html`<circle class="point" cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="4" fill="${options.colour}"><title>${p.longLabel}: ${options.format(p.value)}</title></circle>`
    return [
      p.href
        ? html`<a href="${p.href}" aria-label="${p.longLabel}: ${options.format(p.value)}">${dot}</a>`
        : dot,
    ]
  })
  const key = options.seriesName
    ? html`<line x1="${PAD.left}" x2="${PAD.left + 14}" y1="14" y2="14" stroke="${options.colour}" stroke-width="2"/><circle cx="${PAD.left + 7}" cy="14" r="3.5" fill="${options.colour}"/><text class="legend" x="${PAD.left + 20}" y="18">${options.seriesName}</text>`
    : ''
  return frame(
    chartId,
    size,
    options,
    html`${key}
${axis(size, top, step, options.format)}
${segments.map((d) => html`<path d="${d}" fill="none" stroke="${options.colour}" stroke-width="2"/>`)}
${dots}
${xLabels(
  size,
  points.map((p) => p.label),
  slot,
)}`,
  )
}

function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-')
}
