/**
 * A tenant's `blockedAddresses` (operator-interface.md, "Tenant settings"): an internal transfer to one is 403
 * `BLOCKED_BY_POLICY`, an on-chain withdrawal to one ends `REJECTED`. An entry blocks a destination when both denote
 * the same address in the destination network's family, not when their text is equal: the service normalizes
 * destinations (EVM lowercase, TRON base58, bech32 lowercase; chains/AddressValidation.ts), so an operator's EIP-55
 * or `41…` hex entry compared as text let payments to that very address through. Both sides go through
 * `validateAddress`, so what "the same address" means is decided there and nowhere else.
 *
 * Entries are stored as the operator wrote them (docs/decisions.md, "Tenant settings"); their normalized forms are
 * computed here, once per settings array and network kind, because both checks run on every payment.
 */
import { validateAddress } from "../chains/AddressValidation.ts"
import { BtcNetwork, ChainFamily } from "../chains/ChainFamily.ts"

/** What the match needs of the destination's network; a `CatalogNetwork` is one. */
export interface BlockedAddressNetwork {
  readonly chainFamily: ChainFamily
  /** Required for BTC: an address's validity and spelling depend on the network (validateAddress). */
  readonly btcNetwork: BtcNetwork | null
}

/** How much of an invalid entry the 422 message quotes: the body may hold a megabyte in one entry. */
export const invalidEntryQuotedLengthMax = 100

/**
 * Normalized entries per settings array, then per network kind (family, and BTC network). Keyed weakly by the array:
 * settings are decoded once per tenant load and that object is shared by every request until the tenant cache is
 * cleared (tenants/Tenants.ts), so a new array after an operator's change is a new key and the old one is collected.
 */
const normalizedByEntries = new WeakMap<ReadonlyArray<string>, Map<string, ReadonlySet<string>>>()

const networkKind = (network: BlockedAddressNetwork): string =>
  network.chainFamily === "BTC" ? `BTC:${network.btcNetwork}` : network.chainFamily

const normalize = (network: BlockedAddressNetwork, address: string) =>
  validateAddress({ family: network.chainFamily, btcNetwork: network.btcNetwork ?? undefined, address })

const normalizedEntries = (entries: ReadonlyArray<string>, network: BlockedAddressNetwork): ReadonlySet<string> => {
  let byKind = normalizedByEntries.get(entries)
  if (byKind === undefined) {
    byKind = new Map()
    normalizedByEntries.set(entries, byKind)
  }
  const kind = networkKind(network)
  let normalized = byKind.get(kind)
  if (normalized === undefined) {
    // An entry that is no address of this family denotes nothing here (an EVM entry never blocks a TRON payment).
    normalized = new Set(entries.flatMap((entry) => {
      const checked = normalize(network, entry)
      return checked.isValid ? [checked.normalized] : []
    }))
    byKind.set(kind, normalized)
  }
  return normalized
}

/** Whether `destination`, on a network of `network`'s family, is one of the tenant's blocked addresses. */
export const isBlockedAddress = (
  entries: ReadonlyArray<string> | undefined,
  network: BlockedAddressNetwork,
  destination: string
): boolean => {
  if (entries === undefined || entries.length === 0) return false
  const checked = normalize(network, destination)
  if (checked.isValid) return normalizedEntries(entries, network).has(checked.normalized)
  // Destinations arrive validated (the quote, the withdrawal row); one that is not still meets the exact text, so
  // no spelling of a blocked entry ever passes unchecked.
  return entries.includes(destination)
}

const btcNetworks = BtcNetwork.literals

/** Whether `entry` is a valid address of any family the service supports, BTC on any of its networks. */
const isSupportedAddress = (entry: string): boolean =>
  ChainFamily.literals.some((chainFamily) =>
    chainFamily === "BTC"
      ? btcNetworks.some((btcNetwork) => normalize({ chainFamily, btcNetwork }, entry).isValid)
      : normalize({ chainFamily, btcNetwork: null }, entry).isValid
  )

const quoted = (entry: string): string =>
  JSON.stringify(entry.length > invalidEntryQuotedLengthMax ? `${entry.slice(0, invalidEntryQuotedLengthMax)}…` : entry)

/**
 * Save-time check of a `blockedAddresses` value: the message naming the first entry that is no address of any
 * supported family, or undefined when all are. Not part of the settings schema, because that schema also decodes
 * stored settings on every request, and a tenant saved before this check must keep working (its invalid entries
 * match nothing, as before).
 */
export const blockedAddressesProblem = (entries: ReadonlyArray<string>): string | undefined => {
  const index = entries.findIndex((entry) => !isSupportedAddress(entry))
  if (index === -1) return undefined
  return `blockedAddresses[${index}] ${quoted(entries[index]!)} is not a valid EVM, TRON, BTC or SOL address`
}
