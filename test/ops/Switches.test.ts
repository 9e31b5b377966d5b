/**
 * The operator's switches (operator-interface.md, "Switches"), driven through the operator listener and observed
 * through /v1 and the developer chain as a tenant would see them: a network's deposit and withdrawal switches and
 * watch, an asset's status and withdrawal switch, a wallet's ACTIVE / HIDDEN / FROZEN. What each implies comes from
 * the tenant spec (sections 2 and 4.4: `ASSET_DISABLED`, `WALLET_NOT_ACTIVE`, wallet address items) and decisions.md
 * ("Deposits": `MANUAL_REVIEW` until an operator credits it). Switches are platform-wide, so every test puts back
 * what it switched; this file has its own database.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import type { CatalogAsset, CatalogNetwork } from "../../src/catalog/Catalog.ts"
import { makeSwitchView } from "../../src/catalog/Switches.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { expectError, fund, settings } from "../support/Funds.ts"
import {
  makeTestAppLayer,
  opsClient,
  opsRequest,
  provisionTenant,
  rawRequest,
  type RawResponse,
  testMnemonic,
  testOpsToken,
  type TestTenant
} from "../support/TestApp.ts"
import { freePort, makeDataDir, spawnService, stopService, waitForHealth } from "../e2e/ServiceProcess.ts"
import { hotWalletBalanceDefault } from "../../src/chains/simulated/SimulatedChain.ts"
import { devnet, getTransaction, waitFor } from "../withdrawals/WithdrawalHelpers.ts"

const ops = opsRequest

const ok = (response: RawResponse) => {
  assert.strictEqual(response.status, 200, response.text)
  return response.json
}

const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method, target, tenant, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })

const btc = "BTC_TESTNET_BTC"
const btcTo = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx"

const walletOf = (tenant: TestTenant, customerRefId: string, networkKey = "BTC_TESTNET") =>
  Effect.gen(function*() {
    const response = yield* call(tenant, "POST", `/v1/users/${customerRefId}/deposit_address`, { networkKey })
    assert.strictEqual(response.json.status, "READY", response.text)
    return { walletId: response.json.walletId as string, address: response.json.address as string }
  })

/** A second wallet of the user in the family (POST /v1/wallets), waited for until ACTIVE. */
const secondWallet = (tenant: TestTenant, customerRefId: string) =>
  Effect.gen(function*() {
    const created = yield* rawRequest({
      baseUrl: tenant.baseUrl,
      method: "POST",
      target: "/v1/wallets",
      tenant,
      body: JSON.stringify({ customerRefId, chainFamily: "BTC" }),
      headers: { "idempotency-key": `second-${customerRefId}` }
    })
    assert.strictEqual(created.status, 202, created.text)
    for (let attempt = 0; attempt < 200; attempt++) {
      const wallet = (yield* call(tenant, "GET", `/v1/wallets/${created.json.id}`)).json
      if (wallet.status === "ACTIVE") return wallet.id as string
      yield* Effect.sleep("50 millis")
    }
    return assert.fail("the second wallet never became ACTIVE")
  })

let externalTxIds = 0
/** A fresh idempotency key per submission: each call here is a new request. */
const nextExternalTxId = () => `switches-${++externalTxIds}`

const withdraw = (tenant: TestTenant, walletId: string, amountRaw = "60000") =>
  call(tenant, "POST", "/v1/transactions", {
    assetId: btc,
    source: { type: "WALLET", id: walletId },
    destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: btcTo } },
    amountRaw,
    externalTxId: nextExternalTxId()
  })

const transfer = (tenant: TestTenant, from: string, to: string, amountRaw = "1000") =>
  call(tenant, "POST", "/v1/transactions", {
    assetId: btc,
    source: { type: "WALLET", id: from },
    destination: { type: "WALLET", id: to },
    amountRaw,
    externalTxId: nextExternalTxId()
  })

const supportedAsset = (tenant: TestTenant, assetId: string) =>
  Effect.map(call(tenant, "GET", "/v1/supported_assets"), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return (response.json as Array<any>).find((asset) => asset.assetId === assetId)
  })

const addresses = (tenant: TestTenant, walletId: string) =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/addresses`), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json as Array<any>
  })

const balance = (tenant: TestTenant, walletId: string) =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/assets`), (response) => {
    const item = (response.json as Array<any>).find((entry) => entry.assetId === btc)
    return item === undefined ? "0" : item.available as string
  })

