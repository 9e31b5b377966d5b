/**
 * A ChainClient for one Solana network over JSON-RPC, on @solana/web3.js 1.x `Connection` (docs/sol.md).
 *
 * Heights are Solana block heights, not slots: slots without a block (skipped by their leader, or left by a fork)
 * would break the contract that block(h) links to block(h - 1). A height is found at its slot through
 * `getBlocks` (see `slotOfHeight`), and every block read is checked to carry the height asked for.
 *
 * The head and blocks are read at commitment `confirmed` (getBlock does not serve `processed`); the final height is
 * the `finalized` block height, which is what SOL networks credit at (catalog `confirmations: finalized`).
 *
 * Transfers of a block (only transactions whose `meta.err` is null: a failed transaction moved nothing but its fee):
 * - SOL: every account whose balance grew (`postBalances[i] > preBalances[i]`), except token accounts (their
 *   lamports are rent, not a payment to a wallet). Balance changes catch transfers made inside programs too, which a
 *   reading of top-level System instructions would miss. `outputIndex` = the account's index in the transaction.
 * - SPL: every token account of a catalog mint whose amount grew (`postTokenBalances` against `preTokenBalances`),
 *   credited to the account's `owner`: a deposit lands in the wallet's associated token account, and the wallet is
 *   the address the service handed out. `outputIndex` = the token account's index (never a SOL transfer's index,
 *   since token accounts are left out of those).
 * - `from` is the fee payer (the first account), the sender of a plain transfer.
 *
 * Every failure of the node is a `ChainUnavailable`, never with the URL in the message (it may hold an API key).
 */
import { Connection, type VersionedBlockResponse, type VersionedNoneModeBlockResponse } from "@solana/web3.js"
import { Effect, Redacted } from "effect"
import { makeNodeCall, type NodeCall, scrubNodeUrl } from "../NodeCall.ts"
import { makeNodeHttpFetch } from "../NodeHttpFetch.ts"
import { splitCredentials } from "../NodeUrl.ts"
import { type ChainBlock, type ChainClient, type ChainHead, type ChainTransfer, ChainUnavailable, type TransactionState } from "../ChainClient.ts"
import { makeSolWithdrawals } from "./SolWithdrawals.ts"

/** Bound on one JSON-RPC call. */
export const rpcTimeoutMillisDefault = 10_000
/** Slots asked of `getBlocks` at once when looking for a height (the RPC allows 500,000). */
const slotWindow = 2_000

export interface SolToken {
  readonly assetId: string
  readonly mint: string
  /** The token program of the mint (catalog `tokenProgram`; classic Token when absent). */
  readonly programId?: string | undefined
}

export interface SolChainClientOptions {
  readonly networkKey: string
  readonly rpcUrl: Redacted.Redacted<string>
  readonly nativeAssetId: string
  readonly tokens: ReadonlyArray<SolToken>
  /** The most a transaction may cost in lamports (catalog `feeRateCap`). */
  readonly feeRateCap: bigint
  readonly rpcTimeoutMillis?: number | undefined
}

export interface SolChainClient extends ChainClient {
  /** The node's genesis hash: which cluster it is on (checked at start against the catalog's). */
  readonly genesisHash: Effect.Effect<string, ChainUnavailable>
}

/** One JSON-RPC call through web3.js (NodeCall.ts). */
export type SolCall = NodeCall

/** The JSON-RPC error code of an answer the node gave (web3.js puts it on the thrown error), if it was one. */
export const rpcCode = (error: unknown): number | undefined =>
  error !== null && typeof error === "object" && "code" in error && typeof error.code === "number" ? error.code : undefined

/**
 * web3.js 1.99 checks `blockHeight` in getBlock's answer (its GetBlockRpcResult schema: nullable number) and passes
 * it on, but its declared response types leave it out.
 */
type WithHeight<T> = T & { readonly blockHeight: number | null }

/** getBlock's answers for a slot that holds no block (skipped, or left by a fork) or none yet. */
const slotSkipped = -32007
const blockNotAvailable = -32004
const slotNotAvailable = -32009

