// The configuration schema is the one list of variables: the README's table names each of them
// with the schema's default, and nothing the schema lacks; the schema and the text rules it uses
// sit below every layer that reads the configuration.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { test } from 'node:test'
import { ENVIRONMENT, keyword } from '../../src/config/variables.js'
import { SRC, sourceFiles } from '../support/source-files.js'

const README = join(SRC, '..', 'README.md')

/** The README's configuration table: variable → its default cell, as written. */
function readmeTable(): Map<string, string> {
  const readme = readFileSync(README, 'utf8')
  const section = readme.slice(readme.indexOf('\n## Configuration\n'))
  const end = section.indexOf('\n## ', 1)
  const rows = new Map<string, string>()
  for (const match of section.slice(0, end).matchAll(/^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*([^|]*?)\s*\|/gm)) {
    rows.set(match[1] as string, match[2] as string)
  }
  return rows
}

/** The default as the README's table gives it: the value in code, words for one that depends, or —. */
function documentedDefault(name: string): string {
  const schema = ENVIRONMENT.properties[name as keyof typeof ENVIRONMENT.properties]
  const text = keyword(schema, 'defaultText')
  if (typeof text === 'string') return text
  const value = keyword(schema, 'default')
  return value === undefined ? '—' : `\`${String(value)}\``
}

test('the README configuration table lists every variable of the schema with its default, and no other', () => {
  const table = readmeTable()
  const variables = Object.keys(ENVIRONMENT.properties)
  assert.ok(table.size > 20, `read ${table.size} rows of the README's configuration table`)
  assert.deepEqual(
    variables.filter((name) => !table.has(name)),
    [],
    'variables of the schema missing from the README',
  )
  assert.deepEqual(
    [...table.keys()].filter((name) => !variables.includes(name)),
    [],
    'README variables the schema does not read',
  )
  const wrong = variables
    .filter((name) => !(table.get(name) ?? '').startsWith(documentedDefault(name)))
    .map((name) => `${name}: README says ${table.get(name)}, the schema ${documentedDefault(name)}`)
  assert.deepEqual(wrong, [])
})

test('the configuration and the text rules import nothing above them', () => {
  const below = [join(SRC, 'config.ts'), join(SRC, 'text-rules.ts'), ...sourceFiles(join(SRC, 'config'))]
  const wrong: string[] = []
  for (const file of below) {
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(/(?:from\s+|import\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = relative(SRC, resolve(dirname(file), match[1] as string)).replace(/\.js$/, '.ts')
      const allowed =
        target === 'config.ts' ||
        target === 'text-rules.ts' ||
        target.startsWith('config/') ||
        target === 'db/schema.ts'
      if (!allowed) wrong.push(`${relative(SRC, file)} imports ${target}`)
    }
  }
  assert.deepEqual(wrong, [])
})
