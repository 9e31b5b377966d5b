/**
 * A ChainClient for one BTC network over Bitcoin Core's JSON-RPC (docs/btc.md). Tested against Litecoin Core 0.21 in
 * regtest, a Bitcoin Core 0.21 fork that answers these calls in the same shapes (chains.md 5.3).
 *
 * - head: `getblockchaininfo` (height and hash from one answer). Bitcoin has no finality; the final height is the
 *   head minus `finalityDepthBlocks` (100, the depth at which Bitcoin itself lets a coinbase be spent, far beyond any
 *   reorganization seen on mainnet). The crediting rule is the catalog's confirmations, not this.
 * - block: `getblockhash` + `getblock <hash> 2`; one transfer per output (output index = `vout`) whose script is a
 *   standard address of the catalog's network. Outputs are matched by their script (`scriptPubKey.hex` decoded with
 *   bitcoinjs for the catalog's network), never by the node's address strings: Bitcoin Core 22+ writes `address`,
 *   0.21 and Litecoin `addresses`, and a regtest node spells the catalog's testnet addresses with its own prefix
 *   (`bcrt1`/`rltc1` for `tb1`). Coinbase outputs are not transfers (unspendable for 100 blocks: not a deposit).
 *   Amounts are satoshi read exactly from the answer's text (BtcRpc.ts).
 * - transactionState: `getrawtransaction <txid> true` (the node runs with `txindex=1`): confirmations > 0 is
 *   INCLUDED, known without a block (the mempool) PENDING, error -5 UNKNOWN.
 *
 * Every failure of the node is a `ChainUnavailable`; messages never carry the node's URL (it holds the RPC password).
 */
import * as bitcoin from "bitcoinjs-lib"
import { Effect, Redacted } from "effect"
import { bitcoinNetworks } from "../BitcoinNetwork.ts"
import type { BtcNetwork } from "../ChainFamily.ts"
import {
  type ChainBlock,
  type ChainClient,
  type ChainHead,
  type ChainTransfer,
  ChainUnavailable,
  type TransactionState
} from "../ChainClient.ts"
import type { BtcOutputBook } from "./BtcOutputBook.ts"
import { type BtcRpc, makeBtcRpc, type RpcError, rpcErrorsUnavailable, satoshis } from "./BtcRpc.ts"
import { makeBtcWithdrawals } from "./BtcWithdrawals.ts"

/** Blocks behind the head treated as final (see the module's comment). */
export const finalityDepthBlocksDefault = 100n

/** Bound on one `getblock <hash> 2` (see `block`). */
export const blockTimeoutMillis = 30_000

/** Bitcoin Core's "Block height out of range" (RPC_INVALID_PARAMETER) and "No such ... transaction". */
export const rpcInvalidParameter = -8
export const rpcInvalidAddressOrKey = -5

const hashPattern = /^[0-9a-f]{64}$/
const genesisParent = "0".repeat(64)

export interface BtcChainClientOptions {
  readonly networkKey: string
  readonly rpcUrl: Redacted.Redacted<string>
  /** The catalog's network: addresses are spelled, and outputs matched, for it. */
  readonly btcNetwork: BtcNetwork
  readonly nativeAssetId: string
  readonly finalityDepthBlocks?: bigint | undefined
  readonly rpcTimeoutMillis?: number | undefined
  /** Present when the client sends too (BtcWithdrawals.ts): the fee cap in sat/vB and where outputs are reserved. */
  readonly sending?: { readonly feeRateCap: bigint; readonly book: BtcOutputBook } | undefined
}

/** A BTC client, and the chain its node says it is on (`getblockchaininfo.chain`: main, test, testnet4, regtest...). */
export interface BtcChainClient extends ChainClient {
  readonly chain: Effect.Effect<string, ChainUnavailable>
}

interface RawOutput {
  readonly value?: unknown
  readonly n?: unknown
  readonly scriptPubKey?: { readonly hex?: unknown }
}

interface RawTransaction {
  readonly txid?: unknown
  readonly vin?: ReadonlyArray<{ readonly coinbase?: unknown; readonly txid?: unknown; readonly vout?: unknown }>
  readonly vout?: ReadonlyArray<RawOutput>
  readonly blockhash?: unknown
  readonly confirmations?: unknown
}

/** The address of an output script on `network`, or undefined (OP_RETURN, bare multisig, non-standard). */
export const scriptAddress = (scriptHex: string, network: bitcoin.Network): string | undefined => {
  try {
    return bitcoin.address.fromOutputScript(Buffer.from(scriptHex, "hex"), network)
  } catch {
    return undefined
  }
}

