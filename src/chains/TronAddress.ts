/**
 * TRON addresses: base58check (SHA-256 checksum) of the 21 bytes `0x41 ‖ the 20-byte account id`, the id being the
 * EVM-style keccak of the public key. Encoded and checked with @scure/base and @noble/hashes rather than tronweb:
 * importing tronweb costs about 250 ms of every start (measured here), and addresses are needed at start and on
 * every validation, while tronweb itself is only needed to build TRON transactions (signer/TronSigning.ts loads it
 * on first use). test/chains holds both to the same vectors as tronweb.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { createBase58check } from "@scure/base"

export { bytesToHex }

const base58check = createBase58check(sha256)
const tronVersionByte = 0x41
const tronAddressBytesLength = 21

/** `41` + 40 hex characters (lowercase) to the base58 `T…` form. */
export const tronAddressFromHex = (hex: string): string => {
  const bytes = hexToBytes(hex)
  if (bytes.length !== tronAddressBytesLength || bytes[0] !== tronVersionByte) {
    throw new RangeError(`not a TRON address in hex: ${hex}`)
  }
  return base58check.encode(bytes)
}

/** The 21 bytes of a base58 `T…` address, or undefined when its checksum, length or version byte is wrong. */
export const tronAddressBytes = (address: string): Uint8Array | undefined => {
  let bytes: Uint8Array
  try {
    bytes = base58check.decode(address)
  } catch {
    return undefined
  }
  if (bytes.length !== tronAddressBytesLength || bytes[0] !== tronVersionByte) return undefined
  // Base58 has one spelling per byte string; anything else (leading `1`s) would not re-encode to the input.
  return base58check.encode(bytes) === address ? bytes : undefined
}
