// The one grammar for whole numbers that people and programs send as text (query parameters, form
// fields): decimal digits only — no sign, no spaces, no 0x, no exponent, no fraction, no leading
// zero except "0" itself — and within the range the caller names. docs/API.md ("Whole numbers").

const GRAMMAR = /^(?:0|[1-9]\d{0,15})$/

/** The number `text` writes, when it follows the grammar and lies in [min, max]; else undefined. */
export function parseWholeNumber(text: string, min: number, max: number): number | undefined {
  if (!GRAMMAR.test(text)) return undefined
  const n = Number(text)
  return Number.isSafeInteger(n) && n >= min && n <= max ? n : undefined
}

/** The largest id a cursor, `before` or `after` may name (ids are 64-bit, but stay below 2^53). */
export const MAX_ID = Number.MAX_SAFE_INTEGER
