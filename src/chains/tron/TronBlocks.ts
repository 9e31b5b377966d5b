/**
 * Reading java-tron's JSON (visible=false: addresses as `41…` hex): blocks, their transactions' one contract and
 * result, and addresses to and from the normalized base58 form.
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect } from "effect"
import type { ChainUnavailable } from "../ChainClient.ts"
import { tronAddressBytes, tronAddressFromHex } from "../TronAddress.ts"
import type { TronHttp, TronJson } from "./TronHttp.ts"

/** keccak256("Transfer(address,address,uint256)"). */
export const transferTopic = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

const blockIdPattern = /^[0-9a-f]{64}$/
export const txIdPattern = /^[0-9a-f]{64}$/

export const isObject = (value: unknown): value is TronJson =>
  typeof value === "object" && value !== null && !Array.isArray(value)
export const asArray = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
/** proto3 JSON leaves out zero: an absent integer field is 0. */
export const asInt = (value: unknown): bigint | undefined => (value === undefined ? 0n : typeof value === "bigint" ? value : undefined)

/** A block as the client uses it. */
export interface TronBlockRead {
  readonly number: bigint
  readonly blockID: string
  readonly parentHash: string
  /** Milliseconds since the epoch. */
  readonly timestamp: bigint
  readonly transactions: ReadonlyArray<TronJson>
}

/** An address as java-tron prints it (`41…` hex, visible=false) in the normalized base58 form. */
export const base58Of = (hex: unknown): string | undefined => {
  if (typeof hex !== "string" || !/^41[0-9a-fA-F]{40}$/.test(hex)) return undefined
  return tronAddressFromHex(hex.toLowerCase())
}

/** The `41…` hex of a base58 address (what requests with visible=false name). */
export const hexOfAddress = (address: string): string | undefined => {
  const bytes = tronAddressBytes(address)
  return bytes === undefined ? undefined : bytesToHex(bytes)
}

/** Reads a block answer: undefined for `{}` (no such block), ChainUnavailable when it is malformed. */
export const readBlock = (http: TronHttp, what: string, json: unknown): Effect.Effect<TronBlockRead | undefined, ChainUnavailable> => {
  if (!isObject(json)) return Effect.fail(http.unavailable(`${what}: not a block`))
  if (json.blockID === undefined && json.block_header === undefined) return Effect.succeed(undefined)
  const header = isObject(json.block_header) && isObject(json.block_header.raw_data) ? json.block_header.raw_data : undefined
  const number = asInt(header?.number)
  const timestamp = asInt(header?.timestamp)
  const { blockID } = json
  const parentHash = header?.parentHash
  if (
    header === undefined || number === undefined || timestamp === undefined || typeof blockID !== "string" ||
    !blockIdPattern.test(blockID) || typeof parentHash !== "string" || !blockIdPattern.test(parentHash)
  ) {
    return Effect.fail(http.unavailable(`${what}: malformed block`))
  }
  // A blockID begins with the block's number (8 bytes): a cheap check that the id and header belong together.
  if (BigInt(`0x${blockID.slice(0, 16)}`) !== number) return Effect.fail(http.unavailable(`${what}: blockID does not carry its number`))
  if (json.transactions !== undefined && !Array.isArray(json.transactions)) return Effect.fail(http.unavailable(`${what}: malformed transactions`))
  const transactions = asArray(json.transactions)
  if (!transactions.every(isObject)) return Effect.fail(http.unavailable(`${what}: malformed transaction`))
  return Effect.succeed({ number, blockID, parentHash, timestamp, transactions: transactions as ReadonlyArray<TronJson> })
}

/** The one contract of a transaction in a block, with its type and parameter value; undefined when malformed. */
export const contractOf = (tx: TronJson): { readonly type: string; readonly value: TronJson } | undefined => {
  const raw = tx.raw_data
  if (!isObject(raw)) return undefined
  const contracts = asArray(raw.contract)
  const contract = contracts[0]
  if (contracts.length !== 1 || !isObject(contract) || typeof contract.type !== "string") return undefined
  const parameter = contract.parameter
  if (!isObject(parameter) || !isObject(parameter.value)) return undefined
  return { type: contract.type, value: parameter.value }
}

export const contractRetOf = (tx: TronJson): string | undefined => {
  const ret = asArray(tx.ret)[0]
  return isObject(ret) && typeof ret.contractRet === "string" ? ret.contractRet : undefined
}

