/**
 * A ChainClient for one EVM network over a JSON-RPC node (docs/deposits.md, "EVM over JSON-RPC"), on viem's public
 * client over HTTP. Per block it makes at most three calls, each bounded by a timeout:
 *
 * - `eth_getBlockByNumber` with transactions: native-coin transfers are the transactions with a `to` and a value
 *   (output index 0); contract-internal transfers are not transactions and are not seen (they need traces);
 * - `eth_getBlockReceipts` by block hash, only when the block has such a transaction: a transaction that reverted
 *   moved no coin, so only those whose receipt says `success` are transfers. One call per block rather than one per
 *   transaction: the client does not know which recipients are deposit addresses (the watcher filters), so on a busy
 *   network every value-bearing transaction is a candidate;
 * - `eth_getLogs` by block hash for `Transfer` events of the catalog's token contracts on this network (output index
 *   = the log's index in the block). Logs exist only for successful transactions.
 *
 * Reading receipts and logs by the block's hash (EIP-234) pins them to the block read first: if the chain moves
 * between the calls, the node answers for that block or not at all, never for its replacement at the same height.
 *
 * Every failure of the node (unreachable, timeout, an error answer, a malformed one) is a `ChainUnavailable`, so the
 * watcher logs it and retries on its next scan. Messages never carry the node's URL: it may hold an API key.
 */
import { Effect, Redacted } from "effect"
import {
  BlockNotFoundError,
  createPublicClient,
  erc20Abi,
  http,
  type PublicClient,
  RpcError,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError
} from "viem"
import { makeEvmWithdrawals } from "./EvmWithdrawals.ts"
import { makeNodeCall, scrubNodeUrl } from "../NodeCall.ts"
import { makeNodeHttpFetch } from "../NodeHttpFetch.ts"
import { splitCredentials } from "../NodeUrl.ts"
import { type ChainBlock, type ChainClient, type ChainHead, type ChainTransfer, ChainUnavailable, type TransactionState } from "../ChainClient.ts"

/** Bound on one JSON-RPC call (the node's HTTP request, viem's own timeout, and the Effect around it). */
export const rpcTimeoutMillisDefault = 10_000
/** The largest JSON-RPC answer read (viem's own default): a block with its transactions fits many times over. */
export const rpcResponseBytesMax = 10_485_760
/**
 * Blocks behind the head treated as final when the node does not know the `finalized` tag: two epochs of Ethereum
 * proof of stake (64 slots), after which a block is finalized in normal operation.
 */
export const finalityDepthBlocksDefault = 64n

export interface EvmToken {
  readonly assetId: string
  /** The token contract, any case. */
  readonly contract: string
}

export interface EvmChainClientOptions {
  readonly networkKey: string
  readonly rpcUrl: Redacted.Redacted<string>
  readonly nativeAssetId: string
  /** The catalog's ERC-20 tokens on this network: only their `Transfer` logs are read. */
  readonly tokens: ReadonlyArray<EvmToken>
  readonly finalityDepthBlocks?: bigint | undefined
  readonly rpcTimeoutMillis?: number | undefined
  /** Present when the client sends too (EvmWithdrawals.ts): the chain id signed for and the fee cap. */
  readonly sending?: { readonly chainId: number; readonly feeRateCap: bigint } | undefined
}

const hashPattern = /^0x[0-9a-f]{64}$/

/** An EVM client, and the chain id its node reports (decisions.md, "Sending on real networks": checked at start). */
export interface EvmChainClient extends ChainClient {
  readonly chainId: Effect.Effect<number, ChainUnavailable>
}