export const makeBtcChainClient = (options: BtcChainClientOptions): BtcChainClient => {
  const { networkKey, nativeAssetId } = options
  const network = bitcoinNetworks[options.btcNetwork]
  const finalityDepthBlocks = options.finalityDepthBlocks ?? finalityDepthBlocksDefault
  const rpc: BtcRpc = makeBtcRpc({ networkKey, url: Redacted.value(options.rpcUrl), timeoutMillis: options.rpcTimeoutMillis })
  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })
  const nodeError = rpcErrorsUnavailable(networkKey)

  /** A call whose node errors are all "unavailable". */
  const call = (method: string, params: ReadonlyArray<unknown>, timeoutMillis?: number) =>
    rpc.call(method, params, { timeoutMillis }).pipe(Effect.catchTag("RpcError", nodeError))

  /** A call where the node's error `code` means "no such thing": undefined. */
  const callOrMissing = (method: string, params: ReadonlyArray<unknown>, code: number) =>
    rpc.call(method, params).pipe(
      Effect.catchTag("RpcError", (error: RpcError) => (error.code === code ? Effect.succeed(undefined) : nodeError(error)))
    )

  const blockchainInfo = Effect.flatMap(call("getblockchaininfo", []), (info) => {
    const { bestblockhash, blocks, chain } = (info ?? {}) as { blocks?: unknown; bestblockhash?: unknown; chain?: unknown }
    if (typeof blocks !== "number" || typeof bestblockhash !== "string" || !hashPattern.test(bestblockhash) || typeof chain !== "string") {
      return Effect.fail(unavailable("getblockchaininfo: malformed answer"))
    }
    return Effect.succeed({ height: BigInt(blocks), hash: bestblockhash, chain })
  })

  const head: Effect.Effect<ChainHead, ChainUnavailable> = Effect.map(blockchainInfo, ({ hash, height }) => ({
    height,
    hash,
    finalizedHeight: height > finalityDepthBlocks ? height - finalityDepthBlocks : 0n
  }))

  /** The transfers of one transaction (see the module's comment); undefined when the answer is malformed. */
  const transfersOf = (tx: RawTransaction): Array<ChainTransfer> | undefined => {
    if (typeof tx.txid !== "string" || !hashPattern.test(tx.txid) || !Array.isArray(tx.vin) || !Array.isArray(tx.vout)) return undefined
    if (tx.vin.some((input) => input.coinbase !== undefined)) return []
    const transfers: Array<ChainTransfer> = []
    for (const output of tx.vout) {
      const hex = output.scriptPubKey?.hex
      const amount = satoshis(output.value)
      if (typeof output.n !== "number" || typeof hex !== "string" || amount === undefined) return undefined
      if (amount === 0n) continue
      const to = scriptAddress(hex, network)
      if (to === undefined) continue
      transfers.push({ txHash: tx.txid, outputIndex: output.n, from: null, to, assetId: nativeAssetId, amount })
    }
    return transfers
  }

  const block = (height: bigint): Effect.Effect<ChainBlock | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      if (height < 0n) return undefined
      const hash = yield* callOrMissing("getblockhash", [Number(height)], rpcInvalidParameter)
      if (hash === undefined) return undefined
      if (typeof hash !== "string" || !hashPattern.test(hash)) return yield* unavailable(`getblockhash(${height}): malformed hash`)
      // A full mainnet block with every transaction is several megabytes of JSON: more time than other calls.
      const read = (yield* call("getblock", [hash, 2], blockTimeoutMillis)) as {
        hash?: unknown
        height?: unknown
        confirmations?: unknown
        previousblockhash?: unknown
        tx?: ReadonlyArray<RawTransaction>
      } | null
      if (read === null || read.hash !== hash || read.height !== Number(height) || !Array.isArray(read.tx)) {
        return yield* unavailable(`getblock(${height}): malformed answer`)
      }
      // Replaced between the two calls (a reorganization): the node still serves the old block by its hash, with
      // confirmations -1. The caller reads the height again.
      if (typeof read.confirmations !== "number" || read.confirmations < 1) {
        return yield* unavailable(`block ${height} left the chain while it was read`)
      }
      const parentHash = read.previousblockhash ?? (height === 0n ? genesisParent : undefined)
      if (typeof parentHash !== "string" || !hashPattern.test(parentHash)) {
        return yield* unavailable(`getblock(${height}): malformed parent hash`)
      }
      const transfers: Array<ChainTransfer> = []
      for (const tx of read.tx) {
        const found = transfersOf(tx)
        if (found === undefined) return yield* unavailable(`getblock(${height}): malformed transaction`)
        transfers.push(...found)
      }
      return { height, hash, parentHash, transfers }
    })

  /** The transaction as the node knows it (txindex and mempool), or undefined. */
  const rawTransaction = (txid: string) =>
    Effect.gen(function*() {
      if (!hashPattern.test(txid)) return undefined
      const tx = yield* callOrMissing("getrawtransaction", [txid, true], rpcInvalidAddressOrKey)
      return tx === undefined ? undefined : tx as RawTransaction
    })

  const transactionState = (txHash: string): Effect.Effect<TransactionState, ChainUnavailable> =>
    Effect.map(rawTransaction(txHash), (tx) => {
      if (tx === undefined) return "UNKNOWN"
      if (typeof tx.confirmations === "number" && tx.confirmations > 0) return "INCLUDED"
      // A block hash without confirmations: in a block that left the chain and not back in the mempool (the node
      // looks in its mempool first), so dropped.
      return tx.blockhash === undefined ? "PENDING" : "UNKNOWN"
    })

  const withdrawals = options.sending === undefined ? undefined : makeBtcWithdrawals(
    { call: (method, params) => call(method, params), rpc, unavailable, rawTransaction },
    {
      networkKey,
      network,
      nativeAssetId,
      feeRateCap: options.sending.feeRateCap,
      book: options.sending.book
    }
  )

  return {
    networkKey,
    // A real network's history holds no deposits to addresses not yet handed out: start from the head.
    startFromGenesis: false,
    head,
    block,
    transactionState,
    withdrawals,
    chain: Effect.map(blockchainInfo, (info) => info.chain)
  }
}
