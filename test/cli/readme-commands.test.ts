// The README's command tables hold every command `shiplog --help` lists, with every option it takes
// (issue 28: the table lacked `keys create --scope`), so a reader of the README misses nothing.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { processEnv, REPO_ROOT, runCli } from '../support/processes.js'

/** Each command in the help text ("keys create") with the options its usage lines name. */
function helpCommands(help: string): Map<string, Set<string>> {
  const commands = new Map<string, Set<string>>()
  let current: Set<string> | undefined
  for (const line of help.split('\n')) {
    let usage: string
    if (/^ {2}[a-z]/.test(line)) {
      // "  keys create --account NAME …   create an API key": the usage ends where the description starts.
      usage = line.slice(2).replace(/ {2,}.*$/, '')
      const words = usage.split(' ')
      const end = words.findIndex((w) => !/^[a-z][a-z-]*$/.test(w))
      current = new Set()
      commands.set(words.slice(0, end === -1 ? words.length : end).join(' '), current)
    } else if (/^ {6}\[/.test(line)) {
      usage = line // wrapped options of the command above
    } else continue
    for (const option of usage.matchAll(/--[a-z][a-z-]*/g)) current?.add(option[0])
  }
  return commands
}

test('the README documents every command of `shiplog --help` with each of its options', async (t) => {
  const help = await runCli(t, ['--help'], { env: processEnv(undefined) })
  assert.equal(help.code, 0)
  const commands = helpCommands(help.stdout)
  // Every command is read (20 today), with its options, wrapped ones included.
  assert.ok(commands.size >= 20, `${[...commands.keys()].join(', ')}`)
  assert.ok(commands.get('keys create')?.has('--scope'), help.stdout)
  assert.ok(commands.get('webhooks create')?.has('--grafana-token'), help.stdout)
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  const rows = readme.split('\n').filter((l) => l.startsWith('| `shiplog '))
  const missing: string[] = []
  for (const [command, options] of commands) {
    // Other tables name commands too ("| `shiplog copy` | carried: …" in The secret): an option
    // counts as documented when any row of the command names it.
    const found = rows.filter(
      (r) =>
        r.startsWith(`| \`shiplog ${command}`) && /^[ `[\]]/.test(r.slice(`| \`shiplog ${command}`.length)),
    )
    if (found.length === 0) {
      missing.push(`shiplog ${command}`)
      continue
    }
    for (const option of options)
      if (!found.some((row) => row.includes(option))) missing.push(`shiplog ${command} ${option}`)
  }
  assert.deepEqual(missing, [], 'missing from the README command tables')
})
