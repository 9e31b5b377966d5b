/**
 * Deposits end to end on the simulated chain (spec section 3, decisions.md "Deposits" and "Confirmations"): a
 * transfer to a deposit address is recorded CONFIRMING, credited net of the fee once the network's rule is met,
 * held or not credited where decisions.md says so, and dropped or reversed by reorganizations. Driven through the
 * operator's developer-chain routes and read back through /v1, as a tenant's engineer would.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { OpsAddress } from "../../src/App.ts"
import { SimulatedChain } from "../../src/chains/simulated/SimulatedChain.ts"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { assetFees } from "../support/Funds.ts"
import { deposits, get, networkCalls } from "../support/NetworkCalls.ts"
import {
  makeTestAppLayer,
  opsClient,
  provisionTenant,
  rawRequest,
  type TestTenant,
  testOpsToken
} from "../support/TestApp.ts"

const depositAddress = (tenant: TestTenant, customerRefId: string, networkKey: string) =>
  networkCalls(networkKey).depositAddress(tenant, customerRefId)

const send = (networkKey: string, to: string, assetId: string, amountRaw: bigint) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    const { txHash } = yield* ops.devnet.transfer({ params: { networkKey }, payload: { to, assetId, amountRaw } })
    return txHash
  }).pipe(Effect.orDie)

const mine = (networkKey: string, count = 1) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    return (yield* ops.devnet.mine({ params: { networkKey }, payload: { count } })).height
  }).pipe(Effect.orDie)

const reorg = (networkKey: string, depth: number) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    return (yield* ops.devnet.reorg({ params: { networkKey }, payload: { depth } })).height
  }).pipe(Effect.orDie)

const events = (tenantId: string, subjectId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ event_type: string; data: any }>`
      SELECT event_type, data FROM outbox_events WHERE tenant_id = ${tenantId} AND subject_id = ${subjectId}
      ORDER BY created_at, id`
  })

/**
 * The wallet's balance rows as served, `frozen` included (NetworkCalls' `balances` keeps [assetId, available] only,
 * and these assertions hold `frozen` too).
 */
const balances = (tenant: TestTenant, walletId: string) =>
  Effect.map(get(tenant, `/v1/wallets/${walletId}/assets`), (response) => response.json)

