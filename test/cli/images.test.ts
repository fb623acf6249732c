// Without a Docker engine: both Dockerfiles, .dockerignore and action.yml are read and checked, and the exact command lines the images run (deploy entrypoint, shell wrapper, HEALTHCHECK) are executed against a real server (SPEC §4).
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, posix } from 'node:path'
import { before, test } from 'node:test'
import { parseDocument } from 'yaml'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import type { EventRow } from '../../src/db/schema.js'
import { createApiKey } from '../../src/domain/keys.js'
import { addTenant, type Cleanup, freshDatabaseUrl, type Tenant } from '../helper.js'
import {
  assertBuilt,
  fileScope,
  processEnv,
  REPO_ROOT,
  type ServerProcess,
  startServer,
  withTimeout,
} from '../support/processes.js'

const TEST_TIMEOUT = { timeout: 90_000 }
const RUN_TIMEOUT_MS = 45_000

const readRepoFile = (path: string) => readFileSync(join(REPO_ROOT, path), 'utf8')

// ---------------------------------------------------------------------------------------------
// Reading Dockerfiles: enough of the syntax for these two files, refusing what it does not know.

interface Instruction {
  keyword: string
  args: string
  line: number
}

interface Stage {
  image: string
  name: string | undefined
  instructions: Instruction[]
}

/** Instructions with continuation lines joined and comments dropped (as Docker does). */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = []
  let buffer = ''
  let startLine = 0
  const lines = text.split(/\r?\n/)
  for (const [i, raw] of lines.entries()) {
    const trimmed = raw.trim()
    if (trimmed.startsWith('#')) continue
    if (buffer === '' && trimmed === '') continue
    if (buffer === '') startLine = i + 1
    if (/\\\s*$/.test(raw)) {
      buffer += `${raw.replace(/\\\s*$/, '')} `
      continue
    }
    buffer += raw
    const match = /^\s*([A-Za-z]+)\s+([\s\S]*)$/.exec(buffer)
    if (!match?.[1] || match[2] === undefined) throw new Error(`line ${startLine}: cannot read "${buffer}"`)
    out.push({ keyword: match[1].toUpperCase(), args: match[2].trim(), line: startLine })
    buffer = ''
  }
  if (buffer.trim() !== '') throw new Error(`the file ends inside a continued line: "${buffer}"`)
  return out
}

function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = []
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const words = instruction.args.split(/\s+/).filter((w) => !w.startsWith('--'))
      const image = words[0]
      assert.ok(image, `line ${instruction.line}: FROM without an image`)
      const named = words.length === 3 && words[1]?.toUpperCase() === 'AS' ? words[2] : undefined
      assert.ok(words.length === 1 || named, `line ${instruction.line}: cannot read FROM ${instruction.args}`)
      stages.push({ image, name: named, instructions: [] })
      continue
    }
    const current = stages.at(-1)
    assert.ok(current, `line ${instruction.line}: ${instruction.keyword} before the first FROM`)
    current.instructions.push(instruction)
  }
  assert.ok(stages.length > 0, 'no FROM at all')
  return stages
}

function loadDockerfile(path: string): Stage[] {
  return stagesOf(parseDockerfile(readRepoFile(path)))
}

function finalStage(stages: Stage[]): Stage {
  const last = stages.at(-1)
  if (!last) throw new Error('no stages')
  return last
}

/** The JSON (exec) form of ENTRYPOINT/CMD/VOLUME/…, or undefined for the shell form. */
function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined
  const value: unknown = JSON.parse(args)
  assert.ok(
    Array.isArray(value) && value.every((v) => typeof v === 'string'),
    `not a JSON array of strings: ${args}`,
  )
  return value
}

function only(stage: Stage, keyword: string): Instruction {
  const found = stage.instructions.filter((i) => i.keyword === keyword)
  assert.equal(found.length, 1, `exactly one ${keyword} in the stage FROM ${stage.image}`)
  const [instruction] = found
  if (!instruction) throw new Error('unreachable')
  return instruction
}

function lastOf(stage: Stage, keyword: string): Instruction | undefined {
  return stage.instructions.filter((i) => i.keyword === keyword).at(-1)
}

interface Copy {
  from: string | undefined
  sources: string[]
  dest: string
  line: number
}

