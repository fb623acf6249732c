#!/usr/bin/env node
// Entry point installed as `shiplog-deploy`; the code lives in dist/ (built by `npm run build`).
import { existsSync } from 'node:fs'

const entry = new URL('../dist/cli/shiplog-deploy.js', import.meta.url)
if (!existsSync(entry)) {
  process.stderr.write('shiplog-deploy: not built yet; run `npm run build`\n')
  process.exit(2)
}
const { runDeploy, processEnvironment } = await import(entry.href)
process.exitCode = await runDeploy(processEnvironment())
