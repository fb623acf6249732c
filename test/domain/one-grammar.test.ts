// Issue 25 §17 and §19, held on the source: text from a request becomes an instant only through
// src/domain/instants.ts and a whole number only through src/domain/whole-numbers.ts.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import { test } from 'node:test'
import { SRC, sourceFiles } from '../support/source-files.js'

/** Every line of src/ matching `pattern`, as "file:line: text", comments left out. */
function linesMatching(pattern: RegExp): string[] {
  const found: string[] = []
  for (const file of sourceFiles(SRC)) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (/^\s*(\/\/|\*|\/\*)/.test(line)) return
        if (pattern.test(line)) found.push(`${relative(SRC, file)}:${i + 1}: ${line.trim()}`)
      })
  }
  return found
}

test('Date.parse reads no text from outside: only instants.ts and two texts Shiplog did not get from a user', () => {
  const allowed = [
    'domain/instants.ts',
    // ISO text the webhook rules wrote themselves from stored milliseconds a few lines before.
    'domain/webhooks/rules.ts',
    // The Retry-After header of Shiplog's own server answer, an HTTP-date (RFC 9110), not ISO 8601.
    'cli/shiplog-deploy.ts',
  ]
  const found = linesMatching(/Date\.parse\(|new Date\(\s*['"`]/).filter(
    (line) => !allowed.some((file) => line.startsWith(`${file}:`)),
  )
  assert.deepEqual(found, [])
})

test('no route or view matches digits itself: instants and whole numbers go through the one grammar of each', () => {
  const found = linesMatching(/\\d|parseInt\(|parseFloat\(/).filter(
    (line) =>
      (line.startsWith('http/') || line.startsWith('views/')) &&
      // The payload inside a cursor this server signed (HMAC checked before it is read).
      !(line.startsWith('http/api/read-params.ts:') && line.includes('1:([1-9]\\d{0,14})')) &&
      // A %XX escape in a logged URL, two hex digits.
      !/^http\/logging\.ts:\d+: .*parseInt\(hex, 16\)/.test(line) &&
      // A pattern the OpenAPI document declares for a header Shiplog sends: it parses nothing.
      !/^http\/api\/openapi-document\.ts:\d+: +schema: \{ type: 'string', pattern: /.test(line),
  )
  assert.deepEqual(found, [])
})
