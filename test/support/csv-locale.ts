// How spreadsheets in other locales split a CSV: the check that no value's separator starts a formula cell (issue 25).
import assert from 'node:assert/strict'

/**
 * The cells a spreadsheet whose locale separates with `separator` (`;` in much of Europe, a tab when
 * pasted) makes of the text, reading as Excel does: a quote anywhere opens or closes quoted text,
 * and only a separator or line break outside quotes ends a cell.
 */
export function localeCells(csv: string, separator: string): string[] {
  const cells: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < csv.length; i++) {
    const c = csv.charAt(i)
    if (c === '"') {
      if (quoted && csv.charAt(i + 1) === '"') {
        cell += '"'
        i++
      } else {
        quoted = !quoted
      }
    } else if (!quoted && (c === separator || c === '\r' || c === '\n')) {
      cells.push(cell)
      cell = ''
    } else {
      cell += c
    }
  }
  cells.push(cell)
  return cells
}

/** Read in a `;` or tab locale, no cell starts a formula: every separator in a value sits inside quotes. */
export function assertNoFormulaInAnyLocale(csv: string): void {
  for (const separator of [';', '\t', '|']) {
    for (const cell of localeCells(csv, separator)) {
      assert.doesNotMatch(cell, /^[=+\-@\t\r]/, `a cell read with ${JSON.stringify(separator)} as separator`)
    }
  }
}
