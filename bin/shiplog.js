#!/usr/bin/env node
// Entry point installed as `shiplog`; the code lives in dist/ (built by `npm run build`): the
// bundle when there is one (it starts fastest), else the compiled modules.
import { existsSync } from 'node:fs'

const bundle = new URL('../dist/bundle/shiplog.mjs', import.meta.url)
const compiled = new URL('../dist/cli/shiplog.js', import.meta.url)
const entry = existsSync(bundle) ? bundle : compiled
if (!existsSync(entry)) {
  process.stderr.write('shiplog: not built yet; run `npm run build` (npm start does it for you)\n')
  process.exit(1)
}
await import(entry.href)
