// Formatting of the results table and a summary of what a server wrote to its log.
import { readFileSync } from 'node:fs'

/**
 * @param {number | null | undefined} value
 * @param {number} [digits]
 */
export function num(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return '-'
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

/**
 * Renders rows as a plain-text table; numeric-looking cells are right-aligned.
 * @param {string[]} header
 * @param {string[][]} rows
 */
export function renderTable(header, rows) {
  const all = [header, ...rows]
  const widths = header.map((_, col) => Math.max(...all.map((row) => (row[col] ?? '').length)))
  const numeric = header.map((_, col) => rows.every((row) => /^[-\d.,%x ]*$/.test(row[col] ?? '')))
  const line = (/** @type {string[]} */ row) =>
    row
      .map((cell, col) => (numeric[col] ? cell.padStart(widths[col] ?? 0) : cell.padEnd(widths[col] ?? 0)))
      .join(' | ')
      .trimEnd()
  const rule = widths.map((w) => '-'.repeat(w)).join('-+-')
  return [line(header), rule, ...rows.map(line)].join('\n')
}

/**
 * Counts warnings and errors in a pino (JSON lines) log and keeps a few distinct messages.
 * @param {string} file
 * @returns {{ warnings: number, errors: number, samples: string[] }}
 */
export function summariseLog(file) {
  let text = ''
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return { warnings: 0, errors: 0, samples: [] }
  }
  let warnings = 0
  let errors = 0
  /** @type {Map<string, number>} */
  const messages = new Map()
  for (const raw of text.split('\n')) {
    if (raw.trim() === '') continue
    let level = 50
    let message = raw.trim()
    try {
      const entry = JSON.parse(raw)
      level = typeof entry.level === 'number' ? entry.level : 30
      const err = entry.err?.message ? ` (${entry.err.type ?? 'Error'}: ${entry.err.message})` : ''
      message = `${entry.msg ?? ''}${err}`
    } catch {
      // not JSON: a crash trace or similar, counted as an error
    }
    if (level < 40) continue
    if (level >= 50) errors++
    else warnings++
    const key = message.slice(0, 300)
    messages.set(key, (messages.get(key) ?? 0) + 1)
  }
  const samples = [...messages.entries()].slice(0, 5).map(([msg, count]) => `${count}x ${msg}`)
  return { warnings, errors, samples }
}
