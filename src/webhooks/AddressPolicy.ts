/**
 * Which addresses a delivery may connect to (spec 6, rule 4): in production only public unicast addresses, so a
 * tenant cannot point the service at its own network (loopback, private ranges, link-local cloud metadata). The
 * check runs on the addresses the connection will actually use (the resolver result handed to the socket), so a
 * name that resolves differently between a check and the connect cannot slip through.
 */
import ipaddr from "ipaddr.js"
import { type LookupAddress, Resolver } from "node:dns"
import { isIP } from "node:net"

const rangeWords: Record<string, string> = {
  private: "private",
  uniqueLocal: "private",
  loopback: "loopback",
  linkLocal: "link-local",
  unspecified: "unspecified",
  carrierGradeNat: "shared (carrier-grade NAT)",
  multicast: "multicast",
  broadcast: "broadcast"
}

/**
 * An IPv6 address as the WHATWG URL parser writes it (all hex): ipaddr.js reads a dotted tail as IPv4-mapped
 * whatever precedes it (`::127.0.0.1` as `::ffff:127.0.0.1`), while the socket connects to what was written.
 */
const canonicalIPv6 = (address: string): string | undefined => {
  if (!address.includes(":")) return undefined
  try {
    return new URL(`http://[${address}]/`).hostname.replace(/^\[(.*)\]$/, "$1")
  } catch {
    return undefined
  }
}

/** Why `address` must not be connected to, or undefined when it is a public unicast address. */
export const refusalReason = (address: string): string | undefined => {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`
  let parsed = ipaddr.parse(canonicalIPv6(address) ?? address)
  // ::ffff:10.0.0.1 reaches 10.0.0.1.
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address()
  }
  const range = parsed.range()
  if (range !== "unicast") return `${address} is a ${rangeWords[range] ?? `non-public (${range})`} address`
  if (parsed.kind() === "ipv6") {
    // Global unicast only (2000::/3): ipaddr.js calls other space "unicast" too, and an IPv4-compatible address
    // (::/96, deprecated) written in hex (`::7f00:1`, as URLs normalize `[::127.0.0.1]`) escaped the mapped check
    // above and every range (issue 36).
    if (parsed.match(ipv4CompatibleRange)) return `${address} is an IPv4-compatible address`
    if (!parsed.match(globalUnicastRange)) return `${address} is a non-global address`
  }
  return undefined
}

const globalUnicastRange = ipaddr.parseCIDR("2000::/3") as [ipaddr.IPv6, number]
const ipv4CompatibleRange = ipaddr.parseCIDR("::/96") as [ipaddr.IPv6, number]

export class AddressRefused extends Error {
  override readonly name = "AddressRefused"
}

/** The host of a URL as the socket sees it: IPv6 literals without brackets. */
export const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, "$1")

/**
 * A refusal for a URL whose host is an IP literal (node:http connects to those without any lookup), checked before
 * connecting; names are checked by `guardedLookup` instead.
 */
export const literalRefusal = (url: URL): string | undefined => {
  const host = hostOf(url)
  return isIP(host) === 0 ? undefined : refusalReason(host)
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | ReadonlyArray<LookupAddress>,
  family?: number
) => void

export type Lookup = (
  hostname: string,
  options: { readonly all?: boolean; readonly family?: number | string },
  callback: LookupCallback
) => void

/**
 * How long one DNS query may take before it is asked again (once), per name server: a name server that never
 * answers costs a delivery attempt about 2 s, well inside its 10 s (spec 8), and nothing else.
 */
export const dnsQueryTimeoutMillis = 1_000
const dnsQueryTries = 2

/** RFC 6761: `localhost` and names under it are the loopback addresses, without asking anyone. */
const loopbackNames = /^(?:.*\.)?localhost\.?$/i
const loopbackAddresses: ReadonlyArray<LookupAddress> = [{ address: "127.0.0.1", family: 4 }, { address: "::1", family: 6 }]

const lookupError = (hostname: string, code: string) =>
  Object.assign(new Error(`${code === "ETIMEOUT" ? "dns timeout" : "no address"} for ${hostname}`), { code, hostname })

/**
 * A `lookup` for node:http that asks the DNS directly, through node:dns's asynchronous client (c-ares), never
 * through getaddrinfo: getaddrinfo runs on libuv's thread pool, the one thread that verifies every signed request
 * (main.ts), and a receiver's name server that never answers held it 5.9 s per attempt (issue 36). A and AAAA are
 * asked together, each query timed out after `dnsQueryTimeoutMillis` and tried twice. `/etc/hosts` is not read
 * (only `localhost`, RFC 6761): a receiver is a public name (docs/webhooks.md).
 *
 * With `refuse` (production, spec 6 rule 4) it fails with AddressRefused when any address the name resolves to is
 * refused: one public address among private ones would still let a later connect pick a private one. The socket
 * connects to an address handed back here, so the address checked is the address used (pinned for the connection).
 * `servers` replaces the system's name servers (tests).
 */
export const makeLookup = (options: {
  readonly refuse: boolean
  readonly servers?: ReadonlyArray<string>
}): Lookup => {
  const resolver = new Resolver({ timeout: dnsQueryTimeoutMillis, tries: dnsQueryTries })
  if (options.servers !== undefined) resolver.setServers([...options.servers])
  const ask = (hostname: string, family: 4 | 6) =>
    new Promise<{ readonly addresses: ReadonlyArray<LookupAddress>; readonly code?: string }>((resolve) => {
      const done = (error: NodeJS.ErrnoException | null, addresses: Array<string>) =>
        resolve(error === null
          ? { addresses: addresses.map((address) => ({ address, family })) }
          : { addresses: [], code: error.code ?? "ENOTFOUND" })
      if (family === 4) resolver.resolve4(hostname, done)
      else resolver.resolve6(hostname, done)
    })
  return (hostname, lookupOptions, callback) => {
    const family = Number(lookupOptions.family ?? 0)
    const answer = (addresses: ReadonlyArray<LookupAddress>, code: string | undefined) => {
      const usable = addresses.filter((entry) => family !== 4 && family !== 6 || entry.family === family)
      if (usable.length === 0) return callback(lookupError(hostname, code ?? "ENOTFOUND"), [])
      if (options.refuse) {
        for (const entry of usable) {
          const reason = refusalReason(entry.address)
          if (reason !== undefined) return callback(new AddressRefused(`refused: ${hostname}: ${reason}`), [])
        }
      }
      if (lookupOptions.all === true) return callback(null, usable)
      callback(null, usable[0]!.address, usable[0]!.family)
    }
    if (loopbackNames.test(hostname)) return answer(loopbackAddresses, undefined)
    Promise.all([ask(hostname, 4), ask(hostname, 6)]).then(([v4, v6]) =>
      answer([...v4.addresses, ...v6.addresses], v4.code === "ETIMEOUT" || v6.code === "ETIMEOUT" ? "ETIMEOUT" : v4.code)
    )
  }
}

/** The production lookup (refusing) on the system's name servers. */
export const guardedLookup: Lookup = makeLookup({ refuse: true })
