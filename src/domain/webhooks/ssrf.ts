// Which webhook targets may be reached: http(s) URLs on public addresses only (SSRF guard), checked
// when a webhook is created and again on the address each delivery connects to.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { BlockList, isIP, type LookupFunction } from 'node:net'

export const MAX_URL_LENGTH = 2048

const refused = new BlockList()
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  refused.addSubnet(net, bits, 'ipv4')
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  refused.addSubnet(net, bits, 'ipv6')

/** The IPv4 address an IPv6 one stands for (mapped ::ffff:a.b.c.d, compatible, NAT64), if any. */
function embeddedIpv4(address: string): string | null {
  const lower = address.toLowerCase()
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
  if (dotted?.[1]) return dotted[1]
  const hex = /^(?:::ffff:|::|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower)
  if (hex?.[1] && hex[2]) {
    const hi = Number.parseInt(hex[1], 16)
    const lo = Number.parseInt(hex[2], 16)
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
  }
  return null
}

/** Why an address may not be a webhook target, or null when it may. */
export function refusedAddress(address: string): string | null {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '')
  const family = isIP(bare)
  if (family === 0) return `"${address}" is not an IP address`
  const v4 = family === 4 ? bare : embeddedIpv4(bare)
  if (v4 !== null ? refused.check(v4, 'ipv4') : refused.check(bare, 'ipv6')) {
    return `${bare} is a loopback, private, link-local or otherwise internal address`
  }
  return null
}

/** Checks a target URL's form (and its host when it is an address); returns the reason it is refused. */
export function checkWebhookUrl(raw: string, allowPrivate: boolean): string | null {
  if (raw.length > MAX_URL_LENGTH) return `the URL is longer than ${MAX_URL_LENGTH} characters`
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'the URL is not a valid absolute URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return 'the URL must start with http:// or https://'
  if (url.username !== '' || url.password !== '') return 'the URL must not contain a user name or password'
  if (url.hostname === '') return 'the URL has no host'
  if (allowPrivate) return null
  const host = url.hostname.replace(/^\[|\]$/g, '')
  if (isIP(host) !== 0) return refusedAddress(host)
  const lower = host.toLowerCase().replace(/\.$/, '')
  if (lower === 'localhost' || lower.endsWith('.localhost')) return `${host} is a loopback name`
  return null
}

/**
 * A DNS lookup for node:http that refuses internal addresses, so a delivery connects to exactly
 * the address that was checked (a name re-resolving to 127.0.0.1 between check and connect cannot
 * slip through).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0)
      const list = addresses as LookupAddress[]
      if (!allowPrivate) {
        for (const a of list) {
          const reason = refusedAddress(a.address)
          if (reason) return callback(new Error(`refused: ${hostname} resolves to ${reason}`), '', 0)
        }
      }
      const first = list[0]
      if (!first) return callback(new Error(`${hostname} has no address`), '', 0)
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list)
      return callback(null, first.address, first.family)
    })
  }
}
