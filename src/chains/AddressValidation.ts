/**
 * Address validation and normalisation per chain family (spec: "Address validation result"; decisions.md:
 * `normalized` forms). Pure and synchronous: every check is done by the chain's own library, never by hand-written
 * base58, bech32 or keccak code. Inputs are not trimmed: a leading or trailing space makes an address invalid, so
 * what we store is exactly what was checked.
 */
import { PublicKey } from "@solana/web3.js"
import * as bitcoin from "bitcoinjs-lib"
import * as EvmAddress from "ox/Address"
import { bitcoinNetworks, requireBtcNetwork } from "./BitcoinNetwork.ts"
import { bytesToHex, tronAddressBytes, tronAddressFromHex } from "./TronAddress.ts"
import type { BtcNetwork, ChainFamily } from "./ChainFamily.ts"

export type AddressValidation =
  | { readonly isValid: true; readonly normalized: string }
  | { readonly isValid: false }

export interface AddressValidationInput {
  readonly family: ChainFamily
  /** Required when `family` is BTC (the address must belong to that network); ignored otherwise. */
  readonly btcNetwork?: BtcNetwork | undefined
  readonly address: string
}

const invalid: AddressValidation = { isValid: false }
const valid = (normalized: string): AddressValidation => ({ isValid: true, normalized })

const evmZeroAddress = `0x${"00".repeat(20)}`

/**
 * EVM: ox's strict `Address.validate` (viem's own address code, without loading viem's client: NodeClients.ts says
 * why) accepts EIP-55 checksummed and all-lowercase addresses and rejects a mixed-case address with a wrong checksum
 * (the typo EIP-55 exists to catch). It also rejects all-uppercase hex: EIP-55 would call that "no checksum", but
 * viem's strict `isAddress` does the same, so an address is valid everywhere in the service (viem validates again
 * when a transaction is built) or nowhere; the sender can always paste the lowercase form.
 * The zero address is a valid encoding but burns funds, so it is rejected here (spec).
 */
const validateEvm = (address: string): AddressValidation => {
  if (!EvmAddress.validate(address, { strict: true })) return invalid
  const normalized = address.toLowerCase()
  return normalized === evmZeroAddress ? invalid : valid(normalized)
}

const tronHexPattern = /^41[0-9a-fA-F]{40}$/
/** `41` followed by 20 zero bytes, in base58: `T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb`. Nobody holds its key. */
const tronZeroHex = "41" + "00".repeat(20)

/**
 * TRON: base58check `T…` (version byte 0x41), or the 21-byte hex form `41…` (any case), which is converted to
 * base58 because that is the form wallets and explorers show. `0x…` and bare 40-hex inputs are EVM shapes and are
 * rejected, so an EVM address pasted into a TRON field is not silently reinterpreted.
 */
const validateTron = (address: string): AddressValidation => {
  if (tronHexPattern.test(address)) {
    const hex = address.toLowerCase()
    return hex === tronZeroHex ? invalid : valid(tronAddressFromHex(hex))
  }
  if (!address.startsWith("T")) return invalid
  const bytes = tronAddressBytes(address)
  return bytes === undefined || bytesToHex(bytes) === tronZeroHex ? invalid : valid(address)
}

/** The five standard output templates. A valid address of any other shape cannot be spent by us or checked by us. */
const btcOutputTemplates = ["p2pkh", "p2sh", "p2wpkh", "p2wsh", "p2tr"] as const

const isStandardOutput = (output: Uint8Array, network: bitcoin.Network): boolean =>
  btcOutputTemplates.some((template) => {
    try {
      bitcoin.payments[template]({ output, network })
      return true
    } catch {
      return false
    }
  })

const segwitVersionsSupported = new Set([0, 1])

/**
 * BTC: `toOutputScript` checks the checksum, the encoding (bech32 for v0, bech32m for v1+), the program length and
 * that the prefix belongs to `network`. It also accepts future segwit versions (v2..v16) with only a console warning;
 * funds sent there are anyone-can-spend today, so those are rejected before it is called, and the output script must
 * then match one of the five standard templates. Base58 P2PKH/P2SH share version bytes between testnet and regtest,
 * so `m…`/`n…`/`2…` are valid on both; bech32 `tb1` and `bcrt1` are not interchangeable.
 */
const validateBtc = (address: string, btcNetwork: BtcNetwork): AddressValidation => {
  const network = bitcoinNetworks[btcNetwork]
  let isBech32: boolean
  try {
    const decoded = bitcoin.address.fromBech32(address)
    if (!segwitVersionsSupported.has(decoded.version)) return invalid
    isBech32 = true
  } catch {
    isBech32 = false
  }
  let output: Uint8Array
  try {
    output = bitcoin.address.toOutputScript(address, network)
  } catch {
    return invalid
  }
  if (!isStandardOutput(output, network)) return invalid
  // bech32 is case-insensitive (all-upper is legal, e.g. in QR codes), base58 is case-sensitive and kept as given.
  return valid(isBech32 ? address.toLowerCase() : address)
}

const parseSolanaPublicKey = (address: string): PublicKey | undefined => {
  try {
    const publicKey = new PublicKey(address)
    // base58 has one encoding per byte string; the round trip guards against any leniency in the decoder.
    return publicKey.toBase58() === address ? publicKey : undefined
  } catch {
    return undefined
  }
}

/**
 * SOL: any base58 string of exactly 32 bytes. Program ids, mints and token accounts are valid here on purpose: the
 * spec's validate endpoint does not judge what an address holds (4.1); estimate and withdrawal also apply
 * chains/sol/SolWalletAddress.ts.
 */
const validateSol = (address: string): AddressValidation =>
  parseSolanaPublicKey(address) === undefined ? invalid : valid(address)

/**
 * No address of a supported family is longer: 90 is bech32's own limit (BIP-173), base58 and hex forms are at most 44
 * characters. Checked before any decoding because the base58 and bech32 decoders take time quadratic in the length:
 * one 40,000-character string cost over two seconds of the event loop here (SOL and BTC), and a body may hold more.
 */
export const addressLengthMax = 90

export const validateAddress = (input: AddressValidationInput): AddressValidation => {
  if (input.address.length > addressLengthMax) return invalid
  switch (input.family) {
    case "EVM":
      return validateEvm(input.address)
    case "TRON":
      return validateTron(input.address)
    case "BTC":
      return validateBtc(input.address, requireBtcNetwork(input.btcNetwork))
    case "SOL":
      return validateSol(input.address)
  }
}

