/**
 * A network no chain client serves (decisions.md, "Sending on real networks"): here SIMULATED_CHAINS is off and no
 * node is configured, the configuration a production service has for every network without a node in
 * CHAIN_RPC_URLS (chains/ChainClientsLayer.ts). Nobody watches and nobody can send there, so:
 * - `networkWithdrawEnabled` and `networkDepositEnabled` are false on its assets (spec 2, asset object);
 * - an on-chain withdrawal, and its `estimate_fee`, are 422 `ASSET_DISABLED` at submission (spec 4.4: requires
 *   `networkWithdrawEnabled = true`), nothing frozen and nothing created, instead of a withdrawal waiting QUEUED;
 * - no address is handed out (spec 2, wallet address item; decisions.md: watch status not `ACTIVE`, `address` null):
 *   `deposit_address` answers `address: null`, and the wallet's address items leave the network out (spec 2: only
 *   networks that allow deposits are listed).
 * Internal transfers are not withdrawals and still settle off-chain.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, expectError, fund } from "../support/Funds.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const btc = "BTC_TESTNET_BTC"
const btcTo = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx"

const waitActive = (tenant: TestTenant, walletId: string) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 200; attempt++) {
      const wallet = (yield* call(tenant, "GET", `/v1/wallets/${walletId}`)).json
      if (wallet.status === "ACTIVE") return wallet
      yield* Effect.sleep("50 millis")
    }
    return assert.fail(`wallet ${walletId} never became ACTIVE`)
  })

/** A BTC wallet made through POST /v1/wallets, waited for until ACTIVE (provisioning needs no chain client). */
const createWallet = (tenant: TestTenant, customerRefId: string) =>
  Effect.gen(function*() {
    const created = yield* rawRequest({
      baseUrl: tenant.baseUrl,
      method: "POST",
      target: "/v1/wallets",
      tenant,
      body: JSON.stringify({ customerRefId, chainFamily: "BTC" }),
      headers: { "idempotency-key": `wallet-${customerRefId}` }
    })
    assert.strictEqual(created.status, 202, created.text)
    return (yield* waitActive(tenant, created.json.id)).id as string
  })

layer(makeTestAppLayer({ simulatedChains: false }), { excludeTestServices: true, timeout: 120_000 })(
  "a network without a chain client (decisions.md, Sending on real networks)",
  (it) => {
    describe("withdrawals", () => {
      it.effect("networkWithdrawEnabled false; a withdrawal and its estimate are 422 ASSET_DISABLED at submission, nothing frozen or created; an internal transfer still settles", () =>
        Effect.gen(function*() {
          const tenant = yield* provisionTenant()
          const walletId = yield* createWallet(tenant, "wendy")
          const other = yield* createWallet(tenant, "xavier")
          yield* fund(tenant, walletId, btc, 1_000_000n)

          const asset = ((yield* call(tenant, "GET", "/v1/supported_assets")).json as Array<any>)
            .find((candidate) => candidate.assetId === btc)
          assert.deepStrictEqual(
            [asset.status, asset.withdrawEnabled, asset.networkWithdrawEnabled, asset.networkDepositEnabled],
            ["ENABLED", true, false, false]
          )

          const withdrawal = yield* call(tenant, "POST", "/v1/transactions", {
            assetId: btc,
            source: { type: "WALLET", id: walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: btcTo } },
            amountRaw: "60000",
            externalTxId: "no-client-1"
          })
          expectError(withdrawal, 422, "ASSET_DISABLED")
          const estimate = yield* call(tenant, "POST", "/v1/transactions/estimate_fee", {
            assetId: btc,
            sourceWalletId: walletId,
            amountRaw: "60000",
            destination: btcTo
          })
          expectError(estimate, 422, "ASSET_DISABLED")
          // Spec 4.4's order of checks holds: an address error still comes before ASSET_DISABLED.
          const badAddress = yield* call(tenant, "POST", "/v1/transactions/estimate_fee", {
            assetId: btc,
            sourceWalletId: walletId,
            amountRaw: "60000",
            destination: "not-an-address"
          })
          expectError(badAddress, 422, "INVALID_ADDRESS")

          const balances = (yield* call(tenant, "GET", `/v1/wallets/${walletId}/assets`)).json as Array<any>
          assert.deepStrictEqual(balances, [{ assetId: btc, available: "1000000", frozen: "0" }])
          const withdrawals = yield* call(tenant, "GET", "/v1/transactions?kind=WITHDRAWAL")
          assert.deepStrictEqual(withdrawals.json.items, [])

          const transfer = yield* call(tenant, "POST", "/v1/transactions", {
            assetId: btc,
            source: { type: "WALLET", id: walletId },
            destination: { type: "WALLET", id: other },
            amountRaw: "1000",
            externalTxId: "no-client-2"
          })
          assert.strictEqual(transfer.status, 202, transfer.text)
          assert.deepStrictEqual([transfer.json.settlement, transfer.json.status], ["OFF_CHAIN", "COMPLETED"])
        }))
    })

    describe("addresses", () => {
      it.effect("deposit_address answers address null (PROVISIONING) and the address items leave the network out: an address nobody watches is never handed out", () =>
        Effect.gen(function*() {
          const tenant = yield* provisionTenant()
          const first = yield* call(tenant, "POST", "/v1/users/yara/deposit_address", { networkKey: "BTC_TESTNET" })
          assert.strictEqual(first.status, 200, first.text)
          assert.deepStrictEqual([first.json.address, first.json.status], [null, "PROVISIONING"])
          const walletId = first.json.walletId as string
          // The wallet itself is provisioned (its address derived); only handing it out waits for a watcher.
          yield* waitActive(tenant, walletId)
          const again = yield* call(tenant, "POST", "/v1/users/yara/deposit_address", { networkKey: "BTC_TESTNET" })
          assert.deepStrictEqual([again.json.walletId, again.json.address, again.json.status], [walletId, null, "PROVISIONING"])

          const items = yield* call(tenant, "GET", `/v1/wallets/${walletId}/addresses`)
          assert.strictEqual(items.status, 200, items.text)
          assert.deepStrictEqual(items.json, [])
        }))
    })
  }
)
