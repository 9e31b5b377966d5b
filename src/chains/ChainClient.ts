/**
 * What the service needs from a chain, one client per network: follow the head, read blocks with the transfers in
 * them, and say whether a transaction is still known (to tell a dropped deposit from one waiting to be re-mined).
 * The built-in simulated chain implements it for development and tests (chains/simulated/); EVM networks have a
 * JSON-RPC client (chains/evm/); the other families' RPC clients plug in here when built. A client that can send
 * withdrawals also has `withdrawals` (chain parameters, hot-wallet cover, broadcast, inclusion).
 */
import { Context, Data, type Effect } from "effect"
import type { SigningKey } from "../signer/TransactionRequest.ts"

/** A chain node could not be reached or answered nonsense; the watcher retries later. */
export class ChainUnavailable extends Data.TaggedError("ChainUnavailable")<{
  readonly networkKey: string
  readonly message: string
}> {}

export interface ChainHead {
  readonly height: bigint
  readonly hash: string
  /** The highest block the network treats as final (TRON solidified, SOL finalized); deeper blocks never reorg. */
  readonly finalizedHeight: bigint
}

/** A value transfer to an address, as the client decoded it (native coin or a catalog token). */
export interface ChainTransfer {
  readonly txHash: string
  /** Which output (BTC vout, EVM log index, ...) of the transaction paid `to`. */
  readonly outputIndex: number
  readonly from: string | null
  /** In the `normalized` form of chains/AddressValidation, so it compares equal to a derived address. */
  readonly to: string
  readonly assetId: string
  readonly amount: bigint
}

export interface ChainBlock {
  readonly height: bigint
  readonly hash: string
  readonly parentHash: string
  readonly transfers: ReadonlyArray<ChainTransfer>
}

export type TransactionState = "INCLUDED" | "PENDING" | "UNKNOWN"

/**
 * The network refused a transaction for good (invalid, double spend, ...): retrying the same bytes cannot help.
 * `nonceUsed`: an EVM node said the nonce is taken already ("nonce too low"), which is also what a transaction of
 * ours that was mined meanwhile looks like; the caller checks its own versions before calling it a failure.
 */
export class BroadcastRejected extends Data.TaggedError("BroadcastRejected")<{
  readonly networkKey: string
  readonly message: string
  readonly nonceUsed?: boolean
}> {}

/** Where a transaction stands in the current chain: its block, whether it succeeded, and what it cost. */
export interface Inclusion {
  readonly height: bigint
  /** False when it was included but failed (EVM receipt status 0, TRON contractRet, SOL meta.err). */
  readonly succeeded: boolean
  /**
   * The network fee it actually paid in the native coin, read from the chain (EVM gasUsed × effectiveGasPrice).
   * Undefined only on the simulated chain, whose fee is exactly what was signed for.
   */
  readonly networkFee: bigint | undefined
  /**
   * Native coin the transaction moved from its fee payer into accounts it created, beside the fee (SOL: the rent-exempt
   * minimum of a token account it opened, which `meta.fee` leaves out). Absent where nothing is created that way.
   */
  readonly accountCost?: bigint | undefined
}

/** The transfer a withdrawal asks for, from the platform's hot wallet. */
export interface WithdrawalTransfer {
  readonly withdrawalId: string
  /** The platform HOT address on the network (the sender, and the BTC change address). */
  readonly from: string
  readonly to: string
  readonly assetId: string
  readonly amount: bigint
}

/**
 * What a signature needs from the chain, per family (signer/TransactionRequest.ts holds the rest), and the network
 * fee the transaction will pay in the native coin.
 */
