/**
 * How each family's client is made for a network named in `CHAIN_RPC_URLS`, and checked against its node before it
 * is used (decisions.md "Sending on real networks": a node on another chain than the catalog's refuses the start,
 * naming both; so does one that does not say which chain it is on). One entry per family, each in its family's folder.
 */
import { Effect, Schedule, type Redacted } from "effect"
import type { SqlClient } from "effect/sql"
import type { CatalogAsset, CatalogNetwork } from "../catalog/Catalog.ts"
import { ConfigInvalid } from "../Config.ts"
import type { ChainClient, ChainUnavailable } from "./ChainClient.ts"
import type { ChainFamily } from "./ChainFamily.ts"

/** A node that does not answer which chain it is on at start is asked this many times, this far apart. */
export const identityAttemptsMax = 3
export const identityRetryMillis = 1_000

export interface NodeClientInput {
  readonly network: CatalogNetwork
  /** The catalog's assets on this network. */
  readonly assets: ReadonlyArray<CatalogAsset>
  /** Secret: it may hold credentials; never in a message. */
  readonly rpcUrl: Redacted.Redacted<string>
  /** The service's database, for clients that keep sending state there (BTC output reservations). */
  readonly sql?: SqlClient.SqlClient | undefined
}

/**
 * A client, and what its node says about which chain it is on: `undefined` when it matches the catalog, else the
 * mismatch in words (e.g. "chain id 1, the catalog's is 11155111").
 */
export interface NodeClientFactory {
  readonly make: (input: NodeClientInput) => ChainClient
  readonly identityMismatch: (client: ChainClient, network: CatalogNetwork) => Effect.Effect<string | undefined, ChainUnavailable>
}

/**
 * Each family's factory, imported only when a network of that family has a node: viem's client is about a quarter
 * of a second of module loading, which a start without EVM nodes (the embedded default) need not pay; the restart
 * after a crash has a 3 s promise (README).
 */
export const nodeClientFactories: Readonly<Record<ChainFamily, () => Promise<NodeClientFactory>>> = {
  EVM: () => import("./evm/EvmNodeClient.ts").then((module) => module.evmNodeClientFactory),
  TRON: () => import("./tron/TronNodeClient.ts").then((module) => module.tronNodeClientFactory),
  BTC: () => import("./btc/BtcNodeClient.ts").then((module) => module.btcNodeClientFactory),
  SOL: () => import("./sol/SolNodeClient.ts").then((module) => module.solNodeClientFactory)
}

/** The checked client of a network named in `CHAIN_RPC_URLS`. */
export const makeNodeClient = (input: NodeClientInput): Effect.Effect<ChainClient, ConfigInvalid> =>
  Effect.gen(function*() {
    const { network } = input
    const factory = yield* Effect.promise(nodeClientFactories[network.chainFamily])
    const client = factory.make(input)
    const mismatch = yield* factory.identityMismatch(client, network).pipe(
      Effect.retry({ schedule: Schedule.spaced(identityRetryMillis), times: identityAttemptsMax - 1 }),
      Effect.mapError((error) =>
        new ConfigInvalid({
          message: `CHAIN_RPC_URLS: the node for ${network.networkKey} did not say which chain it is on (${error.message}); ` +
            `refusing to start rather than follow an unverified chain`
        })
      )
    )
    if (mismatch !== undefined) {
      return yield* new ConfigInvalid({
        message: `CHAIN_RPC_URLS: the node for ${network.networkKey} is on ${mismatch}: refusing to start`
      })
    }
    return client
  })
