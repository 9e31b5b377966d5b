/**
 * Deposits end to end on a BTC node (docs/btc.md, docs/deposits.md): the whole service with `CHAIN_RPC_URLS`
 * pointing BTC_TESTNET at a regtest Litecoin Core node (chains.md 5.3; the catalog's testnet accepts a regtest node,
 * decisions.md "Sending on real networks"). A payment to a tenant's `tb1...` deposit address (the node spells it
 * `rltc1...`) is recorded CONFIRMING when mined and credited at the 2nd confirmation (catalog: confirmations n = 2,
 * spec section 2); a reorganization that double-spends it reverses a credited deposit (REVERSED, debited back) and
 * drops an unconfirmed one (FAILED / DROPPED, nothing credited).
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { beforeAll } from "vitest"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { startLitecoind } from "../support/Litecoind.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { deposits, get, networkCalls } from "../support/NetworkCalls.ts"

const node = startLitecoind()
const networkKey = "BTC_TESTNET"
const { scan, depositAddress } = networkCalls(networkKey)

beforeAll(() => node.ready, 60_000)


const available = (tenant: TestTenant, walletId: string) =>
  Effect.map(get(tenant, `/v1/wallets/${walletId}/assets`), (response) =>
    (response.json as Array<any>).find((balance) => balance.assetId === "BTC_TESTNET_BTC")?.available as string | undefined)

const promise = <A>(run: () => Promise<A>) => Effect.promise(run)

layer(makeTestAppLayer({ chainRpcUrls: { BTC_TESTNET: Redacted.make(node.url) } }), { excludeTestServices: true })(
  "deposits on a BTC node (litecoind regtest)",
  (it) => {
    it.effect("BTC_TESTNET is on the RPC client, from the head at first sight", () =>
      Effect.gen(function*() {
        const clients = yield* ChainClients
        assert.isFalse(clients.isSimulated(networkKey))
        assert.isFalse(clients.get(networkKey)!.startFromGenesis)
        assert.isDefined(clients.get(networkKey)!.withdrawals, "the service's client sends (it has the database)")
        // Honest networks (issue 11): deposits and withdrawals follow the client, both on.
        const tenant = yield* provisionTenant()
        const assets = yield* get(tenant, "/v1/supported_assets")
        const btc = (assets.json as Array<any>).find((asset) => asset.assetId === "BTC_TESTNET_BTC")
        assert.deepStrictEqual([btc.networkDepositEnabled, btc.networkWithdrawEnabled], [true, true], assets.text)
      }))

    it.effect("a payment is CONFIRMING when mined, credited at the 2nd confirmation, REVERSED when a reorg double-spends it", () =>
      Effect.gen(function*() {
        yield* scan
        const tenant = yield* provisionTenant()
        const wallet = yield* depositAddress(tenant, "alice")
        assert.match(wallet.address, /^tb1q/, "the catalog's testnet spelling, not the node's")
        const amount = 1_234_567n
        const txHash = yield* promise(() => node.send(wallet.address, "test", amount))
        yield* scan
        assert.deepStrictEqual(yield* deposits(tenant), [], "a transaction in the mempool is not a deposit yet")

        yield* promise(() => node.mine(1))
        yield* scan
        const seen = yield* deposits(tenant)
        assert.deepStrictEqual(seen.map((deposit) => [deposit.status, deposit.amountRaw, deposit.txHash]), [
          ["CONFIRMING", amount.toString(), txHash]
        ])
        assert.strictEqual(seen[0].destination.address, wallet.address)

        yield* promise(() => node.mine(1))
        yield* scan
        const credited = yield* deposits(tenant)
        assert.deepStrictEqual(credited.map((deposit) => [deposit.status, deposit.subStatus]), [["COMPLETED", null]])
        assert.strictEqual(yield* available(tenant, wallet.walletId), credited[0].netAmountRaw)
        assert.strictEqual(BigInt(credited[0].netAmountRaw), amount - BigInt(credited[0].feeRaw))

        // Both blocks replaced by three, the payment double-spent: it is on the chain no more.
        yield* promise(() => node.reorg(2, txHash))
        yield* scan
        assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => deposit.status), ["REVERSED"])
        assert.strictEqual(yield* available(tenant, wallet.walletId), "0")
      }), 120_000)

    it.effect("an unconfirmed deposit whose block a reorg replaces and whose transaction is double-spent is DROPPED, never credited", () =>
      Effect.gen(function*() {
        yield* scan
        const tenant = yield* provisionTenant()
        const wallet = yield* depositAddress(tenant, "bob")
        const paid = yield* promise(() => node.pay(wallet.address, "test", 250_000n))
        yield* scan
        assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => deposit.status), ["CONFIRMING"])

        yield* promise(() => node.reorg(1, paid.txHash))
        yield* scan
        assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => [deposit.status, deposit.subStatus]), [["FAILED", "DROPPED"]])
        yield* promise(() => node.mine(3))
        yield* scan
        assert.deepStrictEqual((yield* deposits(tenant)).map((deposit) => deposit.status), ["FAILED"])
        const balance = yield* available(tenant, wallet.walletId)
        assert.include([undefined, "0"], balance)
      }), 120_000)
  }
)
