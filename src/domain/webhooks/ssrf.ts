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

/** The sixteen bytes of an IPv6 address in text form (already checked by isIP), as 8 groups. */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase()
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const middle = tail === undefined ? [] : new Array<string>(8 - left.length - right.length).fill('0')
  return [...left, ...middle, ...right].map((group) => Number.parseInt(group, 16))
}

function dottedQuad(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

/**
 * The IPv4 address an IPv6 one stands for, if any: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d),
 * NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48), 6to4 (2002:aabb:ccdd::/48) and Teredo
 * (2001:0::/32, the client's address stored inverted in the last 32 bits). Each can carry a packet
 * to the IPv4 address inside, so each is judged by it.
 */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address)
  if (g.length !== 8 || g.some((n) => Number.isNaN(n))) return null
  const [g0, g1, g2, , , g5, g6, g7] = g as [number, number, number, number, number, number, number, number]
  const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0)
  if (zeroTo(5) && (g5 === 0xffff || g5 === 0) && !(g5 === 0 && g6 === 0)) return dottedQuad(g6, g7)
  if (g0 === 0x64 && g1 === 0xff9b && (g2 === 0 || g2 === 1)) return dottedQuad(g6, g7)
  if (g0 === 0x2002) return dottedQuad(g1, g2)
  if (g0 === 0x2001 && g1 === 0) return dottedQuad(g6 ^ 0xffff, g7 ^ 0xffff)
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
  const lower = host.toLowerCase().replace(/\.$/, '')
  const reason =
    isIP(host) !== 0
      ? refusedAddress(host)
      : lower === 'localhost' || lower.endsWith('.localhost')
        ? `${host} is a loopback name`
        : null
  return reason === null ? null : `${reason}${PRIVATE_TARGETS_HINT}`
}

/** What a refused internal target says next: the one setting that allows it, by name. */
export const PRIVATE_TARGETS_HINT =
  ' (internal targets are refused unless the server runs with SHIPLOG_WEBHOOK_ALLOW_PRIVATE=1)'

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
          if (reason) {
            return callback(
              new Error(`refused: ${hostname} resolves to ${reason}${PRIVATE_TARGETS_HINT}`),
              '',
              0,
            )
          }
        }
      }
      const first = list[0]
      if (!first) return callback(new Error(`${hostname} has no address`), '', 0)
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list)
      return callback(null, first.address, first.family)
    })
  }
}
