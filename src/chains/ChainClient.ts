/**
 * What the service needs from a chain, one client per network: follow the head, read blocks with the transfers in
 * them, and say whether a transaction is still known (to tell a dropped deposit from one waiting to be re-mined).
 * The built-in simulated chain implements it for development and tests (chains/simulated/); EVM networks have a
 * JSON-RPC client (chains/evm/); the other families' RPC clients plug in here when built. Withdrawals will add broadcast and fee reads to this interface.
 */
import { Context, Data, type Effect } from "effect"

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
}

/** The client of each network the service follows; a network without one is not watched. */
export class ChainClients extends Context.Service<ChainClients, {
  readonly get: (networkKey: string) => ChainClient | undefined
  readonly networkKeys: ReadonlyArray<string>
  /** Whether the network runs on the built-in simulated chain (only those answer /ops/devnet/...). */
  readonly isSimulated: (networkKey: string) => boolean
}>()("coffer/ChainClients") {}
