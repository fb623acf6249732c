// The pages' static files on content-hashed URLs (/static/app.<hash>.js), so a browser may keep each for a year.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { extname, join } from 'node:path'
import { PUBLIC_DIR } from '../paths.js'

/** The files the layout loads. */
export const ASSET_NAMES = ['app.css', 'app.js', 'favicon.svg'] as const
export type AssetName = (typeof ASSET_NAMES)[number]

export interface StaticAsset {
  /** Where the pages load it: its name with a digest of its content, so a new file is a new URL. */
  url: string
  body: Buffer
  contentType: string
  /** A strong ETag (the digest), for a revalidation that should never be needed. */
  etag: string
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
}

/** The URL path of a file with this content: `app.js` becomes `/static/app.<12 hex digits>.js`. */
export function hashedPath(name: string, content: Buffer): string {
  const digest = createHash('sha256').update(content).digest('hex').slice(0, 12)
  const ext = extname(name)
  return `/static/${name.slice(0, name.length - ext.length)}.${digest}${ext}`
}

/**
 * Reads the files once, at start: the digest is of what this process serves, so a page and the file
 * it names always agree, whether the code runs from src/, dist/ or the bundle.
 */
export function loadStaticAssets(dir: string): ReadonlyMap<AssetName, StaticAsset> {
  const assets = new Map<AssetName, StaticAsset>()
  for (const name of ASSET_NAMES) {
    const body = readFileSync(join(dir, name))
    const url = hashedPath(name, body)
    assets.set(name, {
      url,
      body,
      contentType: CONTENT_TYPES[extname(name)] ?? 'application/octet-stream',
      etag: `"${url.slice(url.lastIndexOf('/') + 1)}"`,
    })
  }
  return assets
}

let loaded: ReadonlyMap<AssetName, StaticAsset> | undefined

/** This installation's assets (public/), read on first use. */
export function staticAssets(): ReadonlyMap<AssetName, StaticAsset> {
  loaded ??= loadStaticAssets(PUBLIC_DIR)
  return loaded
}

/** The URL a page uses for one of the files. */
export function assetUrl(name: AssetName): string {
  const asset = staticAssets().get(name)
  // Every name in ASSET_NAMES is loaded (or loading threw): this cannot be missing.
  if (!asset) throw new Error(`unknown static asset ${name}`)
  return asset.url
}