export type WithdrawalParameters =
  | {
    readonly family: "EVM"
    readonly chainId: number
    readonly nonce: number
    readonly gas: bigint
    readonly maxFeePerGas: bigint
    readonly maxPriorityFeePerGas: bigint
    readonly networkFee: bigint
  }
  | {
    readonly family: "TRON"
    readonly referenceBlock: { readonly number: bigint; readonly id: string; readonly timestamp: number }
    readonly feeLimit: bigint
    readonly networkFee: bigint
    /** When the network drops it unconfirmed, ms since the epoch (default: the reference block's time + 60 s). */
    readonly expiration?: number | undefined
  }
  | {
    readonly family: "BTC"
    /**
     * Outputs to spend (value in satoshi): the hot wallet's, and credited deposit outputs signed with their wallet's
     * `key` (decisions.md: BTC has no sweeps); the change goes back to the hot wallet.
     */
    readonly inputs: ReadonlyArray<{
      readonly txid: string
      readonly vout: number
      readonly value: bigint
      /** Whose key holds the output; absent: the sending key (HOT for withdrawals). */
      readonly key?: SigningKey | undefined
    }>
    readonly networkFee: bigint
  }
  | {
    readonly family: "SOL"
    readonly recentBlockhash: string
    /** The last block height at which a transaction on `recentBlockhash` can be included. */
    readonly lastValidBlockHeight?: bigint | undefined
    /** Who pays the fee when not the sender (a GAS wallet paying for an SPL sweep). */
    readonly feePayer?: SigningKey | undefined
    readonly networkFee: bigint
  }

/**
 * The longest a client's `broadcast` may take before it answers (an answer, a refusal, or ChainUnavailable): EVM and
 * SOL bound their send call by it, BTC and TRON by their RPC timeout (10 s, plus 1 s for the Effect around it). The
 * broadcast claim's grace (Config.ts `broadcastClaimGraceMillis`, sending/OutgoingSends.ts) must exceed it.
 */
export const broadcastAnswerMaxMillis = 15_000

/** A signed withdrawal as broadcast: the bytes, their hash, and what they transfer (for the simulated chain). */
export interface SignedWithdrawal extends WithdrawalTransfer {
  readonly raw: string
  readonly txHash: string
  readonly networkFee: bigint
}