export const makeSolChainClient = (options: SolChainClientOptions): SolChainClient => {
  const { networkKey, nativeAssetId } = options
  const timeoutMillis = options.rpcTimeoutMillis ?? rpcTimeoutMillisDefault
  const url = Redacted.value(options.rpcUrl)
  const { authorization, transportUrl } = splitCredentials(url)
  const nodeFetch = makeNodeHttpFetch()
  const connection = new Connection(transportUrl, {
    commitment: "confirmed",
    ...(authorization === undefined ? {} : { httpHeaders: { authorization } }),
    // web3.js retries HTTP 429 answers itself with growing pauses; the watcher retries on its next scan instead.
    disableRetryOnRateLimit: true,
    // node:http over kept-alive connections (NodeHttpFetch.ts): a third of the global fetch's CPU per call.
    fetch: (input, init) =>
      nodeFetch(input as string, { ...init, signal: AbortSignal.timeout(timeoutMillis) }) as unknown as Promise<Response>
  })
  const assetOfMint = new Map(options.tokens.map((token) => [token.mint, token.assetId]))

  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })

  const describe = (error: unknown): string => {
    const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
    return scrubNodeUrl(text, url, transportUrl)
  }

  const call: SolCall = makeNodeCall({ networkKey, timeoutMillis, describe })

  const noBlockAtSlot = (error: unknown) => {
    const code = rpcCode(error)
    return code === slotSkipped || code === blockNotAvailable || code === slotNotAvailable ? { value: null } : undefined
  }

  /** A block's hash and height without its transactions; null when the slot holds no block. */
  const blockHeader = (slot: number) =>
    call(
      `getBlock(${slot}, none)`,
      () =>
        connection.getBlock(slot, { commitment: "confirmed", transactionDetails: "none", rewards: false, maxSupportedTransactionVersion: 0 }) as Promise<
          WithHeight<VersionedNoneModeBlockResponse> | null
        >,
      noBlockAtSlot
    )

  const checkHeight = (what: string, height: number | null | undefined) =>
    typeof height === "number" && Number.isSafeInteger(height) && height >= 0
      ? Effect.succeed(height)
      : Effect.fail(unavailable(`${what}: no block height`))

  const finalizedHeight = call("getBlockHeight(finalized)", () => connection.getBlockHeight("finalized"))

  const head: Effect.Effect<ChainHead, ChainUnavailable> = Effect.gen(function*() {
    // The confirmed slot always holds a block: its header gives the head's height and hash together.
    const slot = yield* call("getSlot(confirmed)", () => connection.getSlot("confirmed"))
    const header = yield* blockHeader(slot)
    if (header === null) return yield* unavailable(`the confirmed slot ${slot} holds no block (the chain moved); retrying`)
    const height = BigInt(yield* checkHeight(`block at slot ${slot}`, header.blockHeight))
    const finalized = BigInt(yield* finalizedHeight)
    // Two calls, two moments: the finalized height may have been read after a block past the head.
    return { height, hash: header.blockhash, finalizedHeight: finalized > height ? height : finalized }
  })

  /**
   * The slot of the block at `height` on the current chain, or undefined above the head. A slot is never below its
   * height, and the slot of height h is at most h + (slots - heights) of any later moment (skips only accumulate):
   * the block heights read first, then the slot, bound it from above. Walking `getBlocks` windows down from there, the
   * block slots listed are consecutive blocks; the last one's height places `height` among them.
   */
  const slotOfHeight = (height: bigint) =>
    Effect.gen(function*() {
      const headHeight = BigInt(yield* call("getBlockHeight(confirmed)", () => connection.getBlockHeight("confirmed")))
      if (height > headHeight) return undefined
      const headSlot = BigInt(yield* call("getSlot(confirmed)", () => connection.getSlot("confirmed")))
      let end = headSlot - (headHeight - height)
      if (end > headSlot) end = headSlot
      for (let attempt = 0; attempt < 50 && end >= height; attempt++) {
        const start = end - BigInt(slotWindow) + 1n > height ? end - BigInt(slotWindow) + 1n : height
        const slots = yield* call(
          `getBlocks(${start}, ${end})`,
          () => connection.getBlocks(Number(start), Number(end), "confirmed")
        )
        if (slots.length > 0) {
          const last = slots[slots.length - 1]!
          const header = yield* blockHeader(last)
          if (header === null) return yield* unavailable(`slot ${last} was listed as a block and then held none; retrying`)
          const lastHeight = BigInt(yield* checkHeight(`block at slot ${last}`, header.blockHeight))
          if (lastHeight < height) {
            return yield* unavailable(`the block at slot ${last} has height ${lastHeight}, below ${height}: the chain moved`)
          }
          const index = slots.length - 1 - Number(lastHeight - height)
          if (index >= 0) return slots[index]!
          // The height lies below this window: the next one ends right before its first block.
          end = BigInt(slots[0]!) - 1n
          continue
        }
        end = start - 1n
      }
      return yield* unavailable(`no slot found for block height ${height}`)
    })

  const transfersOf = (read: VersionedBlockResponse): Array<ChainTransfer> => {
    const transfers: Array<ChainTransfer> = []
    for (const entry of read.transactions) {
      const meta = entry.meta
      if (meta === null || meta.err !== null) continue
      const message = entry.transaction.message
      const keys = [
        ...message.staticAccountKeys.map((key) => key.toBase58()),
        ...(meta.loadedAddresses?.writable ?? []).map((key) => key.toBase58()),
        ...(meta.loadedAddresses?.readonly ?? []).map((key) => key.toBase58())
      ]
      const txHash = entry.transaction.signatures[0]!
      const from = keys[0] ?? null
      const tokenIndexes = new Set([
        ...(meta.preTokenBalances ?? []).map((balance) => balance.accountIndex),
        ...(meta.postTokenBalances ?? []).map((balance) => balance.accountIndex)
      ])
      for (let index = 0; index < keys.length; index++) {
        const pre = meta.preBalances[index]
        const post = meta.postBalances[index]
        // web3.js 1.x parses lamports as JS numbers: above 2^53 they are not exact, and no amount is read from them.
        if (pre === undefined || post === undefined || !Number.isSafeInteger(pre) || !Number.isSafeInteger(post)) continue
        if (post <= pre || tokenIndexes.has(index)) continue
        transfers.push({ txHash, outputIndex: index, from, to: keys[index]!, assetId: nativeAssetId, amount: BigInt(post - pre) })
      }
      for (const post of meta.postTokenBalances ?? []) {
        const assetId = assetOfMint.get(post.mint)
        if (assetId === undefined || post.owner === undefined) continue
        const pre = (meta.preTokenBalances ?? []).find((balance) => balance.accountIndex === post.accountIndex && balance.mint === post.mint)
        const amount = BigInt(post.uiTokenAmount.amount) - BigInt(pre?.uiTokenAmount.amount ?? "0")
        if (amount <= 0n) continue
        transfers.push({ txHash, outputIndex: post.accountIndex, from, to: post.owner, assetId, amount })
      }
    }
    return transfers
  }

  const block = (height: bigint): Effect.Effect<ChainBlock | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      const slot = yield* slotOfHeight(height)
      if (slot === undefined) return undefined
      const read = yield* call(
        `getBlock(${slot})`,
        () =>
          connection.getBlock(slot, {
            commitment: "confirmed",
            transactionDetails: "full",
            rewards: false,
            maxSupportedTransactionVersion: 0
          }) as Promise<WithHeight<VersionedBlockResponse> | null>,
        noBlockAtSlot
      )
      if (read === null) return yield* unavailable(`slot ${slot} holds no block any more (the chain moved); retrying`)
      if (read.blockHeight === null || BigInt(read.blockHeight) !== height) {
        return yield* unavailable(`asked for block height ${height} at slot ${slot}, got ${read.blockHeight}`)
      }
      return { height, hash: read.blockhash, parentHash: read.previousBlockhash, transfers: transfersOf(read) }
    })

  /** getSignatureStatuses with the node's history: null when the chain does not have the signature. */
  const signatureStatus = (txHash: string) =>
    call(
      "getSignatureStatuses",
      () => connection.getSignatureStatuses([txHash], { searchTransactionHistory: true })
    ).pipe(Effect.map((answer) => answer.value[0] ?? null))

  const transactionState = (txHash: string): Effect.Effect<TransactionState, ChainUnavailable> =>
    Effect.map(signatureStatus(txHash), (status) => {
      if (status === null) return "UNKNOWN"
      // `processed`: executed by a bank that is not confirmed yet; its block is not readable with getBlock.
      return status.confirmationStatus === "processed" ? "PENDING" : "INCLUDED"
    })

  const withdrawals = makeSolWithdrawals(
    { connection, call, describe, blockHeader, signatureStatus },
    {
      networkKey,
      nativeAssetId,
      feeRateCap: options.feeRateCap,
      tokens: new Map(options.tokens.map((token) => [token.assetId, token]))
    }
  )

  return {
    networkKey,
    startFromGenesis: false,
    head,
    block,
    transactionState,
    withdrawals,
    genesisHash: call("getGenesisHash", () => connection.getGenesisHash())
  }
}

