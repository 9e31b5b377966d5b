/**
 * The sending side of an EVM node (ChainClient's WithdrawalChain; docs/sending.md): balances, EIP-1559 fees, the
 * pending nonce that seeds the PostgreSQL sequence, the broadcast with the node's answers sorted into "accepted",
 * "try again" and "refused for good", and the receipt that says whether and at what cost a transaction was included.
 *
 * Fees (decisions.md "Sending on real networks"): the next block's base fee from `eth_feeHistory`, the tip from
 * `eth_maxPriorityFeePerGas`; `maxFeePerGas` = 2 × base fee + tip, which stays includable through six full blocks
 * of base-fee rises (12.5 % each), and never above the network's `feeRateCap`. While base fee + tip alone is above
 * the cap, nothing is signed (ChainUnavailable: the withdrawal waits, it is not failed).
 */
import { Clock, Duration, Effect } from "effect"
import { encodeFunctionData, erc20Abi, type PublicClient, RpcError, TransactionReceiptNotFoundError } from "viem"
import {
  broadcastAnswerMaxMillis,
  BroadcastRejected,
  ChainUnavailable,
  type Inclusion,
  type SignedWithdrawal,
  type WithdrawalChain,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../ChainClient.ts"
import { nativeTransferGas, revertingCallGas, tokenTransferGasEstimate } from "./EvmGas.ts"

/** How long one reading of the node's fees is used (see `feesPerGas`). */
export const feeQuoteMillis = 2_000


export interface EvmSendingOptions {
  readonly networkKey: string
  readonly chainId: number
  readonly nativeAssetId: string
  /** The catalog's tokens on this network: asset id to contract. */
  readonly tokenContracts: ReadonlyMap<string, string>
  /** The most maxFeePerGas may be, in wei (catalog `feeRateCap`). */
  readonly feeRateCap: bigint
}

export interface EvmRpc {
  readonly client: PublicClient
  readonly call: <A, B = never>(
    what: string,
    run: () => Promise<A>,
    recover?: (error: unknown) => { readonly value: B } | undefined
  ) => Effect.Effect<A | B, ChainUnavailable>
  readonly describe: (error: unknown) => string
}

/** The node's refusal, by its message: geth, anvil, Erigon and Nethermind word these the same way. */
const alreadyKnown = /already known|known transaction|already imported/i
const nonceTooLow = /nonce too low|nonce has already been used|oldnonce/i
/** Answers after which the same bytes may well be accepted later: not a refusal for good. */
const tryAgain = /insufficient funds|underpriced|fee cap less than block base fee|less than block base fee|txpool is full|transaction pool is full|nonce too high|could not replace/i

export const makeEvmWithdrawals = (rpc: EvmRpc, options: EvmSendingOptions): WithdrawalChain => {
  const { call, client } = rpc
  const { feeRateCap, networkKey, nativeAssetId } = options
  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })

  const contractOf = (assetId: string): `0x${string}` | undefined =>
    options.tokenContracts.get(assetId) as `0x${string}` | undefined

  /** maxFeePerGas and the tip to sign with now, capped (see the module's comment). */
  const readFeesPerGas = Effect.gen(function*() {
    const history = yield* call("eth_feeHistory", () => client.getFeeHistory({ blockCount: 1, rewardPercentiles: [] }))
    // baseFeePerGas has one more entry than blocks asked for: the base fee of the next block.
    const nextBaseFee = history.baseFeePerGas.at(-1)
    if (nextBaseFee === undefined) return yield* unavailable("eth_feeHistory gave no base fee")
    const tip = yield* call("eth_maxPriorityFeePerGas", () => client.estimateMaxPriorityFeePerGas())
    if (nextBaseFee + tip > feeRateCap) {
      return yield* unavailable(
        `fees are above the network's cap: base fee ${nextBaseFee} + tip ${tip} wei per gas > ${feeRateCap}; waiting`
      )
    }
    const wanted = 2n * nextBaseFee + tip
    return { maxFeePerGas: wanted > feeRateCap ? feeRateCap : wanted, maxPriorityFeePerGas: tip }
  })

  /**
   * The fees, read at most once per `feeQuoteMillis`: a burst of withdrawals (each asks twice: the cover check and
   * the signature) would otherwise ask the node the same two questions hundreds of times within one block. Two
   * seconds is under any network's block time that matters here; 2 × base fee leaves the room for the rise.
   */
  let quoted: { readonly at: number; readonly fees: Effect.Effect<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }, ChainUnavailable> } | undefined
  const feesPerGas = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (quoted === undefined || now - quoted.at >= feeQuoteMillis) {
      quoted = { at: now, fees: yield* Effect.cached(readFeesPerGas) }
    }
    const current = quoted
    return yield* current.fees.pipe(Effect.tapError(() => Effect.sync(() => {
      // A failed read is not kept: the next caller asks the node again.
      if (quoted === current) quoted = undefined
    })))
  })

  const nominalGas = (assetId: string) => (contractOf(assetId) === undefined ? nativeTransferGas : tokenTransferGasEstimate)

  const networkFee = (assetId: string) =>
    Effect.map(feesPerGas, (fees) => nominalGas(assetId) * fees.maxFeePerGas)

  const balance = (address: string, assetId: string) => {
    const contract = contractOf(assetId)
    // "pending": what the address holds once the transactions the node already has are mined.
    return contract === undefined
      ? call("eth_getBalance", () => client.getBalance({ address: address as `0x${string}`, blockTag: "pending" }))
      : call("balanceOf", () =>
        client.readContract({
          address: contract,
          abi: erc20Abi,
          functionName: "balanceOf",
          args: [address as `0x${string}`],
          blockTag: "pending"
        }))
  }

  const hotWalletCovers = (transfer: WithdrawalTransfer, fee: bigint) =>
    Effect.gen(function*() {
      const native = yield* balance(transfer.from, nativeAssetId)
      if (contractOf(transfer.assetId) === undefined) return native >= transfer.amount + fee
      return native >= fee && (yield* balance(transfer.from, transfer.assetId)) >= transfer.amount
    })

  const gasFor = (transfer: WithdrawalTransfer) => {
    const contract = contractOf(transfer.assetId)
    const request = contract === undefined
      ? { account: transfer.from as `0x${string}`, to: transfer.to as `0x${string}`, value: transfer.amount }
      : {
        account: transfer.from as `0x${string}`,
        to: contract,
        data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [transfer.to as `0x${string}`, transfer.amount] })
      }
    return call(
      "eth_estimateGas",
      () => client.estimateGas(request),
      // The call would revert (or run out of gas): the node answered, with an execution error.
      (error) => (error instanceof Error && /revert|execution|out of gas/i.test(rpc.describe(error)) ? { value: undefined } : undefined)
    ).pipe(Effect.map((estimate) => {
      if (estimate === undefined) return revertingCallGas
      // A plain transfer to an account without code costs exactly its estimate; a contract call gets 20 % room
      // (its cost depends on state that may change before inclusion; unused gas is not paid).
      return estimate === nativeTransferGas ? estimate : (estimate * 6n + 4n) / 5n
    }))
  }

  const withdrawalParameters = (transfer: WithdrawalTransfer): Effect.Effect<WithdrawalParameters, ChainUnavailable> =>
    Effect.gen(function*() {
      const fees = yield* feesPerGas
      const gas = yield* gasFor(transfer)
      return {
        family: "EVM" as const,
        chainId: options.chainId,
        // Never chosen here: a client with `accountNonce` gets its nonces from the sending pipeline's PostgreSQL
        // sequence (sending/OutgoingSends.ts), which overwrites this before anything is signed.
        nonce: 0,
        gas,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        networkFee: gas * fees.maxFeePerGas
      }
    })

  const accountNonce = (address: string) =>
    call(
      "eth_getTransactionCount",
      () => client.getTransactionCount({ address: address as `0x${string}`, blockTag: "pending" })
    ).pipe(Effect.map(BigInt))

  const broadcast = (signed: SignedWithdrawal) =>
    Effect.gen(function*() {
      const answer = yield* Effect.tryPromise({
        try: () => client.sendRawTransaction({ serializedTransaction: signed.raw as `0x${string}` }),
        catch: (error) => error
      }).pipe(
        Effect.map(() => "ACCEPTED" as const),
        Effect.catch((error) => Effect.succeed(error)),
        Effect.timeoutOrElse({
          duration: Duration.millis(broadcastAnswerMaxMillis),
          orElse: () => Effect.succeed(new Error(`no answer within ${broadcastAnswerMaxMillis} ms`))
        })
      )
      if (answer === "ACCEPTED") return
      const message = rpc.describe(answer)
      if (alreadyKnown.test(message)) return
      // Only a JSON-RPC error answer of the node (viem: an RpcError) is a refusal; a transport failure, an HTTP
      // error status, a timeout or a garbled answer is not, and neither is an answer saying "not now".
      if (!(answer instanceof RpcError) || tryAgain.test(message)) {
        return yield* unavailable(`eth_sendRawTransaction: ${message}`)
      }
      return yield* new BroadcastRejected({ networkKey, message, nonceUsed: nonceTooLow.test(message) })
    })

  const inclusion = (txHash: string): Effect.Effect<Inclusion | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      const receipt = yield* call(
        "eth_getTransactionReceipt",
        () => client.getTransactionReceipt({ hash: txHash as `0x${string}` }),
        (error) => (error instanceof TransactionReceiptNotFoundError ? { value: undefined } : undefined)
      )
      if (receipt === undefined) return undefined
      // The receipt's block must be the chain's block at that height now: a node may still answer for a block a
      // reorganization replaced.
      const block = yield* call(
        `eth_getBlockByNumber(${receipt.blockNumber})`,
        () => client.getBlock({ blockNumber: receipt.blockNumber }),
        () => ({ value: undefined })
      )
      if (block === undefined || block.hash !== receipt.blockHash) return undefined
      return {
        height: receipt.blockNumber,
        succeeded: receipt.status === "success",
        networkFee: receipt.gasUsed * receipt.effectiveGasPrice
      }
    })

  return {
    accountNonce,
    balance,
    currentFeesPerGas: readFeesPerGas,
    hotWalletCovers,
    networkFee,
    withdrawalParameters,
    broadcast,
    inclusion
  }
}
