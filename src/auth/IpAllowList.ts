/**
 * IP allow-lists of API keys and the trusted-proxy list (spec section 5, check 6): single addresses or CIDR ranges,
 * IPv4 and IPv6. An IPv4-mapped IPv6 peer (`::ffff:10.0.0.1`, what a dual-stack socket reports) counts as IPv4.
 */
import ipaddr from "ipaddr.js"

export type IpMatcher = (ip: string) => boolean

type Range = readonly [ipaddr.IPv4 | ipaddr.IPv6, number]

/**
 * Only the standard text forms: dotted-quad IPv4 and IPv6. ipaddr.js also reads shorthand, octal and hex IPv4
 * (`10`, `127.1`, `017.0.0.1`, `0x7f000001`), which would silently name another address than the one meant.
 */
const isStandardText = (text: string): boolean =>
  text.includes(":") ? ipaddr.IPv6.isValid(text) : ipaddr.IPv4.isValidFourPartDecimal(text)

const parseEntry = (entry: string): Range | undefined => {
  const text = entry.trim()
  if (!isStandardText(text.split("/")[0] ?? "")) return undefined
  try {
    if (text.includes("/")) {
      const [address, bits] = ipaddr.parseCIDR(text)
      return [address, bits]
    }
    const address = ipaddr.process(text)
    return [address, address.kind() === "ipv4" ? 32 : 128]
  } catch {
    return undefined
  }
}

/** Whether an allow-list entry is well formed (used to validate operator input). */
export const isIpOrCidr = (entry: string): boolean => parseEntry(entry) !== undefined

export const parseIp = (ip: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined => {
  if (!isStandardText(ip.trim())) return undefined
  try {
    return ipaddr.process(ip.trim())
  } catch {
    return undefined
  }
}

export const makeIpMatcher = (entries: ReadonlyArray<string>): IpMatcher => {
  const ranges = entries.map(parseEntry).filter((range): range is Range => range !== undefined)
  return (ip) => {
    const address = parseIp(ip)
    if (address === undefined) return false
    return ranges.some(([base, bits]) => base.kind() === address.kind() && address.match(base as never, bits))
  }
}

/** The client address: the TCP peer, or the first X-Forwarded-For entry when the peer is a trusted proxy. */
export const clientIp = (
  peer: string | undefined,
  forwardedFor: string | undefined,
  isTrustedProxy: IpMatcher
): string | undefined => {
  if (peer === undefined) return undefined
  const normalizedPeer = parseIp(peer)?.toString()
  if (normalizedPeer === undefined) return undefined
  if (forwardedFor !== undefined && isTrustedProxy(normalizedPeer)) {
    const first = forwardedFor.split(",")[0]?.trim()
    return first === undefined || first.length === 0 ? undefined : parseIp(first)?.toString()
  }
  return normalizedPeer
}
