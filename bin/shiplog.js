#!/usr/bin/env node
// Entry point installed as `shiplog`; the code lives in dist/ (built by `npm run build`).
import { existsSync } from 'node:fs'

const entry = new URL('../dist/cli/shiplog.js', import.meta.url)
if (!existsSync(entry)) {
  process.stderr.write('shiplog: not built yet; run `npm run build` (npm start does it for you)\n')
  process.exit(1)
}
await import(entry.href)
