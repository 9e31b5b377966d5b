/**
 * What a TRON, SOL or BTC node says the books' addresses hold at its head, for `npm run ledger:check -- --chain`
 * (ChainBooks.ts `auditChain`, docs/ledger.md "Chain books"). These nodes answer for their current state only, so
 * the audit compares at a quiet head (the readers give the head with its hash, the audit checks it did not move).
 *
 * TRON and SOL reuse the service's own chain client (chains/NodeClients.ts): the same head as the watcher follows
 * (TRON `wallet/getnowblock`; SOL the `confirmed` block height, the unit of the SOL cursor), the same balance reads
 * as the sweeps (TRON `getaccount` and TRC-20 `balanceOf`; SOL `getBalance` and the owner's associated token account)
 * and the same check that the node is on the catalog's chain (a mismatch: exit 2). BTC reads the unspent outputs of
 * all the addresses in one `scantxoutset` (one `raw(<script>)` descriptor per address: a regtest node does not parse
 * a testnet address), which also names the block its UTXO set stood at.
 *
 * No message carries the node's URL (the clients' and BtcRpc's messages never do).
 */
import * as bitcoin from "bitcoinjs-lib"
import { Effect, Redacted } from "effect"
import { bitcoinNetworks } from "../chains/BitcoinNetwork.ts"
import { satoshis } from "../chains/btc/BtcRpc.ts"
import { makeBtcRpc } from "../chains/btc/BtcRpc.ts"
import { makeNodeClient } from "../chains/NodeClients.ts"
import type { CatalogAsset, CatalogNetwork } from "../catalog/Catalog.ts"
import type { BalanceReader } from "./ChainBooks.ts"
import type { NodeOutput } from "./ChainOutputs.ts"

/** `scantxoutset` walks the whole UTXO set: about a minute on mainnet (docs/btc.md). */
const scanTimeoutMillis = 180_000

/** The reader of a TRON, SOL or BTC network; fails (ConfigInvalid) when its node is on another chain. */
export const makeHeadBalanceReader = (input: {
  readonly network: CatalogNetwork
  readonly assets: ReadonlyArray<CatalogAsset>
  readonly rpcUrl: Redacted.Redacted<string>
}) =>
  Effect.gen(function*() {
    // Without a database the client only watches: nothing here can send or reserve.
    const client = yield* makeNodeClient({ network: input.network, assets: input.assets, rpcUrl: input.rpcUrl })
    const head = Effect.map(client.head, (head) => ({ height: head.height, hash: head.hash }))
    if (input.network.chainFamily !== "BTC") {
      const balance = client.withdrawals?.balance
      if (balance === undefined) {
        return yield* Effect.die(new Error(`${input.network.networkKey}: its chain client reads no balances`))
      }
      return { at: "head", head, balance } satisfies BalanceReader as BalanceReader
    }
    const networkKey = input.network.networkKey
    const network = bitcoinNetworks[input.network.btcNetwork!]
    const rpc = makeBtcRpc({ networkKey, url: Redacted.value(input.rpcUrl) })
    const unspent = (addresses: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const byScript = new Map<string, string>()
        for (const address of addresses) {
          byScript.set(Buffer.from(bitcoin.address.toOutputScript(address, network)).toString("hex"), address)
        }
        const outputs = new Map<string, Array<NodeOutput>>()
        const answer = (yield* rpc.call(
          "scantxoutset",
          ["start", [...byScript.keys()].map((script) => `raw(${script})`)],
          { timeoutMillis: scanTimeoutMillis }
        ).pipe(
          Effect.catchTag("RpcError", (error) =>
            Effect.fail({ message: `scantxoutset: node error ${error.code} (${error.message})` }))
        )) as {
          readonly success?: unknown
          readonly height?: unknown
          readonly bestblock?: unknown
          readonly unspents?: ReadonlyArray<{
            readonly txid?: unknown
            readonly vout?: unknown
            readonly scriptPubKey?: unknown
            readonly amount?: unknown
          }>
        } | null
        if (
          answer?.success !== true || typeof answer.height !== "number" || typeof answer.bestblock !== "string" ||
          !Array.isArray(answer.unspents)
        ) {
          return yield* Effect.fail({ message: "scantxoutset: malformed answer" })
        }
        for (const found of answer.unspents) {
          const address = typeof found.scriptPubKey === "string" ? byScript.get(found.scriptPubKey) : undefined
          const value = satoshis(found.amount)
          if (
            address === undefined || value === undefined || typeof found.txid !== "string" ||
            typeof found.vout !== "number"
          ) {
            return yield* Effect.fail({ message: "scantxoutset: malformed output" })
          }
          const list = outputs.get(address) ?? []
          list.push({ txid: found.txid, vout: found.vout, value })
          outputs.set(address, list)
        }
        return { block: { height: BigInt(answer.height), hash: answer.bestblock }, outputs }
      })
    return { at: "outputs", head, unspent } satisfies BalanceReader as BalanceReader
  })
