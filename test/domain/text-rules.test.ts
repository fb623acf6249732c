// The one rule for text, without a database: the fast check ingest runs is the plain definition,
// over hostile input built around every edge of the refused ranges.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { hasControlCharacter, nameProblem, REFUSED_CHARACTER, textProblem } from '../../src/text-rules.js'

/** Each refused range's first and last code point, and its neighbours on either side. */
const EDGES = [
  0x00, 0x01, 0x09, 0x0a, 0x0d, 0x1f, 0x20, 0x7e, 0x7f, 0x80, 0x85, 0x9b, 0x9f, 0xa0, 0xad, 0x200e, 0x200f,
  0x2028, 0x2029, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x202f, 0x2060, 0x2065, 0x2066, 0x2067,
  0x2068, 0x2069, 0x206a, 0xd7ff, 0xe000, 0xfeff, 0xfffd, 0xffff,
]

const unit = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...EDGES).map((c) => String.fromCharCode(c)) },
  // Lone and paired surrogates: never refused by this rule (well-formedness is another).
  { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constantFrom('\u{1f680}', '\u{10ffff}', '\u{e0001}') },
  { weight: 4, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 4, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
)

test('the fast check refuses exactly the characters of the plain definition', () => {
  fc.assert(
    fc.property(fc.string({ unit, maxLength: 40 }), (text) => {
      assert.equal(hasControlCharacter(text), REFUSED_CHARACTER.test(text), JSON.stringify(text))
    }),
    { numRuns: 20_000, seed: 20_261_127 },
  )
  for (let c = 0; c <= 0xffff; c++) {
    const ch = String.fromCharCode(c)
    assert.equal(hasControlCharacter(ch), REFUSED_CHARACTER.test(ch), `U+${c.toString(16)}`)
  }
})

test('C1 controls and bidi overrides are refused; marks, joiners and separators in text are kept', () => {
  for (const bad of [
    'a\u0085b',
    'red\u009b31m',
    'x\u202ey',
    'x\u202ay',
    'iso\u2066late',
    'x\u2069',
    'a\u0000b',
  ]) {
    assert.ok(textProblem(bad), JSON.stringify(bad))
    assert.ok(nameProblem(bad), JSON.stringify(bad))
  }
  for (const good of ['Déploiement ✓ 部署 🚀', 'a\u200eb', 'a\u200db', 'nbsp\u00a0x', 'x\u2028y', 'שלום']) {
    assert.equal(textProblem(good), null, JSON.stringify(good))
  }
  assert.equal(textProblem('one\r\ntwo\tthree', { multiline: true }), null)
  assert.ok(textProblem('one\r\ntwo'))
  assert.ok(textProblem('one\u0000two', { multiline: true }))
  assert.equal(textProblem('\ud800'), 'must be valid Unicode text')
})