/** Sends on the simulated BTC chain and mines the two confirmations BTC_TESTNET credits at; the newest deposit. */
const depositAndConfirm = (tenant: TestTenant, address: string, amountRaw: bigint) =>
  Effect.gen(function*() {
    const client = yield* opsClient
    yield* client.devnet.transfer({ params: { networkKey: "BTC_TESTNET" }, payload: { to: address, assetId: btc, amountRaw } })
    yield* client.devnet.mine({ params: { networkKey: "BTC_TESTNET" }, payload: { count: 2 } })
    const response = yield* call(tenant, "GET", "/v1/transactions?kind=DEPOSIT")
    return response.json.items[0]
  }).pipe(Effect.orDie)

const creditByOperator = (tenant: TestTenant, depositId: string) =>
  Effect.flatMap(opsClient, (client) => client.manual.creditDeposit({ params: { tenantId: tenant.tenantId, id: depositId } }))
    .pipe(Effect.orDie)

const switchNetwork = (networkKey: string, body: Record<string, unknown>) =>
  Effect.map(ops("PATCH", `/ops/networks/${networkKey}`, body), ok)
const switchAsset = (assetId: string, body: Record<string, unknown>) =>
  Effect.map(ops("PATCH", `/ops/assets/${assetId}`, body), ok)
const switchWallet = (tenant: TestTenant, walletId: string, status: string) =>
  ops("PATCH", `/ops/tenants/${tenant.tenantId}/wallets/${walletId}`, { status })

/** Runs `test`, then puts every BTC switch back on, whatever happened. */
const restoringBtc = <A, E, R>(test: Effect.Effect<A, E, R>) =>
  test.pipe(Effect.ensuring(Effect.orDie(Effect.all([
    switchNetwork("BTC_TESTNET", { depositEnabled: true, withdrawEnabled: true, watch: "ACTIVE" }),
    switchAsset(btc, { status: "ENABLED", withdrawEnabled: true })
  ]))))

const changes = (targetId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ target: string; change: Record<string, unknown>; changed_at: Date; tenant_id: string | null }>`
      SELECT target, change, changed_at, tenant_id FROM switch_changes WHERE target_id = ${targetId} ORDER BY id`
  }).pipe(Effect.orDie)

/**
 * A funded wallet's withdrawal caught QUEUED (the hot wallet short: the only way to catch one before it signs), then
 * `hold`: covering the hot wallet re-asks it at once (DevnetHandlers), and it must stay QUEUED with nothing signed.
 * Then `release` must send it at once, not at the supervisor's sweep 10-20 s later (withdrawalStuckAfterMillis).
 */