function copiesOf(stage: Stage): Copy[] {
  return stage.instructions
    .filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD')
    .map((instruction) => {
      assert.equal(instruction.keyword, 'COPY', `line ${instruction.line}: ADD fetches and unpacks; use COPY`)
      let rest = instruction.args
      let from: string | undefined
      for (;;) {
        const flag = /^--([a-z-]+)(?:=(\S*))?\s+/.exec(rest)
        if (!flag) break
        if (flag[1] === 'from') from = flag[2]
        rest = rest.slice(flag[0].length)
      }
      const words = execForm(rest) ?? rest.split(/\s+/)
      assert.ok(words.length >= 2, `line ${instruction.line}: COPY needs a source and a destination`)
      const dest = words.at(-1) ?? ''
      return { from, sources: words.slice(0, -1), dest, line: instruction.line }
    })
}

/** WORKDIR in effect at the given instruction (absolute; `/` when none was set). */
function workdirAt(stage: Stage, instruction: Instruction | undefined): string {
  let dir = '/'
  for (const i of stage.instructions) {
    if (i === instruction) break
    if (i.keyword === 'WORKDIR') dir = posix.resolve(dir, i.args)
  }
  return dir
}

/** Where each source of a COPY lands in the image (for a directory source: the directory itself). */
function copyTargets(stage: Stage, copy: Copy): string[] {
  const instruction = stage.instructions.find((i) => i.line === copy.line)
  const dest = posix.resolve(workdirAt(stage, instruction), copy.dest)
  const intoDirectory = copy.dest.endsWith('/') || copy.dest === '.' || copy.sources.length > 1
  if (!intoDirectory) return copy.sources.map(() => dest)
  // Into a directory: a directory's contents merge into dest, a file keeps its name. Only sources
  // from the context can be told apart here.
  assert.equal(
    copy.from,
    undefined,
    `line ${copy.line}: COPY --from into a directory is not modelled by this test`,
  )
  return copy.sources.map((source) =>
    statSync(join(REPO_ROOT, source)).isDirectory() ? dest : posix.join(dest, posix.basename(source)),
  )
}

/** ENV assignments of a stage, `KEY=value` form (quotes allowed). */
function envOf(stage: Stage): Map<string, string> {
  const env = new Map<string, string>()
  for (const instruction of stage.instructions.filter((i) => i.keyword === 'ENV')) {
    const pairs = instruction.args.match(/[A-Za-z_][A-Za-z0-9_]*=(?:"[^"]*"|\S*)/g) ?? []
    assert.ok(pairs.length > 0, `line ${instruction.line}: only ENV KEY=value is understood`)
    for (const pair of pairs) {
      const eq = pair.indexOf('=')
      env.set(pair.slice(0, eq), pair.slice(eq + 1).replace(/^"(.*)"$/, '$1'))
    }
  }
  return env
}

// ---------------------------------------------------------------------------------------------
// .dockerignore: Docker's rules (Go filepath.Match plus **, last matching line wins, a matched
// directory excludes its contents).

function dockerignorePatterns(): Array<{ exclude: boolean; regex: RegExp; text: string }> {
  return readRepoFile('.dockerignore')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const exclude = !line.startsWith('!')
      const pattern = posix
        .normalize((exclude ? line : line.slice(1)).replace(/^\/+/, ''))
        .replace(/\/+$/, '')
      const body = pattern
        .split('/')
        .map((segment) =>
          segment === '**'
            ? '.*'
            : segment
                .replace(/[.+^${}()|\\]/g, '\\$&')
                .replaceAll('*', '[^/]*')
                .replaceAll('?', '[^/]'),
        )
        .join('/')
      return { exclude, regex: new RegExp(`^${body}(?:/.*)?$`), text: line }
    })
}

function ignoredByDocker(path: string): string | undefined {
  const normal = posix
    .normalize(path)
    .replace(/^\.\/?/, '')
    .replace(/\/+$/, '')
  let verdict: string | undefined
  for (const pattern of dockerignorePatterns()) {
    if (pattern.regex.test(normal)) verdict = pattern.exclude ? pattern.text : undefined
  }
  return verdict
}

// ---------------------------------------------------------------------------------------------
// One server for the file (the HEALTHCHECK test starts and stops its own).

/** Clean-up for what lives as long as the file (server, database). */
const suite = fileScope()

interface Fixture {
  server: ServerProcess
  database: Database
  tenant: Tenant
}

let fixture: Fixture | undefined

function fx(): Fixture {
  if (!fixture) throw new Error('the shared server did not start (see the before hook)')
  return fixture
}

