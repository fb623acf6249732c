// scripts/audit.mjs (npm run audit): fails on high or critical findings in runtime dependencies, and
// says "audit NOT performed" when the advisory database cannot be asked, failing then only if strict.
// A stand-in `npm` on PATH plays each of npm audit's answers, so no network is needed.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { REPO_ROOT } from '../support/processes.js'

const SCRIPT = join(REPO_ROOT, 'scripts', 'audit.mjs')

interface NpmAnswer {
  stdout?: unknown
  stderr?: string
  exit: number
}

/** Runs the audit script with a fake npm that gives `answer`; returns what the script did. */
function audit(answer: NpmAnswer, env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-audit-'))
  try {
    const fake = join(dir, 'npm')
    writeFileSync(
      join(dir, 'stdout'),
      typeof answer.stdout === 'string' ? answer.stdout : JSON.stringify(answer.stdout ?? ''),
    )
    writeFileSync(join(dir, 'stderr'), answer.stderr ?? '')
    writeFileSync(
      fake,
      `#!/bin/sh\necho "$@" > "${dir}/args"\ncat "${dir}/stdout"\ncat "${dir}/stderr" >&2\nexit ${answer.exit}\n`,
    )
    chmodSync(fake, 0o755)
    const run = spawnSync(process.execPath, [SCRIPT], {
      encoding: 'utf8',
      env: { PATH: `${dir}:${process.env.PATH ?? ''}`, ...env },
      timeout: 30_000,
    })
    return {
      code: run.status,
      out: `${run.stdout}${run.stderr}`,
      args: readFileSync(join(dir, 'args'), 'utf8').trim(),
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

function report(
  counts: Partial<Record<'info' | 'low' | 'moderate' | 'high' | 'critical', number>>,
  vulnerabilities = {},
) {
  const all = { info: 0, low: 0, moderate: 0, high: 0, critical: 0, ...counts }
  const total = Object.values(all).reduce((a, b) => a + b, 0)
  return {
    auditReportVersion: 2,
    vulnerabilities,
    metadata: { vulnerabilities: { ...all, total }, dependencies: { prod: 97, dev: 0, total: 96 } },
  }
}

const HIGH_FINDING = {
  'path-to-regexp': {
    name: 'path-to-regexp',
    severity: 'high',
    isDirect: false,
    via: [
      {
        source: 1,
        name: 'path-to-regexp',
        title: 'path-to-regexp outputs backtracking regular expressions',
        url: 'https://github.com/advisories/GHSA-9wv6-86v2-598j',
        severity: 'high',
        range: '<0.1.10',
      },
    ],
    range: '<0.1.10',
    fixAvailable: true,
  },
}

test('runs npm audit for runtime dependencies, at level high, as JSON', () => {
  const run = audit({ stdout: report({}), exit: 0 })
  assert.equal(run.args, 'audit --omit=dev --audit-level=high --json')
  assert.equal(run.code, 0, run.out)
  assert.match(run.out, /no high or critical finding/)
})

test('low and moderate findings are reported but do not fail', () => {
  const run = audit({ stdout: report({ low: 2, moderate: 1 }), exit: 0 })
  assert.equal(run.code, 0, run.out)
  assert.match(run.out, /moderate 1/)
})

test('a high or a critical finding fails, naming the package, the advisory and whether a fix exists', () => {
  const high = audit({ stdout: report({ high: 1 }, HIGH_FINDING), exit: 1 })
  assert.equal(high.code, 1, high.out)
  assert.match(high.out, /HIGH path-to-regexp <0\.1\.10: path-to-regexp outputs backtracking/)
  assert.match(high.out, /GHSA-9wv6-86v2-598j/)
  assert.match(high.out, /a fix is available/)
  const critical = audit({
    stdout: report(
      { critical: 1 },
      { x: { ...HIGH_FINDING['path-to-regexp'], name: 'x', severity: 'critical' } },
    ),
    exit: 1,
  })
  assert.equal(critical.code, 1, critical.out)
  assert.match(critical.out, /CRITICAL x/)
})

test('an advisory endpoint that refuses (405, as on a read-only registry mirror) is "audit NOT performed": passes, unless strict', () => {
  const refused: NpmAnswer = {
    stdout: {
      message: '405 Method Not Allowed - POST https://registry.npmjs.org/-/npm/v1/security/advisories/bulk',
      method: 'POST',
      statusCode: 405,
      body: '',
    },
    stderr: 'npm warn audit 405 Method Not Allowed\nnpm error audit endpoint returned an error\n',
    exit: 1,
  }
  const lenient = audit(refused)
  assert.equal(lenient.code, 0, lenient.out)
  assert.match(lenient.out, /advisory database unreachable: audit NOT performed \(405 Method Not Allowed/)
  const strict = audit(refused, { SHIPLOG_AUDIT_STRICT: '1' })
  assert.equal(strict.code, 3, strict.out)
  assert.match(strict.out, /audit NOT performed/)
})

test('no network at all is "audit NOT performed" too', () => {
  const offline: NpmAnswer = {
    stdout: '',
    stderr: 'npm error code ENOTFOUND\nnpm error network request to https://registry.npmjs.org/ failed\n',
    exit: 1,
  }
  const run = audit(offline)
  assert.equal(run.code, 0, run.out)
  assert.match(run.out, /audit NOT performed/)
  assert.equal(audit(offline, { SHIPLOG_AUDIT_STRICT: 'true' }).code, 3)
})

test('any other npm failure (no lock file) fails, strict or not', () => {
  const run = audit({
    stdout: { error: { code: 'ENOLOCK', summary: 'This command requires an existing lockfile.' } },
    exit: 1,
  })
  assert.equal(run.code, 2, run.out)
  assert.doesNotMatch(run.out, /NOT performed/)
})