export const makeEvmChainClient = (options: EvmChainClientOptions): EvmChainClient => {
  const { networkKey, nativeAssetId } = options
  const timeoutMillis = options.rpcTimeoutMillis ?? rpcTimeoutMillisDefault
  const finalityDepthBlocks = options.finalityDepthBlocks ?? finalityDepthBlocksDefault
  const url = Redacted.value(options.rpcUrl)
  const { authorization, transportUrl } = splitCredentials(url)
  const client = createPublicClient({
    transport: http(transportUrl, {
      ...(authorization === undefined ? {} : { fetchOptions: { headers: { authorization } } }),
      // node:http over kept-alive connections instead of the global fetch: a third of the CPU per call (NodeHttpFetch.ts).
      fetchFn: makeNodeHttpFetch({ maxResponseBytes: rpcResponseBytesMax }) as unknown as typeof fetch,
      maxResponseBodySize: rpcResponseBytesMax,
      timeout: timeoutMillis,
      // The watcher retries on its next scan; retrying here too would multiply the time one call can take.
      retryCount: 0
    }),
    // viem caches block numbers for the polling interval by default: a scan right after a block would see the old
    // head (chains.md, section 6).
    cacheTime: 0
  })
  const assetOfContract = new Map(options.tokens.map((token) => [token.contract.toLowerCase(), token.assetId]))
  const contracts = options.tokens.map((token) => token.contract.toLowerCase() as `0x${string}`)

  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })

  /** The node's answer as a message fit for logs: viem's messages name the URL, which may carry an API key. */
  const describe = (error: unknown): string => {
    // viem's shortMessage is its own category ("Transaction creation failed."); the node's words ("already known",
    // "nonce too low") are in `details`, and the broadcast sorts answers by them.
    const details = error instanceof Error && "details" in error && typeof error.details === "string" ? ` (${error.details})` : ""
    const text = error instanceof Error
      ? `${error.name}: ${"shortMessage" in error && typeof error.shortMessage === "string" ? error.shortMessage : error.message}${details}`
      : String(error)
    return scrubNodeUrl(text, url, transportUrl)
  }

  /** One JSON-RPC call (NodeCall.ts). */
  const call = makeNodeCall({ networkKey, timeoutMillis, describe })

  const checkHash = (what: string, hash: string | null | undefined) =>
    typeof hash === "string" && hashPattern.test(hash)
      ? Effect.succeed(hash)
      : Effect.fail(unavailable(`${what}: malformed hash`))

  /**
   * The `finalized` block when the node knows the tag; a node that answers with an error (an older client, a chain
   * without finality) gets the head minus `finalityDepthBlocks`. A transport failure is not an answer: unavailable.
   */
  const finalizedHeight = (height: bigint) =>
    call(
      "eth_getBlockByNumber(finalized)",
      () => client.getBlock({ blockTag: "finalized" }).then((block) => block.number),
      (error) => (error instanceof RpcError || error instanceof BlockNotFoundError ? { value: null } : undefined)
    ).pipe(Effect.map((finalized) => {
      const fallback = height > finalityDepthBlocks ? height - finalityDepthBlocks : 0n
      if (finalized === null) return fallback
      // Two calls, two moments: the head may have been read before a finalization that moved past it.
      return finalized > height ? height : finalized
    }))

  const head: Effect.Effect<ChainHead, ChainUnavailable> = Effect.gen(function*() {
    const latest = yield* call("eth_getBlockByNumber(latest)", () => client.getBlock({ blockTag: "latest" }))
    const hash = yield* checkHash("latest block", latest.hash)
    if (latest.number === null) return yield* unavailable("latest block has no number")
    return { height: latest.number, hash, finalizedHeight: yield* finalizedHeight(latest.number) }
  })

  const block = (height: bigint): Effect.Effect<ChainBlock | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      const read = yield* call(
        `eth_getBlockByNumber(${height})`,
        () => client.getBlock({ blockNumber: height, includeTransactions: true }),
        // Above the head the node answers null, which viem reports as not found.
        (error) => (error instanceof BlockNotFoundError ? { value: undefined } : undefined)
      )
      if (read === undefined) return undefined
      const hash = yield* checkHash(`block ${height}`, read.hash)
      const parentHash = yield* checkHash(`block ${height} parent`, read.parentHash)
      if (read.number !== height) return yield* unavailable(`asked for block ${height}, got ${read.number}`)

      const candidates = read.transactions.filter((tx) => tx.to != null && tx.value > 0n)
      const succeeded = new Set<string>()
      if (candidates.length > 0) {
        const receipts = yield* call(
          `eth_getBlockReceipts(${height})`,
          () => client.getBlockReceipts({ blockHash: hash as `0x${string}` })
        )
        for (const receipt of receipts) {
          if (receipt.blockHash !== hash) return yield* unavailable(`receipts of block ${height} are of another block`)
          if (receipt.status === "success") succeeded.add(receipt.transactionHash.toLowerCase())
        }
      }
      const native: Array<ChainTransfer> = candidates
        .filter((tx) => succeeded.has(tx.hash.toLowerCase()))
        .map((tx) => ({
          txHash: tx.hash.toLowerCase(),
          // One value per transaction: its only "output".
          outputIndex: 0,
          from: tx.from.toLowerCase(),
          to: tx.to!.toLowerCase(),
          assetId: nativeAssetId,
          amount: tx.value
        }))

      const tokens: Array<ChainTransfer> = []
      if (contracts.length > 0) {
        const logs = yield* call(
          `eth_getLogs(${height})`,
          () =>
            client.getLogs({
              address: contracts,
              event: erc20Abi.find((item) => item.type === "event" && item.name === "Transfer")!,
              blockHash: hash as `0x${string}`,
              // A log of a catalog contract that does not decode as an ERC-20 Transfer is not one of its transfers.
              strict: true
            })
        )
        for (const log of logs) {
          if (log.removed) continue
          if (log.blockHash !== hash || log.logIndex === null || log.transactionHash === null) {
            return yield* unavailable(`logs of block ${height} are of another block or incomplete`)
          }
          const assetId = assetOfContract.get(log.address.toLowerCase())
          if (assetId === undefined) continue
          tokens.push({
            txHash: log.transactionHash.toLowerCase(),
            outputIndex: log.logIndex,
            from: log.args.from.toLowerCase(),
            to: log.args.to.toLowerCase(),
            assetId,
            amount: log.args.value
          })
        }
      }
      return { height, hash, parentHash, transfers: [...native, ...tokens] }
    })

  const transactionState = (txHash: string): Effect.Effect<TransactionState, ChainUnavailable> =>
    Effect.gen(function*() {
      const hash = txHash as `0x${string}`
      const receipt = yield* call(
        "eth_getTransactionReceipt",
        () => client.getTransactionReceipt({ hash }),
        (error) => (error instanceof TransactionReceiptNotFoundError ? { value: undefined } : undefined)
      )
      // Reverted or not, a transaction with a receipt is in a block.
      if (receipt !== undefined) return "INCLUDED"
      const transaction = yield* call(
        "eth_getTransactionByHash",
        () => client.getTransaction({ hash }),
        (error) => (error instanceof TransactionNotFoundError ? { value: undefined } : undefined)
      )
      if (transaction === undefined) return "UNKNOWN"
      // Mined between the two calls: its receipt exists now.
      return transaction.blockNumber === null ? "PENDING" : "INCLUDED"
    })

  const withdrawals = options.sending === undefined ? undefined : makeEvmWithdrawals(
    { client: client as unknown as PublicClient, call, describe },
    {
      networkKey,
      nativeAssetId,
      chainId: options.sending.chainId,
      feeRateCap: options.sending.feeRateCap,
      tokenContracts: new Map(options.tokens.map((token) => [token.assetId, token.contract.toLowerCase()]))
    }
  )

  return {
    networkKey,
    withdrawals,
    // A real network's history holds no deposits to addresses not yet handed out: start from the head.
    startFromGenesis: false,
    head,
    block,
    transactionState,
    chainId: call("eth_chainId", () => client.getChainId())
  }
}
