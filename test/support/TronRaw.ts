/**
 * Reading a signed TRON transaction back without the tronweb code that wrote it, for tests that check the signer
 * independently: the protobuf `Transaction` (field 1 raw_data, field 2 repeated signature, both length-delimited) read
 * by hand, and the address recovered from a 65-byte signature (r, s, v = 27/28) over sha256(raw_data).
 */
import { assert } from "@effect/vitest"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { TronWeb } from "tronweb"
import { keccak256 } from "viem"

export const decodeTronRaw = (raw: string) => {
  const bytes = hexToBytes(raw)
  const fields: Array<[number, Uint8Array]> = []
  let offset = 0
  const varint = () => {
    let value = 0
    for (let shift = 0; ; shift += 7) {
      const byte = bytes[offset++]!
      value += (byte & 0x7f) * 2 ** shift
      if ((byte & 0x80) === 0) return value
    }
  }
  while (offset < bytes.length) {
    const tag = varint()
    assert.strictEqual(tag & 7, 2, "every Transaction field here is length-delimited")
    const length = varint()
    fields.push([tag >> 3, bytes.slice(offset, offset + length)])
    offset += length
  }
  assert.strictEqual(offset, bytes.length)
  const rawData = fields.filter(([field]) => field === 1).map(([, value]) => value)
  assert.lengthOf(rawData, 1)
  return { rawData: rawData[0]!, signatures: fields.filter(([field]) => field === 2).map(([, value]) => value) }
}

export const recoverTronAddress = (signature: Uint8Array, hash: Uint8Array): string => {
  const publicKey = secp256k1.Signature.fromBytes(signature.slice(0, 64), "compact")
    .addRecoveryBit(signature[64]! - 27)
    .recoverPublicKey(hash)
    .toBytes(false)
  const evm = bytesToHex(hexToBytes(keccak256(publicKey.slice(1)).slice(2)).slice(-20))
  return TronWeb.address.fromHex(`41${evm}`)
}
