/**
 * A ChainClient for one TRON network over a java-tron full node's HTTP API (docs/tron.md). Per block at most two
 * calls:
 *
 * - `wallet/getblockbynum`: TRX transfers are its `TransferContract` transactions whose `ret[0].contractRet` is
 *   SUCCESS (output index 0: one contract per transaction);
 * - `wallet/gettransactioninfobyblocknum`, only when the block has a `TriggerSmartContract` transaction: TRC-20
 *   transfers are the `Transfer` logs of the catalog's token contracts in transactions that succeeded (output index
 *   = the log's position in its transaction's `log` list). Logs rather than decoding `transfer(...)` call data: they
 *   also show `transferFrom` and transfers a contract makes, and a TRON transaction that failed keeps no logs. The
 *   infos must be those of the block read first (same height, the same transaction ids): a block replaced between
 *   the two calls is ChainUnavailable, read again on the next scan.
 *
 * The head is `wallet/getnowblock`; the final height is `walletsolidity/getnowblock` (the solidified block, which
 * never changes). Addresses are base58 `T…` (chains/AddressValidation's normalized TRON form), transaction ids
 * lowercase hex. Every failure is a ChainUnavailable without the node's URL (TronHttp.ts).
 */
import { Effect, type Redacted } from "effect"
import type { ChainBlock, ChainClient, ChainHead, ChainTransfer, ChainUnavailable, TransactionState } from "../ChainClient.ts"
import {
  asArray,
  asInt,
  base58Of,
  contractOf,
  contractRetOf,
  hexOfAddress,
  isObject,
  readBlock,
  transferTopic,
  type TronBlockRead,
  txIdPattern
} from "./TronBlocks.ts"
import { makeTronHttp, type TronJson } from "./TronHttp.ts"
import { makeTronWithdrawals, type TronWithdrawalChain } from "./TronWithdrawals.ts"

export interface TronToken {
  readonly assetId: string
  /** The TRC-20 contract, base58. */
  readonly contract: string
}

export interface TronChainClientOptions {
  readonly networkKey: string
  readonly rpcUrl: Redacted.Redacted<string>
  readonly nativeAssetId: string
  readonly tokens: ReadonlyArray<TronToken>
  readonly timeoutMillis?: number | undefined
  /** Present when the client sends too: the catalog's fee cap (the most sun a TRC-20 call may burn, its fee_limit). */
  readonly sending?: { readonly feeRateCap: bigint } | undefined
}

/** A TRON client, and block 0's id (the chain's identity: decisions.md "Sending on real networks"). */
export interface TronChainClient extends ChainClient {
  readonly genesisBlockId: Effect.Effect<string, ChainUnavailable>
  readonly withdrawals: TronWithdrawalChain | undefined
}

