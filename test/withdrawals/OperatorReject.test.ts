/**
 * The operator's reject (operator-interface.md `POST /ops/tenants/{tenantId}/transactions/{id}/reject`) from every
 * state decisions.md allows for an on-chain withdrawal: SUBMITTED, QUEUED (with or without INSUFFICIENT_FUNDS_PLATFORM)
 * and PENDING_AUTHORIZATION → REJECTED / REJECTED_BY_OPERATOR, the frozen amount + fee back to available in the same
 * database transaction as the status change (one WITHDRAWAL_RELEASE entry), one TRANSACTION_STATUS_UPDATED. From
 * PENDING_SIGNATURE on it is 409 INVALID_STATE and nothing changes.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { hotWalletBalanceDefault } from "../../src/chains/simulated/SimulatedChain.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { makeTestAppLayer, opsClient, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import {
  balance,
  devnet,
  entryCount,
  fund,
  getTransaction,
  settings,
  statusEvents,
  waitFor,
  walletOf,
  withdraw
} from "./WithdrawalHelpers.ts"

const eth = "ETH_SEPOLIA_ETH"
const ethTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
// Above the dynamic floor (fee rule 3: the network's cost × 1.2), so the tenant's fee is what is charged (rule 1).
const fee = 10n ** 15n
const funded = 10n ** 18n
const amount = 10n ** 16n

const reject = (tenant: TestTenant, id: string) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    return yield* Effect.result(ops.manual.reject({ params: { tenantId: tenant.tenantId, id } }))
  })

/** Rejected, released once, with its event, and the payer's balance whole again. */
const assertRejected = (tenant: TestTenant, walletId: string, id: string) =>
  Effect.gen(function*() {
    const result = yield* reject(tenant, id)
    assert.strictEqual(result._tag, "Success", String(result._tag === "Failure" ? result.failure._tag : ""))
    if (result._tag === "Success") {
      assert.deepStrictEqual([result.success.status, result.success.subStatus], ["REJECTED", "REJECTED_BY_OPERATOR"])
    }
    const stored = yield* getTransaction(tenant, id)
    assert.deepStrictEqual([stored.status, stored.subStatus], ["REJECTED", "REJECTED_BY_OPERATOR"])
    assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_RELEASE"), 1)
    assert.strictEqual((yield* statusEvents(tenant, id)).at(-1), "UPDATED:REJECTED/REJECTED_BY_OPERATOR")
    assert.deepStrictEqual(yield* balance(tenant, walletId, eth), { available: funded.toString(), frozen: "0" })
    // Once more: nothing left to reject, nothing released twice; the entity asked again changes nothing.
    const twice = yield* reject(tenant, id)
    assert.strictEqual(twice._tag === "Failure" ? twice.failure._tag : "Success", "InvalidState")
    const processor = yield* WithdrawalProcessor
    assert.strictEqual(yield* processor.process(id), "REJECTED")
    assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_RELEASE"), 1)
    assert.deepStrictEqual(yield* balance(tenant, walletId, eth), { available: funded.toString(), frozen: "0" })
  })

