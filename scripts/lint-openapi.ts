// Builds /openapi.json from the app (no server, a throwaway SQLite database), writes it to a
// temporary file and lints it with Redocly's recommended ruleset (redocly.yaml): any error or
// warning fails. Run by .ci/run; `node --import tsx scripts/lint-openapi.ts [out.json]`.
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { openDatabase } from '../src/db/connect.js'
import { migrateToLatest } from '../src/db/migrate.js'

const root = fileURLToPath(new URL('../', import.meta.url))

/** The document the app serves at /openapi.json, as built from its routes. */
export async function buildDocument(env: Record<string, string> = {}): Promise<unknown> {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-openapi-'))
  try {
    const config = loadConfig({
      DATABASE_URL: `sqlite:${join(dir, 'shiplog.db')}`,
      SHIPLOG_SECRET: randomBytes(32).toString('hex'),
      LOG_LEVEL: 'silent',
      ...env,
    })
    const database = openDatabase(config.database)
    try {
      await migrateToLatest(database)
      const app = await buildApp({ config, database, logger: false })
      try {
        await app.ready()
        return app.swagger()
      } finally {
        await app.close()
      }
    } finally {
      await database.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export interface LintResult {
  errors: number
  warnings: number
  /** Redocly's own report, for a person to read. */
  report: string
}

/** Lints a document file with the repository's redocly.yaml. */
export function lintFile(file: string): LintResult {
  const redocly = join(root, 'node_modules', '.bin', 'redocly')
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }
  const args = ['lint', '--config', join(root, 'redocly.yaml'), file]
  const json = spawnSync(redocly, [...args, '--format=json'], { encoding: 'utf8', env })
  const totals = (JSON.parse(json.stdout) as { totals: { errors: number; warnings: number } }).totals
  const stylish = spawnSync(redocly, [...args, '--format=stylish'], { encoding: 'utf8', env })
  return { ...totals, report: `${stylish.stdout}${stylish.stderr}` }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const out = process.argv[2] ?? join(mkdtempSync(join(tmpdir(), 'shiplog-openapi-')), 'openapi.json')
  writeFileSync(out, JSON.stringify(await buildDocument(), null, 2))
  const result = lintFile(out)
  process.stdout.write(result.report)
  process.stdout.write(`openapi lint: ${result.errors} error(s), ${result.warnings} warning(s) in ${out}\n`)
  process.exitCode = result.errors + result.warnings === 0 ? 0 : 1
}