before(
  async () => {
    assertBuilt()
    const databaseUrl = await freshDatabaseUrl(suite)
    const server = await startServer(suite, { databaseUrl })
    const database = openDatabase(parseDatabaseUrl(databaseUrl))
    suite.after(() => database.close())
    const tenant = await addTenant(database, 'Acme')
    fixture = { server, database, tenant }
  },
  { timeout: 120_000 },
)

async function eventsOf(service: string): Promise<EventRow[]> {
  const { database, tenant } = fx()
  return database.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', tenant.account.id)
    .where('service', '=', service)
    .orderBy('id')
    .execute()
}

interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

const describeRun = (run: Run) =>
  `exit ${run.code} (signal ${run.signal}); stdout: ${JSON.stringify(run.stdout)}; stderr: ${JSON.stringify(run.stderr)}`

/** Runs a command to completion with a minimal environment plus `env`; killed after the test. */
async function runCommand(
  t: Cleanup,
  command: string,
  args: string[],
  options: { env?: Record<string, string>; cwd?: string; secret?: string } = {},
): Promise<Run> {
  const child = spawn(command, args, {
    cwd: options.cwd ?? REPO_ROOT,
    env: processEnv(undefined, options.env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
  })
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => resolve({ code, signal }))
  })
  try {
    const status = await withTimeout(closed, RUN_TIMEOUT_MS, `${command} ${args.join(' ')} did not finish`)
    const run = { ...status, stdout, stderr }
    if (options.secret) {
      assert.ok(!`${stdout}${stderr}`.includes(options.secret), `the key was printed: ${describeRun(run)}`)
    }
    return run
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
}

/** A fresh directory with nothing around it that Node could resolve packages or a module type from. */
function bareDirectory(t: Cleanup): string {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-image-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  for (let d = dir; ; d = dirname(d)) {
    for (const name of ['package.json', 'node_modules']) {
      assert.ok(!existsSync(join(d, name)), `${join(d, name)} exists, so ${dir} is not a bare directory`)
    }
    if (dirname(d) === d) break
  }
  return dir
}

// ---------------------------------------------------------------------------------------------
// Static checks of both Dockerfiles.

const DOCKERFILES = ['Dockerfile', 'Dockerfile.deploy'] as const

