// Security headers on every answer. They never vary, so they are one frozen list set by a single
// hook; @fastify/helmet rebuilt its middleware (and re-parsed the CSP) on every request, which cost
// the ingest routes about 6 % of their time.

/** Content-Security-Policy: same-origin everything, no inline script or style, no framing. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "object-src 'none'",
].join(';')

/**
 * Browser features no page of Shiplog uses, turned off for them and anything they might embed: a
 * script that got in could not ask for the camera, the position or a payment. The clipboard stays
 * (the copy buttons write to it). Only names Chromium knows, or it logs an error on every page.
 */
const PERMISSIONS_POLICY = [
  'accelerometer',
  'autoplay',
  'camera',
  'display-capture',
  'encrypted-media',
  'fullscreen',
  'geolocation',
  'gyroscope',
  'hid',
  'idle-detection',
  'magnetometer',
  'microphone',
  'midi',
  'payment',
  'picture-in-picture',
  'publickey-credentials-get',
  'screen-wake-lock',
  'serial',
  'usb',
  'xr-spatial-tracking',
]
  .map((feature) => `${feature}=()`)
  .join(', ')

/**
 * The same set helmet's defaults give, and a Permissions-Policy. HSTS is left out on purpose: it only makes sense once the
 * operator serves HTTPS, so it belongs to the proxy that terminates TLS.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'origin-agent-cluster': '?1',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-dns-prefetch-control': 'off',
  'x-download-options': 'noopen',
  'permissions-policy': PERMISSIONS_POLICY,
  // The old header says what frame-ancestors 'none' says, for browsers that only know the old one.
  'x-frame-options': 'DENY',
  'x-permitted-cross-domain-policies': 'none',
  // The browsers' old XSS auditor caused more holes than it closed; 0 turns it off.
  'x-xss-protection': '0',
})

/**
 * The ingest routes answer JSON to pipelines, never a page: a policy that allows nothing and no
 * sniffing is all that applies, and three headers instead of eleven keep the hot path lean.
 */
export const API_SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'x-content-type-options': 'nosniff',
})