const setup = (customerRefId: string) =>
  Effect.gen(function*() {
    const tenant = yield* provisionTenant()
    yield* settings(tenant, { withdrawFees: { [eth]: fee.toString() }, withdrawalApprovalAbove: { [eth]: (5n * amount).toString() } })
    const payer = yield* walletOf(tenant, customerRefId, "ETH_SEPOLIA")
    yield* fund(tenant, payer.walletId, eth, funded)
    return { tenant, walletId: payer.walletId }
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("operator reject of on-chain withdrawals (decisions.md)", (it) => {
  describe("from every state before signing", () => {
    it.effect("PENDING_AUTHORIZATION → REJECTED / REJECTED_BY_OPERATOR, unfrozen", () =>
      Effect.gen(function*() {
        const { tenant, walletId } = yield* setup("pending")
        const pending = yield* withdraw(tenant, walletId, eth, ethTo, 6n * amount, "r-pending")
        yield* waitFor(tenant, pending.json.transactionId, "PENDING_AUTHORIZATION")
        assert.strictEqual((yield* balance(tenant, walletId, eth)).frozen, (6n * amount + fee).toString())
        yield* assertRejected(tenant, walletId, pending.json.transactionId)
        assert.deepStrictEqual(yield* statusEvents(tenant, pending.json.transactionId), [
          "CREATED:SUBMITTED/",
          "UPDATED:PENDING_AUTHORIZATION/",
          "UPDATED:REJECTED/REJECTED_BY_OPERATOR"
        ])
      }))

    it.effect("QUEUED / INSUFFICIENT_FUNDS_PLATFORM and plain QUEUED → REJECTED / REJECTED_BY_OPERATOR, unfrozen", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { tenant, walletId } = yield* setup("queued")
        yield* devnet("ETH_SEPOLIA", { hotWalletBalance: { [eth]: 0n } })
        const short = yield* withdraw(tenant, walletId, eth, ethTo, amount, "r-short")
        yield* waitFor(tenant, short.json.transactionId, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
        yield* assertRejected(tenant, walletId, short.json.transactionId)

        // Plain QUEUED lasts only until the entity's next step (the hot wallet check right after it), so no interface
        // holds a withdrawal there on the simulated chain: the sub-status is cleared by hand.
        const queued = yield* withdraw(tenant, walletId, eth, ethTo, amount, "r-queued")
        yield* waitFor(tenant, queued.json.transactionId, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
        yield* sql`UPDATE transactions SET sub_status = NULL WHERE id = ${queued.json.transactionId}`
        yield* assertRejected(tenant, walletId, queued.json.transactionId)
        yield* devnet("ETH_SEPOLIA", { hotWalletBalance: { [eth]: hotWalletBalanceDefault } })
      }))

    it.effect("SUBMITTED → REJECTED / REJECTED_BY_OPERATOR, unfrozen", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const { tenant, walletId } = yield* setup("submitted")
        yield* devnet("ETH_SEPOLIA", { hotWalletBalance: { [eth]: 0n } })
        const submitted = yield* withdraw(tenant, walletId, eth, ethTo, amount, "r-submitted")
        // SUBMITTED lasts only until the entity takes the withdrawal (milliseconds after the 202), so no interface
        // holds it there: it is parked as QUEUED first, then set back to SUBMITTED by hand.
        yield* waitFor(tenant, submitted.json.transactionId, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
        yield* sql`UPDATE transactions SET status = 'SUBMITTED', sub_status = NULL WHERE id = ${submitted.json.transactionId}`
        yield* assertRejected(tenant, walletId, submitted.json.transactionId)
        yield* devnet("ETH_SEPOLIA", { hotWalletBalance: { [eth]: hotWalletBalanceDefault } })
      }))
  })

  describe("too late", () => {
    it.effect("CONFIRMING (signed and broadcast): 409 INVALID_STATE, nothing released; approve of a non-pending one: 409", () =>
      Effect.gen(function*() {
        const { tenant, walletId } = yield* setup("late")
        const sent = yield* withdraw(tenant, walletId, eth, ethTo, amount, "r-late")
        yield* waitFor(tenant, sent.json.transactionId, "CONFIRMING")
        const result = yield* reject(tenant, sent.json.transactionId)
        assert.strictEqual(result._tag === "Failure" ? result.failure._tag : "Success", "InvalidState")
        assert.strictEqual((yield* getTransaction(tenant, sent.json.transactionId)).status, "CONFIRMING")
        assert.strictEqual(yield* entryCount(sent.json.transactionId, "WITHDRAWAL_RELEASE"), 0)
        assert.strictEqual((yield* balance(tenant, walletId, eth)).frozen, (amount + fee).toString())
        const ops = yield* opsClient
        const approve = yield* Effect.flip(ops.manual.approve({ params: { tenantId: tenant.tenantId, id: sent.json.transactionId } }))
        assert.strictEqual(approve._tag, "InvalidState")
        // Another tenant's operator path names no such transaction.
        const other = yield* provisionTenant()
        const foreign = yield* Effect.flip(ops.manual.reject({ params: { tenantId: other.tenantId, id: sent.json.transactionId } }))
        assert.strictEqual(foreign._tag, "NotFound")
      }))
  })
})