test(
  'every COPY source is in the build context (present, in git, not in .dockerignore) or comes from an earlier stage',
  TEST_TIMEOUT,
  () => {
    const inGit = existsSync(join(REPO_ROOT, '.git'))
    for (const file of DOCKERFILES) {
      const stages = loadDockerfile(file)
      for (const [index, stage] of stages.entries()) {
        for (const copy of copiesOf(stage)) {
          const where = `${file} line ${copy.line}`
          if (copy.from !== undefined) {
            const earlier = stages.slice(0, index)
            const source = earlier.find((s, i) => s.name === copy.from || String(i) === copy.from)
            assert.ok(source, `${where}: --from=${copy.from} names no earlier stage`)
            for (const path of copy.sources)
              assert.ok(posix.isAbsolute(path), `${where}: ${path} is not absolute`)
            continue
          }
          for (const source of copy.sources) {
            assert.ok(!/[*?[]/.test(source), `${where}: this check does not understand wildcards (${source})`)
            assert.ok(!posix.normalize(source).startsWith('..'), `${where}: ${source} is outside the context`)
            assert.ok(
              existsSync(join(REPO_ROOT, source)),
              `${where}: ${source} does not exist in the repository`,
            )
            const ignoredBy = ignoredByDocker(source)
            assert.equal(
              ignoredBy,
              undefined,
              `${where}: ${source} is excluded by .dockerignore (${ignoredBy})`,
            )
            if (inGit) {
              const tracked = execFileSync('git', ['ls-files', '--', source], {
                cwd: REPO_ROOT,
                encoding: 'utf8',
              })
              assert.notEqual(
                tracked.trim(),
                '',
                `${where}: ${source} is not in git, so a clean checkout lacks it`,
              )
            }
          }
        }
      }
    }
  },
)

test(
  'every stage is node:24 on Alpine and the final stage runs as a user other than root',
  TEST_TIMEOUT,
  () => {
    for (const file of DOCKERFILES) {
      const stages = loadDockerfile(file)
      for (const stage of stages) {
        assert.match(
          stage.image,
          /^node:24(?:\.\d+){0,2}-alpine(?:\d+(?:\.\d+)*)?(?:@sha256:[0-9a-f]{64})?$/,
          file,
        )
      }
      const user = lastOf(finalStage(stages), 'USER')
      assert.ok(user, `${file}: the final stage sets USER`)
      const name = user.args.split(':')[0]
      assert.ok(name !== 'root' && name !== '0', `${file}: the final stage runs as ${user.args}`)
    }
  },
)

test('.dockerignore keeps node_modules and dist out of the build context', TEST_TIMEOUT, () => {
  for (const path of [
    'node_modules',
    'node_modules/fastify/package.json',
    'dist',
    'dist/cli/shiplog-deploy.js',
  ]) {
    assert.ok(ignoredByDocker(path), `${path} is excluded`)
  }
  for (const path of ['src/cli/shiplog-deploy.ts', 'package.json', 'package-lock.json', 'bin/shiplog.js']) {
    assert.equal(ignoredByDocker(path), undefined, `${path} stays in the context`)
  }
})

/** Where tsc (tsconfig.build.json) writes the output for a file under its rootDir. */
function compiledPath(sourcePath: string): string {
  const config = JSON.parse(readRepoFile('tsconfig.build.json')) as {
    compilerOptions?: { rootDir?: string; outDir?: string }
  }
  const rootDir = posix.normalize(config.compilerOptions?.rootDir ?? '.')
  const outDir = posix.normalize(config.compilerOptions?.outDir ?? '.')
  const relative = posix.relative(rootDir, sourcePath)
  assert.ok(!relative.startsWith('..'), `${sourcePath} is under rootDir ${rootDir}`)
  return posix.join(outDir, relative.replace(/\.ts$/, '.js'))
}

test(
  'Dockerfile.deploy: the ENTRYPOINT runs the shiplog-deploy file the build stage compiles',
  TEST_TIMEOUT,
  () => {
    const stages = loadDockerfile('Dockerfile.deploy')
    const final = finalStage(stages)
    const entrypoint = execForm(only(final, 'ENTRYPOINT').args)
    assert.ok(entrypoint, 'ENTRYPOINT in exec form, so `docker run IMAGE KEY App …` appends the arguments')
    assert.equal(entrypoint.length, 2, `ENTRYPOINT is node and one file: ${entrypoint}`)
    assert.equal(entrypoint[0], 'node')
    const file = entrypoint[1] ?? ''
    assert.equal(lastOf(final, 'CMD'), undefined, 'no CMD that would add arguments of its own')

    // The COPY that puts that file there, from the build stage.
    const copies = copiesOf(final).filter((c) =>
      copyTargets(final, c).includes(posix.resolve(workdirAt(final, undefined), file)),
    )
    assert.equal(copies.length, 1, `one COPY writes ${file}`)
    const [copy] = copies
    if (!copy) throw new Error('unreachable')
    assert.ok(copy.from, `${file} comes from a build stage`)
    assert.deepEqual(copy.sources.length, 1)
    const build = stages.find((s) => s.name === copy.from)
    assert.ok(build, `stage ${copy.from} exists`)

    // The build stage compiles src/ with tsconfig.build.json in its WORKDIR, after copying what tsc reads.
    const compile = build.instructions.find(
      (i) => i.keyword === 'RUN' && /\btsc -p tsconfig\.build\.json\b/.test(i.args),
    )
    assert.ok(compile, `stage ${copy.from} runs tsc -p tsconfig.build.json`)
    const workdir = workdirAt(build, compile)
    const copiedBefore = copiesOf(build)
      .filter((c) => c.line < compile.line)
      .flatMap((c) => copyTargets(build, c))
    for (const needed of [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src',
    ]) {
      assert.ok(copiedBefore.includes(posix.join(workdir, needed)), `${needed} is copied before tsc runs`)
    }
    const expected = posix.join(workdir, compiledPath('src/cli/shiplog-deploy.ts'))
    assert.equal(copy.sources[0], expected, 'the copied file is what tsc makes of src/cli/shiplog-deploy.ts')
    // Locally, `npm run build` uses the same tsconfig, so this is the file the image would hold.
    assert.ok(existsSync(join(REPO_ROOT, compiledPath('src/cli/shiplog-deploy.ts'))))
    assert.equal(posix.extname(file), '.mjs', 'an .mjs name: ES module without a package.json beside it')
  },
)

test('the compiled shiplog-deploy imports nothing but Node built-ins', TEST_TIMEOUT, () => {
  const text = readRepoFile(compiledPath('src/cli/shiplog-deploy.ts'))
  const specifiers = [...text.matchAll(/\bfrom\s+['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]/g)].map(
    (m) => m[1] ?? m[2] ?? '',
  )
  assert.ok(specifiers.length > 0)
  for (const specifier of specifiers) assert.match(specifier, /^node:/, `imports ${specifier}`)
  assert.doesNotMatch(text, /\brequire\s*\(/)
})

test(
  'Dockerfile: HOST=0.0.0.0, EXPOSE = PORT = 8080, the SQLite file on the /data volume, HEALTHCHECK on /healthz, runtime files copied',
  TEST_TIMEOUT,
  () => {
    const stages = loadDockerfile('Dockerfile')
    const final = finalStage(stages)
    const env = envOf(final)
    assert.equal(env.get('HOST'), '0.0.0.0')
    assert.equal(env.get('PORT'), '8080')
    assert.equal(only(final, 'EXPOSE').args, '8080')

    const volumeArgs = only(final, 'VOLUME').args
    const volumes = execForm(volumeArgs) ?? volumeArgs.split(/\s+/)
    assert.ok(volumes.includes('/data'), `VOLUME /data: ${volumeArgs}`)
    const databaseUrl = env.get('DATABASE_URL') ?? ''
    const target = parseDatabaseUrl(databaseUrl)
    assert.equal(target.dialect, 'sqlite', `the image defaults to SQLite: ${databaseUrl}`)
    if (target.dialect === 'sqlite') {
      assert.ok(target.path.startsWith('/data/'), `the SQLite file lives on the volume: ${target.path}`)
    }
    const mkdir = final.instructions.find((i) => i.keyword === 'RUN' && /\/data\b/.test(i.args))
    assert.match(mkdir?.args ?? '', /chown\s+node(?::node)?\s+\/data\b/, 'the node user may write /data')

    const healthcheck = only(final, 'HEALTHCHECK').args
    const parsed = /^((?:--[a-z-]+=\S+\s+)*)CMD\s+(.+)$/s.exec(healthcheck)
    assert.ok(parsed?.[2], `HEALTHCHECK [options] CMD …: ${healthcheck}`)
    assert.match(parsed[1] ?? '', /--timeout=\d+s/, 'the probe has a timeout')
    assert.ok(execForm(parsed[2]), 'HEALTHCHECK CMD in exec form (no shell in the way)')
    assert.match(parsed[2], /\/healthz/)

    // What the server reads at run time, relative to WORKDIR: the entrypoint (bin/), the code it
    // loads (dist/, node_modules/), package.json (--version) and public/ (the UI's static files).
    const entrypoint = execForm(only(final, 'ENTRYPOINT').args)
    assert.deepEqual(entrypoint, ['node', 'bin/shiplog.js'])
    assert.deepEqual(execForm(only(final, 'CMD').args), ['serve'])
    const workdir = workdirAt(final, undefined)
    const copied = copiesOf(final).flatMap((c) => copyTargets(final, c))
    for (const needed of [
      'bin/shiplog.js',
      'dist/cli/shiplog.js',
      'node_modules/fastify',
      'package.json',
      'public/app.css',
    ]) {
      const path = posix.join(workdir, needed)
      assert.ok(
        copied.some((c) => path === c || path.startsWith(`${c}/`)),
        `${path} is copied into the final stage (${copied.join(', ')})`,
      )
    }
    // Copies from the build stage name what it made: node_modules from npm ci, dist from the build.
    const build = stages.find((s) => s.name === 'build')
    assert.ok(build, 'a build stage')
    const runs = build.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args)
    for (const copy of copiesOf(final).filter((c) => c.from === 'build')) {
      for (const source of copy.sources) {
        const relative = posix.relative(workdirAt(build, undefined), source)
        if (relative === 'node_modules')
          assert.ok(
            runs.some((r) => /\bnpm ci\b/.test(r)),
            'npm ci makes node_modules',
          )
        else if (relative === 'dist')
          assert.ok(
            runs.some((r) => /\bnpm run build\b/.test(r)),
            'the build makes dist',
          )
        else assert.fail(`${source}: not known to be produced by the build stage`)
      }
    }
    const scripts = (JSON.parse(readRepoFile('package.json')) as { scripts: Record<string, string> }).scripts
    // The build compiles into dist/ and bundles the server into dist/bundle/, which bin/shiplog.js runs.
    assert.equal(scripts.build, 'tsc -p tsconfig.build.json && node scripts/bundle.mjs')
    assert.equal(posix.normalize(compiledPath('src/cli/shiplog.ts')), 'dist/cli/shiplog.js')
    assert.match(readRepoFile('scripts/bundle.mjs'), /outdir: 'dist\/bundle'/)
    assert.match(readRepoFile('bin/shiplog.js'), /dist\/bundle\/shiplog\.mjs/)
  },
)

// ---------------------------------------------------------------------------------------------
// The command lines the images run, executed for real.

/** The deploy image's entrypoint file, laid out in a bare directory as the image has it. */
function stageDeployFile(t: Cleanup): { root: string; file: string } {
  const final = finalStage(loadDockerfile('Dockerfile.deploy'))
  const entrypoint = execForm(only(final, 'ENTRYPOINT').args) ?? []
  const inImage = posix.resolve(workdirAt(final, undefined), entrypoint[1] ?? '')
  const root = bareDirectory(t)
  const file = join(root, ...inImage.split('/').filter(Boolean))
  mkdirSync(dirname(file), { recursive: true })
  copyFileSync(join(REPO_ROOT, compiledPath('src/cli/shiplog-deploy.ts')), file)
  return { root, file }
}

test(
  'the deploy entrypoint, run on the compiled file alone (no package.json, no node_modules), records App1 Prod 1.0.3 Deployed',
  TEST_TIMEOUT,
  async (t) => {
    const { root, file } = stageDeployFile(t)
    const { key } = fx().tenant
    // `docker run --rm -e SHIPLOG_URL=… IMAGE KEY App1 Prod 1.0.3 Deployed` runs exactly this.
    const run = await runCommand(t, process.execPath, [file, key, 'App1', 'Prod', '1.0.3', 'Deployed'], {
      cwd: root,
      env: { SHIPLOG_URL: fx().server.url },
      secret: key,
    })
    assert.equal(run.code, 0, describeRun(run))
    assert.match(run.stdout, /^[^\n]+\n$/, describeRun(run))
    const rows = await eventsOf('App1')
    assert.equal(rows.length, 1, JSON.stringify(rows))
    assert.deepEqual(
      rows.map((r) => [r.environment, r.version, r.status, r.source]),
      [['Prod', '1.0.3', 'Deployed', 'deploy']],
    )
  },
)

test(
  'the shell-friendly shiplog-deploy that Dockerfile.deploy writes passes its arguments through unchanged',
  TEST_TIMEOUT,
  async (t) => {
    const final = finalStage(loadDockerfile('Dockerfile.deploy'))
    const { root, file } = stageDeployFile(t)
    const writer = final.instructions.find(
      (i) => i.keyword === 'RUN' && i.args.includes('/usr/local/bin/shiplog-deploy'),
    )
    assert.ok(writer, 'a RUN writes /usr/local/bin/shiplog-deploy')
    const entrypoint = execForm(only(final, 'ENTRYPOINT').args) ?? []
    const inImage = entrypoint[1] ?? ''
    assert.ok(writer.args.includes(inImage), `the wrapper script execs ${inImage}`)
    const script = join(root, 'usr', 'local', 'bin', 'shiplog-deploy')
    mkdirSync(dirname(script), { recursive: true })
    // The same shell command, with the two absolute paths moved under the bare directory.
    const command = writer.args.replaceAll('/usr/local/bin/shiplog-deploy', script).replaceAll(inImage, file)
    const written = await runCommand(t, '/bin/sh', ['-c', command], { cwd: root })
    assert.equal(written.code, 0, describeRun(written))

    const { key } = fx().tenant
    const values = ['My App', 'feature/a&b=c', '1.0.0+build.5 "quoted" $HOME `x`']
    const run = await runCommand(
      t,
      script,
      [key, values[0] ?? '', values[1] ?? '', values[2] ?? '', 'Deployed'],
      {
        cwd: root,
        // `node` is found on PATH, as in the image.
        env: { SHIPLOG_URL: fx().server.url, PATH: `${dirname(process.execPath)}:/usr/bin:/bin` },
        secret: key,
      },
    )
    assert.equal(run.code, 0, describeRun(run))
    const rows = await eventsOf('My App')
    assert.deepEqual(
      rows.map((r) => [r.environment, r.version]),
      [[values[1], values[2]]],
    )
  },
)

test(
  'the HEALTHCHECK command exits 0 against a running server and non-zero once it has stopped',
  TEST_TIMEOUT,
  async (t) => {
    const healthcheck = only(finalStage(loadDockerfile('Dockerfile')), 'HEALTHCHECK').args
    const argv = execForm(healthcheck.replace(/^(?:--[a-z-]+=\S+\s+)*CMD\s+/, '')) ?? []
    assert.equal(argv[0], 'node')
    const args = argv.slice(1)
    const server = await startServer(t, { databaseUrl: await freshDatabaseUrl(t) })
    // In the container PORT is the server's port (8080); here it is the test server's.
    const env = { PORT: String(server.port) }

    const up = await runCommand(t, process.execPath, args, { env })
    assert.equal(up.code, 0, describeRun(up))

    server.signal('SIGTERM')
    await server.waitForExit(20_000)
    const down = await runCommand(t, process.execPath, args, { env })
    assert.notEqual(down.code, 0, describeRun(down))
    assert.equal(down.signal, null, describeRun(down))
  },
)

// ---------------------------------------------------------------------------------------------
// action.yml

function record(value: unknown, where: string): Record<string, unknown> {
  assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${where} is a mapping`)
  return value as Record<string, unknown>
}

function loadAction(): Record<string, unknown> {
  const doc = parseDocument(readRepoFile('action.yml'), {
    prettyErrors: true,
    strict: true,
    uniqueKeys: true,
  })
  assert.deepEqual(
    doc.errors.map((e) => e.message),
    [],
    'action.yml parses as YAML',
  )
  assert.deepEqual(
    doc.warnings.map((e) => e.message),
    [],
    'action.yml parses without warnings',
  )
  return record(doc.toJS(), 'action.yml')
}

/** The optional inputs, named as the event fields they fill. */
const OPTIONAL_INPUTS = ['url', 'description', 'commit-time', 'check', 'force-reason'] as const
const isOptionalInput = (value: string | undefined): value is (typeof OPTIONAL_INPUTS)[number] =>
  OPTIONAL_INPUTS.some((name) => name === value)

const WRAPPER_ORDER = ['api-key', 'service', 'environment', 'version', 'status'] as const

test(
  'action.yml: valid YAML, required inputs, a docker action whose args are the five inputs in the wrapper’s order',
  TEST_TIMEOUT,
  () => {
    const action = loadAction()
    assert.equal(typeof action.name, 'string')
    assert.equal(typeof action.description, 'string')
    const inputs = record(action.inputs, 'inputs')
    for (const name of [...WRAPPER_ORDER, 'server-url']) {
      const input = record(inputs[name], `inputs.${name}`)
      assert.equal(input.required, true, `inputs.${name}.required is true`)
      assert.equal(typeof input.description, 'string', `inputs.${name} has a description`)
    }
    const runs = record(action.runs, 'runs')
    assert.equal(runs.using, 'docker')
    assert.deepEqual(
      runs.args,
      WRAPPER_ORDER.map((name) => `\${{ inputs.${name} }}`),
      'args: <API_KEY> <app> <env> <version> <status>',
    )
    const env = record(runs.env, 'runs.env')
    assert.equal(env.SHIPLOG_URL, `\${{ inputs.server-url }}`)
    // The guardrail inputs reach the wrapper as the variables its --help names (SPEC §11).
    assert.equal(env.SHIPLOG_CHECK, `\${{ inputs.check }}`)
    assert.equal(env.SHIPLOG_FORCE_REASON, `\${{ inputs.force-reason }}`)
    // Every input an expression refers to is declared.
    const text = readRepoFile('action.yml')
    for (const match of text.matchAll(/\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}/g)) {
      assert.ok(match[1] && match[1] in inputs, `inputs.${match[1]} is declared`)
    }
    // The published wrapper image, tag 1 (the runner pulls docker:// references as they are).
    assert.match(String(runs.image), /^docker:\/\/[a-z0-9./_-]+:1$/)
  },
)

test(
  'action.yml: the env it passes for the optional inputs is read by the wrapper (set: stored; empty: absent)',
  TEST_TIMEOUT,
  async (t) => {
    const env = record(record(loadAction().runs, 'runs').env, 'runs.env')
    // The optional inputs as the runner passes them: the expression's value, or '' when not given.
    const commitTime = new Date(Math.floor(Date.now() / 1000) * 1000 - 3_600_000).toISOString()
    const given = {
      url: 'https://ci.example.com/run/42',
      description: 'canary at 5%',
      'commit-time': commitTime,
      // The guardrail check, with nothing set to stop it: the event is recorded as usual.
      check: 'true',
      'force-reason': 'approved by the on-call lead',
    }
    // What each input is stored as: its column, and the value read back.
    const stored = {
      url: (row: EventRow) => row.url,
      description: (row: EventRow) => row.description,
      'commit-time': (row: EventRow) =>
        row.commit_time === null ? null : new Date(Number(row.commit_time)).toISOString(),
      // The check leaves no mark of its own on an event it allows.
      check: () => null,
      // With the check on, the reason goes only with an event the check refused, so none here.
      'force-reason': (row: EventRow) => row.override_reason,
    }
    const optional = Object.entries(env)
      .filter(([name]) => name !== 'SHIPLOG_URL')
      .map(([name, expression]) => {
        const input = /^\$\{\{\s*inputs\.([a-z-]+)\s*\}\}$/.exec(String(expression))?.[1]
        if (!isOptionalInput(input)) {
          throw new Error(
            `${name}: ${String(expression)} is not an optional input this test knows (${OPTIONAL_INPUTS.join(', ')})`,
          )
        }
        return { name, input }
      })
    assert.ok(optional.length > 0)
    const { file, root } = stageDeployFile(t)
    // The check input asks GET /api/v1/check, which needs the read scope too.
    const { key } = await createApiKey(fx().database.db, {
      accountId: fx().tenant.account.id,
      name: 'action',
      createdBy: 'test',
      scopes: ['ingest', 'read'],
    })
    for (const withValues of [true, false]) {
      const service = withValues ? 'action-env-set' : 'action-env-empty'
      const extra: Record<string, string> = { SHIPLOG_URL: fx().server.url }
      for (const { name, input } of optional) extra[name] = withValues ? given[input] : ''
      const run = await runCommand(t, process.execPath, [file, key, service, 'Prod', '1.0.3', 'Deployed'], {
        cwd: root,
        env: extra,
        secret: key,
      })
      assert.equal(run.code, 0, describeRun(run))
      const rows = await eventsOf(service)
      assert.equal(rows.length, 1, JSON.stringify(rows))
      const [row] = rows
      if (!row) throw new Error('unreachable')
      for (const { name, input } of optional) {
        const expected = withValues && input !== 'check' && input !== 'force-reason' ? given[input] : null
        assert.equal(stored[input](row), expected, `${name} → ${input}`)
      }
    }
  },
)

/** The Docker image reference grammar (distribution/reference): [registry[:port]/]path[:tag]. */
const IMAGE_REFERENCE =
  /^(?:[a-z0-9]+(?:[.-][a-z0-9]+)*(?::\d+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*:[\w][\w.-]{0,127}$/

test('action.yml: runs.image is the wrapper image Dockerfile.deploy builds, pulled at tag 1 (or a Dockerfile at the root)', {
  ...TEST_TIMEOUT,
}, () => {
  const image = String(record(loadAction().runs, 'runs').image)
  const pulled = /^docker:\/\/(.*)$/.exec(image)?.[1]
  if (pulled !== undefined) {
    // The runner pulls a docker:// reference as it is: it must be a valid reference, and the image
    // published from Dockerfile.deploy (the wrapper), not the server image or a typo of it.
    assert.match(pulled, IMAGE_REFERENCE, `runs.image "${image}" is not a valid image reference`)
    const built = /docker build -f Dockerfile\.deploy -t (\S+):1 \./.exec(
      readRepoFile('Dockerfile.deploy'),
    )?.[1]
    assert.ok(
      built,
      'Dockerfile.deploy says how it is built: "docker build -f Dockerfile.deploy -t NAME:1 ."',
    )
    assert.equal(pulled, `${built}:1`, 'the action runs the image Dockerfile.deploy builds, at tag 1')
    // And the README's publishing steps push that very name, so following them makes the action work.
    const readme = readRepoFile('README.md')
    assert.ok(
      readme.includes(`docker build -f Dockerfile.deploy -t ${built}:`) &&
        readme.includes(`docker push --all-tags ${built}`),
      `README builds and pushes ${built}`,
    )
    return
  }
  // actions/runner: Image.EndsWith("Dockerfile") || EndsWith("dockerfile") → docker build with the
  // Dockerfile's directory as context; anything else is pulled from a registry.
  assert.match(image, /[Dd]ockerfile$/, `runs.image "${image}" would be pulled as an image name`)
  assert.equal(
    posix.dirname(posix.normalize(image)),
    '.',
    'the context is the repository root the COPYs assume',
  )
})
