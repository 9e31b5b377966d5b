/**
 * The BTC entry of chains/NodeClients.ts: the client of a network named in `CHAIN_RPC_URLS`, and the start-up check
 * that its node is on the catalog's chain (decisions.md "Sending on real networks"; a testnet network also accepts
 * a regtest node). The node answers `getblockchaininfo.chain`: `main`, `test`, `testnet4`, `signet` or `regtest`.
 */
import { Effect } from "effect"
import type { NodeClientFactory } from "../NodeClients.ts"
import { type BtcChainClient, makeBtcChainClient } from "./BtcChainClient.ts"
import { makeBtcOutputBook } from "./BtcOutputBook.ts"

/** `getblockchaininfo.chain` each catalog BTC network accepts. */
export const btcChainsAccepted = { main: ["main"], test: ["test", "testnet4", "regtest"], regtest: ["regtest"] } as const

export const btcNodeClientFactory: NodeClientFactory = {
  make: ({ network, rpcUrl, sql }) =>
    makeBtcChainClient({
      networkKey: network.networkKey,
      rpcUrl,
      btcNetwork: network.btcNetwork!,
      nativeAssetId: network.nativeAssetId,
      // Coin selection reserves outputs in PostgreSQL; without a database the client only watches.
      sending: sql === undefined ? undefined : { feeRateCap: network.feeRateCap, book: makeBtcOutputBook(sql) }
    }),
  identityMismatch: (client, network) =>
    Effect.map((client as BtcChainClient).chain, (reported) => {
      const accepted: ReadonlyArray<string> = btcChainsAccepted[network.btcNetwork!]
      return accepted.includes(reported)
        ? undefined
        : `chain "${reported}", the catalog's ${network.networkKey} is a ${network.btcNetwork} network (accepts ${accepted.join(", ")})`
    })
}