const heldWhileQueued = <R>(
  tenant: TestTenant,
  walletId: string,
  hold: Effect.Effect<void, never, R>,
  release: Effect.Effect<void, never, R>
) =>
  Effect.gen(function*() {
    yield* fund(tenant, walletId, btc, 1_000_000n)
    yield* devnet("BTC_TESTNET", { hotWalletBalance: { [btc]: 0n } })
    const submitted = yield* withdraw(tenant, walletId)
    assert.strictEqual(submitted.status, 202, submitted.text)
    const id = submitted.json.transactionId as string
    yield* waitFor(tenant, id, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")

    yield* hold
    yield* devnet("BTC_TESTNET", { hotWalletBalance: { [btc]: hotWalletBalanceDefault } })
    yield* Effect.sleep("1500 millis")
    const held = yield* getTransaction(tenant, id)
    assert.deepStrictEqual([held.status, held.txHash], ["QUEUED", null])
    const sql = yield* SqlClient.SqlClient
    assert.lengthOf(yield* sql`SELECT 1 FROM outgoing_sends WHERE owner_id = ${id}`.pipe(Effect.orDie), 0)

    const released = Date.now()
    yield* release
    const sent = yield* waitFor(tenant, id, "CONFIRMING")
    assert.isString(sent.txHash)
    assert.isBelow(Date.now() - released, 5_000)
  }).pipe(Effect.ensuring(devnet("BTC_TESTNET", { hotWalletBalance: { [btc]: hotWalletBalanceDefault } })))

layer(makeTestAppLayer(), { excludeTestServices: true, timeout: 120_000 })("operator switches", (it) => {
  describe("network", () => {
    it.effect("PATCH /ops/networks/{networkKey}: 200 {networkKey, depositEnabled, withdrawEnabled, watch}, stored with its time; 404 unknown; 422 bad body", () =>
      restoringBtc(Effect.gen(function*() {
        const before = Date.now()
        const earlier = (yield* changes("BTC_TESTNET")).length
        assert.deepStrictEqual(yield* switchNetwork("BTC_TESTNET", { withdrawEnabled: false }), {
          networkKey: "BTC_TESTNET",
          depositEnabled: true,
          withdrawEnabled: false,
          watch: "ACTIVE"
        })
        // Fields not sent keep their value.
        assert.deepStrictEqual(yield* switchNetwork("BTC_TESTNET", { watch: "FROZEN" }), {
          networkKey: "BTC_TESTNET",
          depositEnabled: true,
          withdrawEnabled: false,
          watch: "FROZEN"
        })
        // Setting what is already set changes nothing and is not a change in the history.
        yield* switchNetwork("BTC_TESTNET", { watch: "FROZEN", depositEnabled: true })
        const stored = (yield* changes("BTC_TESTNET")).slice(earlier)
        assert.deepStrictEqual(stored.map((row) => [row.target, row.change]), [
          ["NETWORK", { withdrawEnabled: false }],
          ["NETWORK", { watch: "FROZEN" }]
        ])
        for (const row of stored) assert.isAtLeast(row.changed_at.getTime(), before - 1_000)

        const unknown = yield* ops("PATCH", "/ops/networks/NOPE", { withdrawEnabled: false })
        expectError(unknown, 404, "NOT_FOUND")
        expectError(yield* ops("PATCH", "/ops/networks/BTC_TESTNET", { watch: "PAUSED" }), 422, "BAD_REQUEST")
        expectError(yield* ops("PATCH", "/ops/networks/BTC_TESTNET", { depositEnabled: "no" }), 422, "BAD_REQUEST")
      })))

    it.effect("withdraw switch off: shown as networkWithdrawEnabled false, withdrawals and estimates refused with 422 ASSET_DISABLED, nothing frozen; on again: accepted", () =>
      restoringBtc(Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "nina")
        yield* fund(tenant, walletId, btc, 1_000_000n)
        yield* switchNetwork("BTC_TESTNET", { withdrawEnabled: false })
        const shown = yield* supportedAsset(tenant, btc)
        assert.deepStrictEqual(
          [shown.status, shown.withdrawEnabled, shown.networkWithdrawEnabled, shown.networkDepositEnabled],
          ["ENABLED", true, false, true]
        )
        expectError(yield* withdraw(tenant, walletId), 422, "ASSET_DISABLED")
        const estimate = yield* call(tenant, "POST", "/v1/transactions/estimate_fee", {
          assetId: btc,
          sourceWalletId: walletId,
          amountRaw: "60000",
          destination: btcTo
        })
        expectError(estimate, 422, "ASSET_DISABLED")
        assert.strictEqual(yield* balance(tenant, walletId), "1000000")
        // Internal transfers are not withdrawals: the switch does not touch them.
        const other = yield* walletOf(tenant, "oscar")
        assert.strictEqual((yield* transfer(tenant, walletId, other.walletId)).status, 202)

        yield* switchNetwork("BTC_TESTNET", { withdrawEnabled: true })
        assert.isTrue((yield* supportedAsset(tenant, btc)).networkWithdrawEnabled)
        const accepted = yield* withdraw(tenant, walletId)
        assert.strictEqual(accepted.status, 202, accepted.text)
        assert.strictEqual(accepted.json.status, "SUBMITTED")
      })))

    it.effect("withdraw switch off: a withdrawal already QUEUED waits there, nothing signed, though the hot wallet covers it; on again: it goes on at once", () =>
      restoringBtc(Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "quentin")
        yield* heldWhileQueued(
          tenant,
          walletId,
          Effect.asVoid(switchNetwork("BTC_TESTNET", { withdrawEnabled: false })),
          Effect.asVoid(switchNetwork("BTC_TESTNET", { withdrawEnabled: true }))
        )
      })))

    it.effect("withdraw switch off when a withdrawal leaves SUBMITTED: the queue transition reads the switch with its own statement; it waits QUEUED, nothing signed", () =>
      restoringBtc(Effect.gen(function*() {
        // The processor's SUBMITTED step queues the withdrawal and reads what the QUEUED step needs in the same
        // statement (WithdrawalProcessor.ts `readForQueued`); that read must see the switch as stored then.
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "sybil")
        yield* fund(tenant, walletId, btc, 1_000_000n)
        // Held at PENDING_AUTHORIZATION (the entity stops there), then put back to SUBMITTED by hand with no threshold
        // left: the processor then runs SUBMITTED -> QUEUED -> the QUEUED step in one call.
        yield* settings(tenant, { withdrawalApprovalAbove: { [btc]: "1" } })
        const submitted = yield* withdraw(tenant, walletId)
        assert.strictEqual(submitted.status, 202, submitted.text)
        const id = submitted.json.transactionId as string
        yield* waitFor(tenant, id, "PENDING_AUTHORIZATION")
        yield* settings(tenant, { withdrawalApprovalAbove: {} })
        yield* switchNetwork("BTC_TESTNET", { withdrawEnabled: false })
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE transactions SET status = 'SUBMITTED', sub_status = NULL WHERE id = ${id}`.pipe(Effect.orDie)

        const processor = yield* WithdrawalProcessor
        assert.strictEqual(yield* processor.process(id), "QUEUED")
        assert.lengthOf(yield* sql`SELECT 1 FROM outgoing_sends WHERE owner_id = ${id}`.pipe(Effect.orDie), 0)

        yield* switchNetwork("BTC_TESTNET", { withdrawEnabled: true })
        const sent = yield* waitFor(tenant, id, "CONFIRMING")
        assert.isString(sent.txHash)
      })))

    it.effect("watch FROZEN: addresses show watchStatus FROZEN without the address, deposit_address hands out none; a deposit ends COMPLETED/MANUAL_REVIEW, credited only by the operator", () =>
      restoringBtc(Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* walletOf(tenant, "paula")
        yield* switchNetwork("BTC_TESTNET", { watch: "FROZEN" })
        const [item] = (yield* addresses(tenant, walletId)).filter((entry) => entry.networkKey === "BTC_TESTNET")
        assert.deepStrictEqual([item.watchStatus, item.address], ["FROZEN", null])
        // Spec 2: with the watch FROZEN the address is null and must not be shown to users, by any route.
        const handedOut = yield* call(tenant, "POST", "/v1/users/paula/deposit_address", { networkKey: "BTC_TESTNET" })
        assert.deepStrictEqual([handedOut.json.walletId, handedOut.json.address, handedOut.json.status], [walletId, null, "PROVISIONING"])

        const held = yield* depositAndConfirm(tenant, address, 50_000n)
        assert.deepStrictEqual([held.status, held.subStatus, held.netAmountRaw], ["COMPLETED", "MANUAL_REVIEW", null])
        assert.strictEqual(yield* balance(tenant, walletId), "0")
        // Unfreezing the watch does not credit what was held: only the operator does.
        yield* switchNetwork("BTC_TESTNET", { watch: "ACTIVE" })
        const [again] = (yield* addresses(tenant, walletId)).filter((entry) => entry.networkKey === "BTC_TESTNET")
        assert.deepStrictEqual([again.watchStatus, again.address], ["ACTIVE", address])
        assert.deepStrictEqual(yield* walletOf(tenant, "paula"), { walletId, address })
        assert.strictEqual(yield* balance(tenant, walletId), "0")
        const credited = yield* creditByOperator(tenant, held.id)
        assert.deepStrictEqual([credited.status, credited.subStatus], ["COMPLETED", null])
        assert.strictEqual(yield* balance(tenant, walletId), "50000")
      })))

    it.effect("deposit switch off: networkDepositEnabled false, the network leaves the wallet's addresses, deposit_address hands out no address, arrivals are held for manual review", () =>
      restoringBtc(Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* walletOf(tenant, "quinn")
        yield* switchNetwork("BTC_TESTNET", { depositEnabled: false })
        assert.isFalse((yield* supportedAsset(tenant, btc)).networkDepositEnabled)
        assert.deepStrictEqual((yield* addresses(tenant, walletId)).filter((entry) => entry.networkKey === "BTC_TESTNET"), [])
        // The same rule as the address items (docs/wallets.md, "Deposit addresses"): no address where deposits are off.
        const handedOut = yield* call(tenant, "POST", "/v1/users/quinn/deposit_address", { networkKey: "BTC_TESTNET" })
        assert.deepStrictEqual([handedOut.json.walletId, handedOut.json.address, handedOut.json.status], [walletId, null, "PROVISIONING"])
        const held = yield* depositAndConfirm(tenant, address, 50_000n)
        assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        assert.strictEqual(yield* balance(tenant, walletId), "0")
      })))
  })

  describe("asset", () => {
    it.effect("PATCH /ops/assets/{assetId}: 200 asset as /v1 shows it, stored with its time; 404 unknown; 422 a status that cannot be set", () =>
      restoringBtc(Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const earlier = (yield* changes(btc)).length
        const answered = yield* switchAsset(btc, { withdrawEnabled: false })
        assert.deepStrictEqual(answered, yield* supportedAsset(tenant, btc))
        assert.deepStrictEqual(
          [answered.assetId, answered.status, answered.withdrawEnabled, answered.networkWithdrawEnabled],
          [btc, "ENABLED", false, true]
        )
        assert.deepStrictEqual((yield* changes(btc)).slice(earlier).map((row) => [row.target, row.change]), [
          ["ASSET", { withdrawEnabled: false }]
        ])
        // The typed operator client (src/client/OpsClient.ts) reaches the same route.
        const client = yield* opsClient
        const typed = yield* client.switches.asset({ params: { assetId: btc }, payload: { withdrawEnabled: true } })
          .pipe(Effect.orDie)
        assert.deepStrictEqual([typed.assetId, typed.withdrawEnabled], [btc, true])
        const typedNetwork = yield* client.switches.network({ params: { networkKey: "BTC_TESTNET" }, payload: {} })
          .pipe(Effect.orDie)
        assert.deepStrictEqual(typedNetwork, { networkKey: "BTC_TESTNET", depositEnabled: true, withdrawEnabled: true, watch: "ACTIVE" })
        expectError(yield* ops("PATCH", "/ops/assets/NOPE", { withdrawEnabled: false }), 404, "NOT_FOUND")
        // DISABLED is the catalog's, not a switch.
        expectError(yield* ops("PATCH", `/ops/assets/${btc}`, { status: "DISABLED" }), 422, "BAD_REQUEST")
      })))

    it.effect("withdrawEnabled false: 422 ASSET_DISABLED at submission; the network's other assets unaffected", () =>
      restoringBtc(Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "rita")
        yield* fund(tenant, walletId, btc, 1_000_000n)
        yield* switchAsset(btc, { withdrawEnabled: false })
        assert.isFalse((yield* supportedAsset(tenant, btc)).withdrawEnabled)
        expectError(yield* withdraw(tenant, walletId), 422, "ASSET_DISABLED")
        assert.isTrue((yield* supportedAsset(tenant, "ETH_SEPOLIA_ETH")).withdrawEnabled)
        yield* switchAsset(btc, { withdrawEnabled: true })
        assert.strictEqual((yield* withdraw(tenant, walletId)).status, 202)
      })))

    it.effect("DEPOSIT_PAUSED: status and depositPaused shown, withdrawals refused (status must be ENABLED), arrivals COMPLETED/MANUAL_REVIEW until the operator credits", () =>
      restoringBtc(Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* walletOf(tenant, "sam")
        yield* fund(tenant, walletId, btc, 1_000_000n)
        const answered = yield* switchAsset(btc, { status: "DEPOSIT_PAUSED" })
        assert.strictEqual(answered.status, "DEPOSIT_PAUSED")
        assert.strictEqual((yield* supportedAsset(tenant, btc)).status, "DEPOSIT_PAUSED")
        const [item] = (yield* addresses(tenant, walletId)).filter((entry) => entry.networkKey === "BTC_TESTNET")
        assert.isTrue(item.supportedAssets.find((asset: any) => asset.assetId === btc).depositPaused)
        // The address is still handed out: arrivals are not lost, they wait for the operator.
        assert.strictEqual(item.address, address)
        expectError(yield* withdraw(tenant, walletId), 422, "ASSET_DISABLED")

        const held = yield* depositAndConfirm(tenant, address, 70_000n)
        assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        assert.strictEqual(yield* balance(tenant, walletId), "1000000")
        const credited = yield* creditByOperator(tenant, held.id)
        assert.deepStrictEqual([credited.status, credited.subStatus], ["COMPLETED", null])
        assert.strictEqual(yield* balance(tenant, walletId), "1070000")
      })))
  })

  describe("wallet", () => {
    it.effect("FROZEN: cannot send (422 WALLET_NOT_ACTIVE, on chain or not), cannot receive a transfer, no address shown, deposits held for the operator; ACTIVE again sends", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const frozen = yield* walletOf(tenant, "tara")
        const other = yield* walletOf(tenant, "uma")
        yield* fund(tenant, frozen.walletId, btc, 1_000_000n)
        yield* fund(tenant, other.walletId, btc, 1_000_000n)

        const answered = yield* switchWallet(tenant, frozen.walletId, "FROZEN")
        assert.strictEqual(answered.status, 200, answered.text)
        assert.deepStrictEqual(
          [answered.json.id, answered.json.tenantId, answered.json.status, answered.json.address],
          [frozen.walletId, tenant.tenantId, "FROZEN", frozen.address]
        )
        assert.strictEqual((yield* call(tenant, "GET", `/v1/wallets/${frozen.walletId}`)).json.status, "FROZEN")

        expectError(yield* withdraw(tenant, frozen.walletId), 422, "WALLET_NOT_ACTIVE")
        expectError(yield* transfer(tenant, frozen.walletId, other.walletId), 422, "WALLET_NOT_ACTIVE")
        expectError(yield* transfer(tenant, other.walletId, frozen.walletId), 422, "WALLET_NOT_ACTIVE")
        assert.strictEqual(yield* balance(tenant, frozen.walletId), "1000000")
        const [item] = (yield* addresses(tenant, frozen.walletId)).filter((entry) => entry.networkKey === "BTC_TESTNET")
        assert.isNull(item.address)
        // deposit_address hands out another wallet of the family (spec 4.2).
        const handedOut = yield* walletOf(tenant, "tara")
        assert.notStrictEqual(handedOut.walletId, frozen.walletId)

        const held = yield* depositAndConfirm(tenant, frozen.address, 50_000n)
        assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        assert.strictEqual(yield* balance(tenant, frozen.walletId), "1000000")
        yield* creditByOperator(tenant, held.id)
        assert.strictEqual(yield* balance(tenant, frozen.walletId), "1050000")

        assert.strictEqual((yield* switchWallet(tenant, frozen.walletId, "ACTIVE")).status, 200)
        assert.strictEqual((yield* transfer(tenant, frozen.walletId, other.walletId)).status, 202)
        assert.strictEqual((yield* withdraw(tenant, frozen.walletId)).status, 202)
        assert.deepStrictEqual((yield* changes(frozen.walletId)).map((row) => [row.target, row.change, row.tenant_id]), [
          ["WALLET", { status: "FROZEN" }, tenant.tenantId],
          ["WALLET", { status: "ACTIVE" }, tenant.tenantId]
        ])
      }))

    it.effect("FROZEN after submission: a QUEUED withdrawal waits, nothing signed, though the hot wallet covers it; ACTIVE again: it goes on at once", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "vera")
        const answered = (status: string) =>
          Effect.map(switchWallet(tenant, walletId, status), (response) => assert.strictEqual(response.status, 200, response.text))
        yield* heldWhileQueued(tenant, walletId, answered("FROZEN"), answered("ACTIVE"))
      }))

    it.effect("FROZEN while an internal transfer awaits approval: the operator's approval is 422 WALLET_NOT_ACTIVE and moves nothing; a rejection releases", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "wanda")
        const recipient = yield* walletOf(tenant, "xena")
        yield* fund(tenant, payer.walletId, btc, 1_000_000n)
        yield* settings(tenant, { transferApprovalAbove: { [btc]: "1" } })
        const submitted = yield* transfer(tenant, payer.walletId, recipient.walletId, "5000")
        assert.strictEqual(submitted.status, 202, submitted.text)
        const id = submitted.json.transactionId as string
        assert.strictEqual((yield* getTransaction(tenant, id)).status, "PENDING_AUTHORIZATION")

        for (const [frozen, message] of [
          [payer.walletId, "the paying wallet is not active"],
          [recipient.walletId, "the recipient wallet cannot receive"]
        ] as const) {
          assert.strictEqual((yield* switchWallet(tenant, frozen, "FROZEN")).status, 200)
          const approval = yield* ops("POST", `/ops/tenants/${tenant.tenantId}/transactions/${id}/approve`)
          expectError(approval, 422, "WALLET_NOT_ACTIVE")
          assert.strictEqual(approval.json.error.message, message)
          assert.strictEqual((yield* getTransaction(tenant, id)).status, "PENDING_AUTHORIZATION")
          assert.strictEqual(yield* balance(tenant, recipient.walletId), "0")
          assert.strictEqual((yield* switchWallet(tenant, frozen, "ACTIVE")).status, 200)
        }
        yield* switchWallet(tenant, payer.walletId, "FROZEN")
        const rejected = ok(yield* ops("POST", `/ops/tenants/${tenant.tenantId}/transactions/${id}/reject`))
        assert.deepStrictEqual([rejected.status, rejected.subStatus], ["REJECTED", "REJECTED_BY_OPERATOR"])
        assert.strictEqual(yield* balance(tenant, payer.walletId), "1000000")
      }))

    it.effect("HIDDEN: cannot send (422 WALLET_NOT_ACTIVE); receives from its owner's other wallets only; on-chain deposits credited; no address shown", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const hidden = yield* walletOf(tenant, "vera")
        const ownSecond = yield* secondWallet(tenant, "vera")
        const stranger = yield* walletOf(tenant, "walt")
        yield* fund(tenant, hidden.walletId, btc, 1_000_000n)
        yield* fund(tenant, ownSecond, btc, 1_000_000n)
        yield* fund(tenant, stranger.walletId, btc, 1_000_000n)
        assert.strictEqual((yield* switchWallet(tenant, hidden.walletId, "HIDDEN")).json.status, "HIDDEN")

        expectError(yield* withdraw(tenant, hidden.walletId), 422, "WALLET_NOT_ACTIVE")
        expectError(yield* transfer(tenant, hidden.walletId, ownSecond), 422, "WALLET_NOT_ACTIVE")
        // Spec 2: "still receives transfers from the owner's other wallets" - and only from those.
        assert.strictEqual((yield* transfer(tenant, ownSecond, hidden.walletId)).status, 202)
        expectError(yield* transfer(tenant, stranger.walletId, hidden.walletId), 422, "WALLET_NOT_ACTIVE")
        expectError(
          yield* call(tenant, "POST", "/v1/transactions", {
            assetId: btc,
            source: { type: "WALLET", id: stranger.walletId },
            destination: { type: "END_USER", customerRefId: "vera" },
            amountRaw: "1000",
            externalTxId: nextExternalTxId()
          }),
          422,
          "WALLET_NOT_ACTIVE"
        )
        const [item] = (yield* addresses(tenant, hidden.walletId)).filter((entry) => entry.networkKey === "BTC_TESTNET")
        assert.isNull(item.address)
        // Spec 4.2: a hidden default wallet is passed over for another usable wallet of the family.
        assert.strictEqual((yield* walletOf(tenant, "vera")).walletId, ownSecond)

        // decisions.md holds only FROZEN wallets' deposits for review: a hidden wallet's are credited.
        const deposit = yield* depositAndConfirm(tenant, hidden.address, 50_000n)
        assert.deepStrictEqual([deposit.status, deposit.subStatus], ["COMPLETED", null])
        assert.strictEqual(yield* balance(tenant, hidden.walletId), String(1_000_000 + 1_000 + 50_000))
      }))

    it.effect("PATCH wallets: CLOSED and PROVISIONING cannot be set (422), unknown or another tenant's wallet 404, not a UUID 400", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const intruder = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "xena")
        for (const status of ["CLOSED", "PROVISIONING", "frozen"]) {
          expectError(yield* switchWallet(tenant, walletId, status), 422, "BAD_REQUEST", "status must be ACTIVE, HIDDEN or FROZEN")
        }
        expectError(yield* switchWallet(intruder, walletId, "FROZEN"), 404, "NOT_FOUND")
        expectError(yield* ops("PATCH", `/ops/tenants/${tenant.tenantId}/wallets/not-a-uuid`, { status: "FROZEN" }), 400, "BAD_REQUEST")
        expectError(
          yield* ops("PATCH", `/ops/tenants/${tenant.tenantId}/wallets/01900000-0000-7000-8000-000000000000`, { status: "FROZEN" }),
          404,
          "NOT_FOUND"
        )
        assert.strictEqual((yield* call(tenant, "GET", `/v1/wallets/${walletId}`)).json.status, "ACTIVE")
        assert.deepStrictEqual(yield* changes(walletId), [])

        // Wallets the operator cannot switch: one still provisioning (no address yet), one closed (for good).
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE wallets SET status = 'PROVISIONING', address = NULL WHERE id = ${walletId}`
        expectError(yield* switchWallet(tenant, walletId, "FROZEN"), 409, "INVALID_STATE", "the wallet is still provisioning")
        yield* sql`UPDATE wallets SET status = 'CLOSED', address = 'closed' WHERE id = ${walletId}`
        expectError(yield* switchWallet(tenant, walletId, "ACTIVE"), 409, "INVALID_STATE", "a closed wallet cannot be reopened")
      }))
  })

  it.effect("a switch only narrows: what the catalog or the chain client does not allow stays off whatever the switch says", () =>
    Effect.sync(() => {
      const network = { networkKey: "N", depositEnabled: true, withdrawEnabled: true } as CatalogNetwork
      const asset = { assetId: "A", networkKey: "N", status: "ENABLED", withdrawEnabled: true } as CatalogAsset
      // Every switch on, as the operator may have set it.
      const view = (capability: { watches: boolean; sends: boolean }) =>
        makeSwitchView({
          networks: new Map([["N", { depositEnabled: true, withdrawEnabled: true, watch: "ACTIVE" as const }]]),
          assets: new Map([["A", { status: "ENABLED" as const, withdrawEnabled: true }]]),
          capability: () => capability
        })
      const able = view({ watches: true, sends: true })
      assert.deepStrictEqual(able.network(network), { depositEnabled: true, withdrawEnabled: true, watch: "ACTIVE" })
      assert.isTrue(able.withdrawable(asset, network))
      // decisions.md, "Sending on real networks": no client that can send, no withdrawals; none that watches, no
      // deposits.
      const cannotSend = view({ watches: true, sends: false })
      assert.deepStrictEqual(cannotSend.network(network), { depositEnabled: true, withdrawEnabled: false, watch: "ACTIVE" })
      assert.isFalse(cannotSend.withdrawable(asset, network))
      assert.isFalse(view({ watches: false, sends: false }).network(network).depositEnabled)
      // The catalog's word stands too.
      assert.isFalse(able.network({ ...network, depositEnabled: false }).depositEnabled)
      assert.isFalse(able.withdrawable(asset, { ...network, withdrawEnabled: false }))
      assert.isFalse(able.withdrawable({ ...asset, withdrawEnabled: false }, network))
      assert.strictEqual(able.asset({ ...asset, status: "DEPOSIT_PAUSED" }).status, "DEPOSIT_PAUSED")
      assert.isFalse(able.withdrawable({ ...asset, status: "DEPOSIT_PAUSED" }, network))
    }))

  it.effect("another process on the same database sees a switch at once: set through one service, in force in the other's next request", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const { walletId } = yield* walletOf(tenant, "yuri")
      yield* fund(tenant, walletId, btc, 1_000_000n)
      const second = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const service = spawnService({
            dataDir: makeDataDir("coffer-switches-"),
            port: await freePort(),
            opsPort: await freePort(),
            env: {
              DATABASE_URL: process.env.DATABASE_URL!,
              OPS_TOKEN: testOpsToken,
              SERVICE_ENV: "development",
              SIGNER_MNEMONIC: testMnemonic
            }
          })
          try {
            await waitForHealth(service, testOpsToken, 90_000)
          } catch (error) {
            await stopService(service, 10_000)
            throw error
          }
          return service
        }),
        (service) => Effect.promise(() => stopService(service, 10_000))
      )
      const atSecond: TestTenant = { ...tenant, baseUrl: second.publicUrl }
      const opsAtSecond = (method: string, target: string, body: unknown) =>
        rawRequest({
          baseUrl: second.opsUrl,
          method,
          target,
          body: JSON.stringify(body),
          headers: { authorization: `Bearer ${testOpsToken}` }
        })

      yield* Effect.gen(function*() {
        // Set here, in force there.
        yield* switchNetwork("BTC_TESTNET", { withdrawEnabled: false })
        assert.isFalse((yield* supportedAsset(atSecond, btc)).networkWithdrawEnabled)
        expectError(yield* withdraw(atSecond, walletId), 422, "ASSET_DISABLED")
        yield* switchNetwork("BTC_TESTNET", { withdrawEnabled: true })
        assert.isTrue((yield* supportedAsset(atSecond, btc)).networkWithdrawEnabled)
        yield* switchAsset(btc, { status: "DEPOSIT_PAUSED" })
        assert.strictEqual((yield* supportedAsset(atSecond, btc)).status, "DEPOSIT_PAUSED")
        yield* switchAsset(btc, { status: "ENABLED" })

        // Set there, in force here.
        const frozen = yield* opsAtSecond("PATCH", `/ops/tenants/${tenant.tenantId}/wallets/${walletId}`, { status: "FROZEN" })
        assert.strictEqual(frozen.status, 200, frozen.text)
        expectError(yield* withdraw(tenant, walletId), 422, "WALLET_NOT_ACTIVE")
        const paused = yield* opsAtSecond("PATCH", `/ops/assets/${btc}`, { withdrawEnabled: false })
        assert.strictEqual(paused.status, 200, paused.text)
        assert.isFalse((yield* supportedAsset(tenant, btc)).withdrawEnabled)
      }).pipe(restoringBtc)
    }).pipe(Effect.scoped), { timeout: 180_000 })
})