layer(makeTestAppLayer(), { excludeTestServices: true })("deposits on the simulated chain", (it) => {
  describe("confirmation and crediting", () => {
    it.effect("CONFIRMING when mined; credited net of the tenant's fee at the 12th confirmation, once", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        yield* ops.tenants.update({
          params: { tenantId: tenant.tenantId },
          payload: { settings: { depositFees: { ETH_SEPOLIA_ETH: "1000000000000000" } } }
        }).pipe(Effect.orDie)
        const { walletId, address } = yield* depositAddress(tenant, "alice", "ETH_SEPOLIA")
        const amount = 5n * 10n ** 17n
        // The address is handed out lowercase; a checksummed spelling of it is the same address.
        const txHash = yield* send("ETH_SEPOLIA", address, "ETH_SEPOLIA_ETH", amount)
        assert.match(txHash, /^0x[0-9a-f]{64}$/)
        assert.deepStrictEqual(yield* deposits(tenant), [], "pending transfers are not deposits yet")

        const minedAt = yield* mine("ETH_SEPOLIA")
        const [seen] = yield* deposits(tenant)
        assert.strictEqual(seen.status, "CONFIRMING")
        assert.isNull(seen.subStatus)
        assert.strictEqual(seen.kind, "DEPOSIT")
        assert.strictEqual(seen.settlement, "ON_CHAIN")
        assert.strictEqual(seen.amountRaw, amount.toString())
        assert.isNull(seen.feeRaw)
        assert.isNull(seen.netAmountRaw)
        assert.strictEqual(seen.txHash, txHash)
        assert.strictEqual(seen.destination.walletId, walletId)
        assert.strictEqual(seen.destination.address, address)
        assert.strictEqual(seen.destination.customerRefId, "alice")
        assert.deepStrictEqual(yield* balances(tenant, walletId), [])

        // Block h is confirmation 1: with n = 12 it is credited when the head reaches h + 11.
        yield* mine("ETH_SEPOLIA", 10)
        assert.strictEqual((yield* deposits(tenant))[0].status, "CONFIRMING", "11 confirmations are not enough")
        const creditedAt = yield* mine("ETH_SEPOLIA")
        assert.strictEqual(creditedAt, minedAt + 11)
        const [credited] = yield* deposits(tenant)
        assert.strictEqual(credited.id, seen.id)
        assert.strictEqual(credited.status, "COMPLETED")
        assert.isNull(credited.subStatus)
        assert.strictEqual(credited.feeRaw, "1000000000000000")
        assert.strictEqual(credited.netAmountRaw, (amount - 10n ** 15n).toString())
        assert.deepStrictEqual(yield* balances(tenant, walletId), [
          { assetId: "ETH_SEPOLIA_ETH", available: (amount - 10n ** 15n).toString(), frozen: "0" }
        ])

        // More blocks and more scans change nothing: one record, one credit.
        yield* mine("ETH_SEPOLIA", 3)
        yield* networkCalls("ETH_SEPOLIA").scan
        assert.lengthOf(yield* deposits(tenant), 1)
        assert.deepStrictEqual((yield* balances(tenant, walletId))[0].available, (amount - 10n ** 15n).toString())

        const published = yield* events(tenant.tenantId, seen.id)
        assert.deepStrictEqual(published.map((event) => [event.event_type, event.data.status]), [
          ["TRANSACTION_CREATED", "CONFIRMING"],
          ["TRANSACTION_STATUS_UPDATED", "COMPLETED"]
        ])
        assert.strictEqual(published[1]!.data.netAmountRaw, (amount - 10n ** 15n).toString())
        const other = yield* provisionTenant()
        assert.strictEqual((yield* get(other, `/v1/transactions/${seen.id}`)).status, 404)
      }))

    it.effect("concurrent scans (as from several processes) record and credit each deposit once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { scan } = networkCalls("ETH_SEPOLIA")
        const tenant = yield* provisionTenant()
        const targets = yield* Effect.forEach(["p1", "p2", "p3"], (user) => depositAddress(tenant, user, "ETH_SEPOLIA"))
        // Mined straight on the simulated chain's tables, so no scan runs before the racing ones below.
        const simulated = yield* SimulatedChain
        for (const target of targets) {
          yield* simulated.transfer({ networkKey: "ETH_SEPOLIA", to: target.address, assetId: "ETH_SEPOLIA_ETH", amount: 10n ** 16n })
        }
        yield* simulated.mine("ETH_SEPOLIA", 12)
        yield* Effect.all(Array.from({ length: 6 }, () => scan), { concurrency: "unbounded" })
        const recorded = yield* deposits(tenant)
        assert.lengthOf(recorded, 3)
        assert.isTrue(recorded.every((deposit) => deposit.status === "COMPLETED" && deposit.subStatus === null))
        // Credited net of the deposit fee in force (fee rule 2, with rule 3's dynamic floor).
        const fee = (yield* assetFees(tenant, "ETH_SEPOLIA_ETH")).deposit
        for (const target of targets) {
          assert.deepStrictEqual((yield* balances(tenant, target.walletId))[0].available, (10n ** 16n - fee).toString())
        }
        const [entries] = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM ledger_entries WHERE tenant_id = ${tenant.tenantId} AND kind = 'DEPOSIT_CREDIT'`
        assert.strictEqual(entries!.n, 3)
      }))

    it.effect("below minDeposit, or not above the fee: COMPLETED with BELOW_MIN_DEPOSIT and not credited", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* depositAddress(tenant, "bob", "BTC_TESTNET")
        assert.match(address, /^tb1q/)
        yield* send("BTC_TESTNET", address, "BTC_TESTNET_BTC", 9_999n) // minDeposit is 10,000 sat
        yield* mine("BTC_TESTNET", 2)
        const ops = yield* opsClient
        yield* ops.tenants.update({
          params: { tenantId: tenant.tenantId },
          payload: { settings: { depositFees: { BTC_TESTNET_BTC: "20000" } } }
        }).pipe(Effect.orDie)
        yield* send("BTC_TESTNET", address, "BTC_TESTNET_BTC", 20_000n) // equal to the fee: nothing would be left
        yield* send("BTC_TESTNET", address, "BTC_TESTNET_BTC", 20_001n)
        yield* mine("BTC_TESTNET", 2)
        const [credited, atFee, belowMin] = yield* deposits(tenant)
        assert.deepStrictEqual(
          [belowMin, atFee].map((deposit) => [deposit.status, deposit.subStatus, deposit.feeRaw, deposit.netAmountRaw]),
          [["COMPLETED", "BELOW_MIN_DEPOSIT", null, null], ["COMPLETED", "BELOW_MIN_DEPOSIT", null, null]]
        )
        assert.deepStrictEqual([credited.status, credited.subStatus, credited.netAmountRaw], ["COMPLETED", null, "1"])
        assert.deepStrictEqual(yield* balances(tenant, walletId), [
          { assetId: "BTC_TESTNET_BTC", available: "1", frozen: "0" }
        ])
      }))

    it.effect("a frozen watch holds the deposit for manual review, uncredited, until the operator credits it", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* depositAddress(tenant, "carol", "TRON_NILE")
        yield* sql`UPDATE wallet_addresses SET watch_status = 'FROZEN' WHERE wallet_id = ${walletId}`
        yield* send("TRON_NILE", address, "TRON_NILE_TRX", 5_000_000n)
        yield* mine("TRON_NILE")
        // TRON credits at solidification: the simulated chain solidifies 19 blocks behind the head.
        yield* mine("TRON_NILE", 18)
        assert.strictEqual((yield* deposits(tenant))[0].status, "CONFIRMING")
        yield* mine("TRON_NILE")
        const [held] = yield* deposits(tenant)
        assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        assert.deepStrictEqual(yield* balances(tenant, walletId), [])

        // Approve and reject are for transactions waiting for approval: a deposit is 409, never a 500.
        const ops = yield* opsClient
        for (const decide of [ops.manual.approve, ops.manual.reject]) {
          const refused = yield* Effect.flip(decide({ params: { tenantId: tenant.tenantId, id: held.id } }))
          assert.strictEqual(refused._tag, "InvalidState")
        }

        // The operator credits it: subStatus null, credited now, MANUAL_DEPOSIT_CREDITED; once only.
        const other = yield* provisionTenant()
        const wrongTenant = yield* Effect.flip(
          ops.manual.creditDeposit({ params: { tenantId: other.tenantId, id: held.id } })
        )
        assert.strictEqual(wrongTenant._tag, "NotFound")
        const credited = yield* ops.manual.creditDeposit({ params: { tenantId: tenant.tenantId, id: held.id } })
          .pipe(Effect.orDie)
        // Net of the deposit fee in force (fee rule 2, with rule 3's dynamic floor).
        const net = (5_000_000n - (yield* assetFees(tenant, "TRON_NILE_TRX")).deposit).toString()
        assert.deepStrictEqual([credited.status, credited.subStatus, credited.netAmountRaw], ["COMPLETED", null, net])
        assert.deepStrictEqual(yield* balances(tenant, walletId), [
          { assetId: "TRON_NILE_TRX", available: net, frozen: "0" }
        ])
        const again = yield* Effect.flip(ops.manual.creditDeposit({ params: { tenantId: tenant.tenantId, id: held.id } }))
        assert.strictEqual(again._tag, "InvalidState")
        const published = yield* events(tenant.tenantId, held.id)
        assert.deepStrictEqual(published.map((event) => event.event_type), [
          "TRANSACTION_CREATED",
          "TRANSACTION_STATUS_UPDATED",
          "MANUAL_DEPOSIT_CREDITED",
          "TRANSACTION_STATUS_UPDATED"
        ])
        assert.deepStrictEqual(published[2]!.data, {
          caseId: held.id,
          walletId,
          assetId: "TRON_NILE_TRX",
          amountRaw: net
        })
        assert.isNull(published[3]!.data.subStatus)
      }))

    it.effect("a deposit on a network the operator has since taken from the tenant is held for review", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* depositAddress(tenant, "gina", "BTC_TESTNET")
        yield* ops.tenants.update({ params: { tenantId: tenant.tenantId }, payload: { networks: ["ETH_SEPOLIA"] } })
          .pipe(Effect.orDie)
        yield* send("BTC_TESTNET", address, "BTC_TESTNET_BTC", 50_000n)
        yield* mine("BTC_TESTNET", 2)
        const [held] = yield* deposits(tenant)
        assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        assert.deepStrictEqual(yield* balances(tenant, walletId), [])
      }))

    it.effect("transfers to addresses nobody registered are not deposits; health reports each watched network", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* send("SOL_DEVNET", "9pedgei8s5tZ7S4FpLjg2WXAs5cG9SFvfgPig5RhcGdU", "SOL_DEVNET_SOL", 10n ** 9n)
        const height = yield* mine("SOL_DEVNET")
        assert.deepStrictEqual(yield* deposits(tenant), [])
        const ops = yield* opsClient
        const health = yield* ops.platform.health().pipe(Effect.orDie)
        assert.deepStrictEqual(health.chains.SOL_DEVNET, { height, lagBlocks: 0, status: "ok" })
        assert.containsAllKeys(health.chains, ["ETH_SEPOLIA", "BSC_TESTNET", "TRON_NILE", "BTC_TESTNET"])
      }))
  })

  describe("reorganizations", () => {
    it.effect("a confirming deposit whose block and transaction are gone ends FAILED/DROPPED", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { address } = yield* depositAddress(tenant, "dave", "BSC_TESTNET")
        yield* send("BSC_TESTNET", address, "BSC_TESTNET_BNB", 10n ** 17n)
        yield* mine("BSC_TESTNET", 3)
        const [before] = yield* deposits(tenant)
        assert.strictEqual(before.status, "CONFIRMING")
        yield* reorg("BSC_TESTNET", 3)
        yield* mine("BSC_TESTNET", 20)
        const [after] = yield* deposits(tenant)
        assert.strictEqual(after.id, before.id)
        assert.deepStrictEqual([after.status, after.subStatus], ["FAILED", "DROPPED"])
        const published = yield* events(tenant.tenantId, before.id)
        assert.deepStrictEqual(published.map((event) => [event.event_type, event.data.status]), [
          ["TRANSACTION_CREATED", "CONFIRMING"],
          ["TRANSACTION_STATUS_UPDATED", "FAILED"]
        ])
      }))

    it.effect("a credited deposit removed by a reorg is REVERSED and debited back, overdrawing what was spent", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* depositAddress(tenant, "erin", "BSC_TESTNET")
        const amount = 10n ** 17n
        yield* send("BSC_TESTNET", address, "BSC_TESTNET_BNB", amount)
        yield* mine("BSC_TESTNET", 15)
        const [credited] = yield* deposits(tenant)
        // Credited net of the deposit fee in force (fee rule 2, with rule 3's dynamic floor).
        const net = amount - (yield* assetFees(tenant, "BSC_TESTNET_BNB")).deposit
        assert.deepStrictEqual([credited.status, credited.netAmountRaw], ["COMPLETED", net.toString()])
        // The user spends most of it before the reorg.
        yield* ledger.post({
          tenantId: tenant.tenantId,
          kind: "TRANSFER",
          referenceId: yield* uuidV7,
          postings: [
            { account: { kind: "WALLET", walletId }, assetId: "BSC_TESTNET_BNB", bucket: "AVAILABLE", amount: -(net - 5n) },
            { account: { kind: "CHAIN" }, assetId: "BSC_TESTNET_BNB", bucket: "AVAILABLE", amount: net - 5n }
          ]
        })
        yield* reorg("BSC_TESTNET", 15)
        const [reversed] = yield* deposits(tenant)
        assert.strictEqual(reversed.id, credited.id)
        assert.strictEqual(reversed.status, "REVERSED")
        assert.deepStrictEqual(yield* balances(tenant, walletId), [
          // Raw amounts carry no sign (spec section 1): the debt is `overdrawn` (docs/decisions.md).
          { assetId: "BSC_TESTNET_BNB", available: "0", frozen: "0", overdrawn: (net - 5n).toString() }
        ])
        const published = yield* events(tenant.tenantId, credited.id)
        assert.deepStrictEqual(published.map((event) => event.event_type), [
          "TRANSACTION_CREATED",
          "TRANSACTION_STATUS_UPDATED",
          "DEPOSIT_REVERSED",
          "TRANSACTION_STATUS_UPDATED"
        ])
        assert.deepStrictEqual(published[2]!.data, { depositId: credited.id })
        assert.strictEqual(published[3]!.data.status, "REVERSED")
        // The new chain carries on; the reversed deposit stays reversed and is never recorded twice.
        yield* mine("BSC_TESTNET", 30)
        assert.lengthOf(yield* deposits(tenant), 1)
      }))

    it.effect("a deposit held for manual review whose transaction a reorg removed ends FAILED/DROPPED and is never credited", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* depositAddress(tenant, "hank", "BSC_TESTNET")
        yield* sql`UPDATE wallet_addresses SET watch_status = 'FROZEN' WHERE wallet_id = ${walletId}`
        yield* send("BSC_TESTNET", address, "BSC_TESTNET_BNB", 10n ** 17n)
        yield* mine("BSC_TESTNET", 15)
        const [held] = yield* deposits(tenant)
        assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        yield* reorg("BSC_TESTNET", 15)
        yield* mine("BSC_TESTNET", 20)
        const [dropped] = yield* deposits(tenant)
        assert.strictEqual(dropped.id, held.id)
        assert.deepStrictEqual([dropped.status, dropped.subStatus], ["FAILED", "DROPPED"])
        const refused = yield* Effect.flip(ops.manual.creditDeposit({ params: { tenantId: tenant.tenantId, id: held.id } }))
        assert.strictEqual(refused._tag, "InvalidState")
        assert.deepStrictEqual(yield* balances(tenant, walletId), [])
        const published = yield* events(tenant.tenantId, held.id)
        assert.deepStrictEqual(published.map((event) => [event.event_type, event.data.status, event.data.subStatus]), [
          ["TRANSACTION_CREATED", "CONFIRMING", null],
          ["TRANSACTION_STATUS_UPDATED", "COMPLETED", "MANUAL_REVIEW"],
          ["TRANSACTION_STATUS_UPDATED", "FAILED", "DROPPED"]
        ])
      }))

    it.effect("a held deposit whose transaction a reorg put back to pending stays held, creditable only once in a block again", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* depositAddress(tenant, "iris", "ETH_SEPOLIA")
        yield* sql`UPDATE wallet_addresses SET watch_status = 'FROZEN' WHERE wallet_id = ${walletId}`
        const amount = 2n * 10n ** 15n
        const txHash = yield* send("ETH_SEPOLIA", address, "ETH_SEPOLIA_ETH", amount)
        yield* mine("ETH_SEPOLIA", 12)
        const [held] = yield* deposits(tenant)
        assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        // As in the next test: the simulated chain's tables rewound by hand, the transfer pending again.
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`DELETE FROM devnet_blocks WHERE network_key = 'ETH_SEPOLIA'
            AND height > (SELECT max(height) - 12 FROM devnet_blocks WHERE network_key = 'ETH_SEPOLIA')`
          yield* sql`INSERT INTO devnet_transfers (network_key, tx_hash, output_index, to_address, asset_id, amount,
            created_at) VALUES ('ETH_SEPOLIA', ${txHash}, 0, ${address}, 'ETH_SEPOLIA_ETH', ${amount.toString()}, now())`
        }))
        yield* networkCalls("ETH_SEPOLIA").scan
        const [waiting] = yield* deposits(tenant)
        assert.deepStrictEqual([waiting.status, waiting.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
        const notYet = yield* Effect.flip(ops.manual.creditDeposit({ params: { tenantId: tenant.tenantId, id: held.id } }))
        assert.strictEqual(notYet._tag, "InvalidState")
        assert.deepStrictEqual(yield* balances(tenant, walletId), [])
        yield* mine("ETH_SEPOLIA", 1)
        const credited = yield* ops.manual.creditDeposit({ params: { tenantId: tenant.tenantId, id: held.id } })
          .pipe(Effect.orDie)
        assert.deepStrictEqual([credited.status, credited.subStatus], ["COMPLETED", null])
        const fee = (yield* assetFees(tenant, "ETH_SEPOLIA_ETH")).deposit
        assert.deepStrictEqual(yield* balances(tenant, walletId), [
          { assetId: "ETH_SEPOLIA_ETH", available: (amount - fee).toString(), frozen: "0" }
        ])
        assert.lengthOf(yield* deposits(tenant), 1)
      }))

    it.effect("a reorg that keeps the deposit's transaction pending puts it back to waiting, then credits it", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const { walletId, address } = yield* depositAddress(tenant, "frank", "ETH_SEPOLIA")
        const txHash = yield* send("ETH_SEPOLIA", address, "ETH_SEPOLIA_ETH", 2n * 10n ** 15n)
        yield* mine("ETH_SEPOLIA", 2)
        // A real chain returns a reorged transaction to the mempool, where the simulated one drops it: this
        // reorg, done on the simulated chain's tables in one transaction, puts the transfer back as pending.
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`DELETE FROM devnet_blocks WHERE network_key = 'ETH_SEPOLIA'
            AND height > (SELECT max(height) - 2 FROM devnet_blocks WHERE network_key = 'ETH_SEPOLIA')`
          yield* sql`INSERT INTO devnet_transfers (network_key, tx_hash, output_index, to_address, asset_id, amount,
            created_at) VALUES ('ETH_SEPOLIA', ${txHash}, 0, ${address}, 'ETH_SEPOLIA_ETH', ${(2n * 10n ** 15n).toString()}, now())`
        }))
        yield* networkCalls("ETH_SEPOLIA").scan
        const [waiting] = yield* deposits(tenant)
        assert.strictEqual(waiting.status, "CONFIRMING")
        yield* mine("ETH_SEPOLIA", 12)
        const [credited] = yield* deposits(tenant)
        assert.strictEqual(credited.id, waiting.id)
        assert.strictEqual(credited.status, "COMPLETED")
        const fee = (yield* assetFees(tenant, "ETH_SEPOLIA_ETH")).deposit
        assert.strictEqual((yield* balances(tenant, walletId))[0].available, (2n * 10n ** 15n - fee).toString())
      }))
  })

  describe("developer chain routes", () => {
    it.effect("unknown network 404; invalid address 422 INVALID_ADDRESS; asset of another network 422; bad count 400", () =>
      Effect.gen(function*() {
        const call = (method: string, target: string, body?: unknown) =>
          Effect.gen(function*() {
            const baseUrl = yield* OpsAddress
            return yield* rawRequest({
              baseUrl,
              method,
              target,
              ...(body === undefined ? {} : { body: JSON.stringify(body) }),
              headers: { authorization: `Bearer ${testOpsToken}`, "content-type": "application/json" }
            })
          })
        const unknown = yield* call("POST", "/ops/devnet/NOPE/blocks", {})
        assert.strictEqual(unknown.status, 404)
        const badAddress = yield* call("POST", "/ops/devnet/ETH_SEPOLIA/transfers", {
          to: "0x1234",
          assetId: "ETH_SEPOLIA_ETH",
          amountRaw: "1"
        })
        assert.strictEqual(badAddress.status, 422)
        assert.strictEqual(badAddress.json.error.code, "INVALID_ADDRESS")
        const otherNetwork = yield* call("POST", "/ops/devnet/ETH_SEPOLIA/transfers", {
          to: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
          assetId: "TRON_NILE_TRX",
          amountRaw: "1"
        })
        assert.strictEqual(otherNetwork.status, 422)
        assert.strictEqual(otherNetwork.json.error.code, "ASSET_NOT_SUPPORTED")
        const numberAmount = yield* call("POST", "/ops/devnet/ETH_SEPOLIA/transfers", {
          to: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
          assetId: "ETH_SEPOLIA_ETH",
          amountRaw: 1
        })
        assert.strictEqual(numberAmount.status, 422)
        assert.strictEqual(numberAmount.json.error.code, "BAD_REQUEST")
        const tooMany = yield* call("POST", "/ops/devnet/ETH_SEPOLIA/blocks", { count: 1001 })
        assert.strictEqual(tooMany.json.error.code, "BAD_REQUEST")
        const state = yield* call("GET", "/ops/devnet/ETH_SEPOLIA")
        assert.strictEqual(state.status, 200)
        assert.isAtLeast(state.json.height, 0)
        assert.strictEqual(state.json.pendingTransfers, 0)
      }))
  })
})