export const makeTronChainClient = (options: TronChainClientOptions): TronChainClient => {
  const { nativeAssetId, networkKey } = options
  const http = makeTronHttp({ networkKey, rpcUrl: options.rpcUrl, timeoutMillis: options.timeoutMillis })
  const { post, unavailable } = http
  /** Catalog token contracts by the 20-byte hex a log names them with. */
  const assetOfLogAddress = new Map<string, string>()
  for (const token of options.tokens) {
    const hex = hexOfAddress(token.contract)
    if (hex !== undefined) assetOfLogAddress.set(hex.slice(2), token.assetId)
  }

  const nowBlock = (path: "/wallet/getnowblock" | "/walletsolidity/getnowblock") =>
    Effect.flatMap(post(path), (json) => readBlock(http, path, json)).pipe(
      Effect.flatMap((block) => (block === undefined ? Effect.fail(unavailable(`${path}: no block`)) : Effect.succeed(block)))
    )

  const blockByNumber = (height: bigint) =>
    Effect.flatMap(post("/wallet/getblockbynum", { num: Number(height) }), (json) => readBlock(http, `block ${height}`, json))

  const head: Effect.Effect<ChainHead, ChainUnavailable> = Effect.gen(function*() {
    const latest = yield* nowBlock("/wallet/getnowblock")
    const solid = yield* nowBlock("/walletsolidity/getnowblock")
    // Two calls, two moments: the solidified block may have moved past the head read first.
    return { height: latest.number, hash: latest.blockID, finalizedHeight: solid.number > latest.number ? latest.number : solid.number }
  })

  const tokenTransfers = (read: TronBlockRead) =>
    Effect.gen(function*() {
      const triggers = read.transactions.filter((tx) => contractOf(tx)?.type === "TriggerSmartContract")
      if (triggers.length === 0 || assetOfLogAddress.size === 0) return []
      const answer = yield* post("/wallet/gettransactioninfobyblocknum", { num: Number(read.number) })
      // An empty list may be printed as `{}`.
      const infos = isObject(answer) && Object.keys(answer).length === 0 ? [] : answer
      if (!Array.isArray(infos) || !infos.every(isObject)) return yield* unavailable(`transaction infos of block ${read.number}: malformed`)
      const ids = new Set(read.transactions.map((tx) => tx.txID))
      if (infos.length !== ids.size || !infos.every((info) => ids.has(info.id) && asInt(info.blockNumber) === read.number)) {
        return yield* unavailable(`transaction infos of block ${read.number} are of another block`)
      }
      const transfers: Array<ChainTransfer> = []
      for (const info of infos as ReadonlyArray<TronJson>) {
        const receipt = isObject(info.receipt) ? info.receipt : {}
        if (info.result === "FAILED" || (receipt.result !== undefined && receipt.result !== "SUCCESS")) continue
        for (const [index, log] of asArray(info.log).entries()) {
          if (!isObject(log) || typeof log.address !== "string") continue
          // Logs name the contract without the 41 prefix; accept it with one too.
          const address = log.address.toLowerCase().replace(/^41(?=[0-9a-f]{40}$)/, "")
          const assetId = assetOfLogAddress.get(address)
          if (assetId === undefined) continue
          const topics = asArray(log.topics)
          if (topics.length !== 3 || topics[0] !== transferTopic || typeof log.data !== "string") continue
          if (!topics.every((topic) => typeof topic === "string" && /^[0-9a-f]{64}$/.test(topic)) || !/^[0-9a-f]{64}$/.test(log.data)) {
            return yield* unavailable(`block ${read.number}: malformed Transfer log`)
          }
          const from = base58Of(`41${(topics[1] as string).slice(24)}`)
          const to = base58Of(`41${(topics[2] as string).slice(24)}`)
          if (to === undefined) continue
          transfers.push({ txHash: info.id as string, outputIndex: index, from: from ?? null, to, assetId, amount: BigInt(`0x${log.data}`) })
        }
      }
      return transfers
    })

  const block = (height: bigint): Effect.Effect<ChainBlock | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      if (height < 0n) return undefined
      const read = yield* blockByNumber(height)
      if (read === undefined) return undefined
      if (read.number !== height) return yield* unavailable(`asked for block ${height}, got ${read.number}`)
      const native: Array<ChainTransfer> = []
      for (const tx of read.transactions) {
        if (typeof tx.txID !== "string" || !txIdPattern.test(tx.txID)) return yield* unavailable(`block ${height}: malformed txID`)
        const contract = contractOf(tx)
        if (contract === undefined) return yield* unavailable(`block ${height}: malformed transaction ${tx.txID}`)
        if (contract.type !== "TransferContract" || contractRetOf(tx) !== "SUCCESS") continue
        const to = base58Of(contract.value.to_address)
        const amount = asInt(contract.value.amount)
        if (to === undefined || amount === undefined) return yield* unavailable(`block ${height}: malformed transfer ${tx.txID}`)
        if (amount <= 0n) continue
        native.push({ txHash: tx.txID, outputIndex: 0, from: base58Of(contract.value.owner_address) ?? null, to, assetId: nativeAssetId, amount })
      }
      const tokens = yield* tokenTransfers(read)
      return { height, hash: read.blockID, parentHash: read.parentHash, transfers: [...native, ...tokens] }
    })

  /** The transaction's info and block when it is in the current chain (the info's block holds it now). */
  const includedAt = (txHash: string) =>
    Effect.gen(function*() {
      if (!txIdPattern.test(txHash)) return undefined
      const info = yield* post("/wallet/gettransactioninfobyid", { value: txHash })
      if (!isObject(info)) return yield* unavailable("gettransactioninfobyid: malformed answer")
      if (info.id === undefined) return undefined
      const height = asInt(info.blockNumber)
      if (info.id !== txHash || height === undefined) return yield* unavailable("gettransactioninfobyid: malformed answer")
      const read = yield* blockByNumber(height)
      const tx = read?.transactions.find((candidate) => candidate.txID === txHash)
      if (read === undefined || tx === undefined) return undefined
      return { info, block: read, tx }
    })

  const transactionState = (txHash: string): Effect.Effect<TransactionState, ChainUnavailable> =>
    Effect.gen(function*() {
      if (!txIdPattern.test(txHash)) return "UNKNOWN"
      if ((yield* includedAt(txHash)) !== undefined) return "INCLUDED"
      // java-tron 4.4 and later; an older node (404) cannot say, and the pipeline then gives the bytes again (harmless).
      const pending = yield* http.postOptional("/wallet/gettransactionfrompending", { value: txHash })
      if (isObject(pending) && pending.txID === txHash) return "PENDING"
      // Put in a block between the two calls.
      return (yield* includedAt(txHash)) !== undefined ? "INCLUDED" : "UNKNOWN"
    })

  const genesisBlockId = Effect.flatMap(blockByNumber(0n), (read) =>
    read === undefined ? Effect.fail(unavailable("the node has no block 0")) : Effect.succeed(read.blockID))

  const withdrawals = options.sending === undefined ? undefined : makeTronWithdrawals(http, {
    networkKey,
    nativeAssetId,
    feeRateCap: options.sending.feeRateCap,
    tokenContracts: new Map(options.tokens.map((token) => [token.assetId, token.contract])),
    nowBlock: nowBlock("/wallet/getnowblock"),
    solidifiedBlock: nowBlock("/walletsolidity/getnowblock"),
    includedAt
  })

  return {
    networkKey,
    // A real network's history holds no deposits to addresses not yet handed out: start from the head.
    startFromGenesis: false,
    head,
    block,
    transactionState,
    withdrawals,
    genesisBlockId
  }
}
