// Bundles the compiled server (dist/) into one file, dist/bundle/shiplog.mjs. Loading one file instead of some 600 modules (Kysely and TypeBox alone are
// hundreds) cuts start-up to listening by about two thirds. Run by `npm run build` after tsc.
import { build } from 'esbuild'

const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // The native SQLite binding loads its .node file relative to its own package, and Swagger UI its
  // static files (/docs); pg-native is an optional peer of pg that Shiplog does not use.
  external: ['better-sqlite3', 'pg-native', '@fastify/swagger-ui'],
  // Bundled CommonJS packages call require(); in an ES module it has to be made.
  banner: {
    js: "import { createRequire as __shiplogCreateRequire } from 'node:module'; const require = __shiplogCreateRequire(import.meta.url);",
  },
  sourcemap: true,
  // Less text for V8 to parse at every start; names stay, so stack traces still read.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
}

await build({
  ...common,
  entryPoints: { shiplog: 'dist/cli/shiplog.js' },
  outdir: 'dist/bundle',
  outExtension: { '.js': '.mjs' },
})
