/**
 * Which addresses a delivery may connect to (spec 6, rule 4): in production only public unicast addresses, so a
 * tenant cannot point the service at its own network (loopback, private ranges, link-local cloud metadata). The
 * check runs on the addresses the connection will actually use (the resolver result handed to the socket), so a
 * name that resolves differently between a check and the connect cannot slip through.
 */
import ipaddr from "ipaddr.js"
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from "node:dns"
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

/** Why `address` must not be connected to, or undefined when it is a public unicast address. */
export const refusalReason = (address: string): string | undefined => {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`
  let parsed = ipaddr.parse(address)
  // ::ffff:10.0.0.1 reaches 10.0.0.1.
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address()
  }
  const range = parsed.range()
  if (range === "unicast") return undefined
  return `${address} is a ${rangeWords[range] ?? `non-public (${range})`} address`
}

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

/**
 * A `lookup` for node:http that resolves like the default one and fails with AddressRefused when any address the
 * name resolves to is refused: one public address among private ones would still let a later connect pick a private
 * one.
 */
export const guardedLookup = (
  hostname: string,
  options: { readonly all?: boolean; readonly family?: number | string },
  callback: LookupCallback
): void => {
  dnsLookup(hostname, { ...(options as LookupAllOptions), all: true }, (error, addresses) => {
    if (error !== null) return callback(error, [])
    for (const entry of addresses) {
      const reason = refusalReason(entry.address)
      if (reason !== undefined) return callback(new AddressRefused(`refused: ${hostname}: ${reason}`), [])
    }
    if (options.all === true) return callback(null, addresses)
    const first = addresses[0]
    if (first === undefined) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), [])
    callback(null, first.address, first.family)
  })
}