export interface WithdrawalChain {
  /**
   * The address's pending transaction count (EVM `eth_getTransactionCount(address, "pending")`), present on clients
   * of real EVM nodes: their nonces come from the PostgreSQL sequence (sending/OutgoingSends.ts), seeded from this
   * on an address's first send. Absent where the client chooses nonces itself (the simulated chain).
   */
  readonly accountNonce?: ((address: string) => Effect.Effect<bigint, ChainUnavailable>) | undefined
  /**
   * EVM: the network replaces a pending transaction by one with the same sender and nonce and higher fees, so the
   * sending pipeline may replace a stuck version (docs/sending.md). Implied by `accountNonce` (a real node); set by
   * the simulated chain, whose mempool keeps nonces (issue 33) though it chooses them itself.
   */
  readonly nonceReplacement?: boolean | undefined
  /**
   * EVM: the fee fields to sign with now, read from the node at this moment (no reuse of an earlier reading): what a
   * replacement of a stuck transaction must at least offer.
   */
  readonly currentFeesPerGas?:
    | Effect.Effect<{ readonly maxFeePerGas: bigint; readonly maxPriorityFeePerGas: bigint }, ChainUnavailable>
    | undefined
  /** Whether the hot wallet holds `amount` of the asset and the network fee in the native coin. */
  readonly hotWalletCovers: (
    transfer: WithdrawalTransfer,
    networkFee: bigint
  ) => Effect.Effect<boolean, ChainUnavailable>
  /**
   * What `address` holds of the asset, counting the transactions the node already has (EVM "pending"). Present
   * where the client reads real balances (the sweeps and GAS wallets use it); the simulated chain has none.
   */
  readonly balance?: ((address: string, assetId: string) => Effect.Effect<bigint, ChainUnavailable>) | undefined
  /**
   * SOL (spec 4.1, chains/sol/SolWalletAddress.ts `isWalletAccount`): whether the node holds nothing at `address`
   * or a wallet's account, rather than a program, a mint, a token account or another program's data, which the
   * static check cannot see. Present on clients of real SOL nodes; other families have no such rule, and the
   * simulated chain keeps no accounts, so there the static check (`isSolanaWalletAddress`) is the whole answer.
   */
  readonly isWalletAddress?: ((address: string) => Effect.Effect<boolean, ChainUnavailable>) | undefined
  /** The network fee a withdrawal of this asset would pay now (to check the hot wallet before signing). */
  readonly networkFee: (assetId: string) => Effect.Effect<bigint, ChainUnavailable>
  /** Chain parameters for one signature; asked once per withdrawal (the signed bytes are stored). */
  readonly withdrawalParameters: (transfer: WithdrawalTransfer) => Effect.Effect<WithdrawalParameters, ChainUnavailable>
  /** Sends signed bytes; sending the same bytes again is harmless (the network knows them by their hash). */
  readonly broadcast: (signed: SignedWithdrawal) => Effect.Effect<void, ChainUnavailable | BroadcastRejected>
  /** The transaction's block on the current chain and its outcome, or undefined while it is in no block. */
  readonly inclusion: (txHash: string) => Effect.Effect<Inclusion | undefined, ChainUnavailable>
  /**
   * TRON and SOL: whether signed bytes that are in no block can provably never be included any more (TRON its
   * `expiration` passed by the solidified block's time: a reorganization could bring back an earlier head; SOL its
   * blockhash past `lastValidBlockHeight` in the finalized bank). Only then does
   * OutgoingSends sign the same payload again on fresh parameters (decisions.md: re-sign only after expiry).
   */
  readonly expired?: ((signed: SignedWithdrawal) => Effect.Effect<boolean, ChainUnavailable>) | undefined
  /**
   * BTC replace-by-fee (BIP 125): the parameters of a replacement for a version signed with `previous` that has
   * waited `blocksWaited` blocks unincluded (same inputs, a higher fee), or undefined while it should wait.
   */
  readonly replacementParameters?:
    | ((previous: WithdrawalParameters, blocksWaited: bigint) => Effect.Effect<WithdrawalParameters | undefined, ChainUnavailable>)
    | undefined
  /**
   * BTC: whether no version of the send can ever be included: an input of `signed` is spent on the current chain by
   * a transaction that is none of the send's `versions` (their hashes), in a block that `final` says is final (so a
   * reorganization cannot undo it). False while such a spend is in a block that is not final yet, or only in a
   * mempool. OutgoingSends asks it only when no version is in a block and the latest is in no mempool; the send is
   * then REJECTED and its owner fails (decisions.md "Sending on real networks").
   */
  readonly conflicted?:
    | ((
      signed: SignedWithdrawal,
      versions: ReadonlyArray<string>,
      final: (head: ChainHead, height: bigint) => boolean
    ) => Effect.Effect<boolean, ChainUnavailable>)
    | undefined
}

export interface ChainClient {
  readonly networkKey: string
  /**
   * Where a watcher that has never run starts: the simulated chain is born with the service, so from its genesis;
   * a real network from the head at first sight (its history holds no deposits to addresses not yet handed out).
   */
  readonly startFromGenesis: boolean
  readonly head: Effect.Effect<ChainHead, ChainUnavailable>
  /** The block at `height` on the current chain, or undefined above the head. */
  readonly block: (height: bigint) => Effect.Effect<ChainBlock | undefined, ChainUnavailable>
  /** Whether the chain still has the transaction: in a block, in the mempool, or not at all (dropped). */
  readonly transactionState: (txHash: string) => Effect.Effect<TransactionState, ChainUnavailable>
  /** Withdrawals from the platform hot wallet; absent where the client cannot send yet (they wait QUEUED). */
  readonly withdrawals?: WithdrawalChain | undefined
}

/** The client of each network the service follows; a network without one is not watched. */
export class ChainClients extends Context.Service<ChainClients, {
  readonly get: (networkKey: string) => ChainClient | undefined
  readonly networkKeys: ReadonlyArray<string>
  /** Whether the network runs on the built-in simulated chain (only those answer /ops/devnet/...). */
  readonly isSimulated: (networkKey: string) => boolean
}>()("coffer/ChainClients") {}
