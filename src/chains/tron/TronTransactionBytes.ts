/**
 * A signed TRON transaction read back from its bytes (the protobuf `Transaction` that wallet/broadcasthex takes):
 * `raw_data` (field 1) and the signatures (field 2), and in `raw_data` the TAPoS fields, the expiration and the one
 * contract. Read with a few lines of protobuf wire format rather than tronweb's generated classes: the client needs
 * only the expiration (TronWithdrawals `expired`), and importing tronweb costs every start about 250 ms
 * (chains/TronAddress.ts). Field numbers are java-tron's protocol/Tron.proto.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"

export interface ProtoField {
  readonly field: number
  /** Wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32. */
  readonly wire: number
  readonly varint: bigint
  readonly bytes: Uint8Array
}

/** The fields of one protobuf message, in order; throws on anything malformed (truncated, unknown wire type). */
export const readProtoFields = (bytes: Uint8Array): Array<ProtoField> => {
  const fields: Array<ProtoField> = []
  let offset = 0
  const varint = (): bigint => {
    let value = 0n
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (offset >= bytes.length) throw new RangeError("truncated varint")
      const byte = bytes[offset++]!
      value |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return value
    }
    throw new RangeError("varint too long")
  }
  const take = (length: number) => {
    if (offset + length > bytes.length) throw new RangeError("truncated field")
    const value = bytes.slice(offset, offset + length)
    offset += length
    return value
  }
  while (offset < bytes.length) {
    const tag = varint()
    const field = Number(tag >> 3n)
    const wire = Number(tag & 7n)
    if (field === 0) throw new RangeError("field number 0")
    switch (wire) {
      case 0:
        fields.push({ field, wire, varint: varint(), bytes: new Uint8Array() })
        break
      case 1:
        fields.push({ field, wire, varint: 0n, bytes: take(8) })
        break
      case 2:
        fields.push({ field, wire, varint: 0n, bytes: take(Number(varint())) })
        break
      case 5:
        fields.push({ field, wire, varint: 0n, bytes: take(4) })
        break
      default:
        throw new RangeError(`unsupported wire type ${wire}`)
    }
  }
  return fields
}

const only = (fields: ReadonlyArray<ProtoField>, field: number, wire: number): ProtoField | undefined => {
  const found = fields.filter((candidate) => candidate.field === field)
  if (found.length > 1) throw new RangeError(`field ${field} repeated`)
  if (found[0] !== undefined && found[0].wire !== wire) throw new RangeError(`field ${field} has wire type ${found[0].wire}`)
  return found[0]
}

export const protoBytes = (fields: ReadonlyArray<ProtoField>, field: number): Uint8Array =>
  only(fields, field, 2)?.bytes ?? new Uint8Array()
export const protoVarint = (fields: ReadonlyArray<ProtoField>, field: number): bigint => only(fields, field, 0)?.varint ?? 0n

export interface TronTransactionBytes {
  /** sha256(raw_data), lowercase hex: the transaction's id. */
  readonly txId: string
  readonly rawData: Uint8Array
  readonly signatures: ReadonlyArray<Uint8Array>
  readonly refBlockBytes: Uint8Array
  readonly refBlockHash: Uint8Array
  /** Milliseconds since the epoch. */
  readonly expiration: bigint
  readonly timestamp: bigint
  readonly feeLimit: bigint
  readonly contracts: ReadonlyArray<{ readonly type: number; readonly typeUrl: string; readonly value: Uint8Array }>
}

/** Decodes the hex of a protobuf `Transaction`; throws when it is not one. */
export const decodeTronTransaction = (hex: string): TronTransactionBytes => {
  if (!/^([0-9a-fA-F]{2})+$/.test(hex)) throw new RangeError("not hex")
  const outer = readProtoFields(hexToBytes(hex.toLowerCase()))
  const rawData = protoBytes(outer, 1)
  const signatures = outer.filter((field) => field.field === 2 && field.wire === 2).map((field) => field.bytes)
  const raw = readProtoFields(rawData)
  const contracts = raw.filter((field) => field.field === 11 && field.wire === 2).map((field) => {
    const contract = readProtoFields(field.bytes)
    const parameter = readProtoFields(protoBytes(contract, 2))
    return {
      type: Number(protoVarint(contract, 1)),
      typeUrl: new TextDecoder("utf-8", { fatal: true }).decode(protoBytes(parameter, 1)),
      value: protoBytes(parameter, 2)
    }
  })
  return {
    txId: bytesToHex(sha256(rawData)),
    rawData,
    signatures,
    refBlockBytes: protoBytes(raw, 1),
    refBlockHash: protoBytes(raw, 4),
    expiration: protoVarint(raw, 8),
    timestamp: protoVarint(raw, 14),
    feeLimit: protoVarint(raw, 18),
    contracts
  }
}
