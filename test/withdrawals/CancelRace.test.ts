/**
 * Cancel racing the withdrawal's entity (docs/transfers.md "Cancel"): cancel locks the transaction row and uses the
 * same conditional transition as the entity, so whichever commits first wins. Many cancels are fired in parallel
 * right after the submission (and the handler is run directly beside them, as a second runner would): the end is
 * either CANCELLED, released exactly once, never signed nor broadcast, with exactly one cancel answered 200; or the
 * withdrawal went on past QUEUED, every cancel answered 409 and nothing was released. Never both.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import {
  balance,
  call,
  entryCount,
  fund,
  getTransaction,
  mine,
  settings,
  signedOf,
  statusEvents,
  tenantAccount,
  waitFor,
  walletOf,
  withdraw
} from "./WithdrawalHelpers.ts"

const eth = "ETH_SEPOLIA_ETH"
const ethTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
const cancels = 10
/** Pauses before the cancels are fired, spread so that some rounds cancel first and some sign first. */
const delaysMillis = [0, 0, 0, 0, 5, 10, 20, 40, 80, 160, 320, 0]

layer(makeTestAppLayer(), { excludeTestServices: true })("cancel racing the entity", (it) => {
  describe("concurrent cancels while the entity processes", () => {
    it.effect(`submit, then ${cancels} cancels in parallel (with the handler run beside them): CANCELLED and released once, never signed; or past QUEUED and every cancel 409; never both`, () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const processor = yield* WithdrawalProcessor
        // The rounds send many requests a second; the default 50 per second per key would answer some 429.
        const tenant = yield* provisionTenant({ rateLimitPerSecond: 1000 })
        // Above the dynamic floor (fee rule 3: the network's cost × 1.2), so the tenant's fee is what is charged (rule 1).
        const fee = 10n ** 15n
        const amount = 10n ** 16n
        yield* settings(tenant, { withdrawFees: { [eth]: fee.toString() } })
        const payer = yield* walletOf(tenant, "rita", "ETH_SEPOLIA")
        const funded = 10n ** 18n
        yield* fund(tenant, payer.walletId, eth, funded)

        const outcomes: Array<"CANCELLED" | "SENT"> = []
        const sent: Array<string> = []
        for (const [round, delay] of delaysMillis.entries()) {
          const response = yield* withdraw(tenant, payer.walletId, eth, ethTo, amount, `race-${round}`)
          assert.strictEqual(response.status, 202, response.text)
          const id = response.json.transactionId as string
          if (delay > 0) yield* Effect.sleep(`${delay} millis`)
          const [answers] = yield* Effect.all([
            Effect.all(
              Array.from({ length: cancels }, () => call(tenant, "POST", `/v1/transactions/${id}/cancel`)),
              { concurrency: "unbounded" }
            ),
            // The entity's handler, a second time, as on another runner.
            round % 2 === 0 ? processor.process(id) : Effect.void
          ], { concurrency: "unbounded" })
          const statuses = answers.map((answer) => answer.status)
          for (const answer of answers) {
            if (answer.status === 409) {
              assert.strictEqual(answer.json.error.code, "INVALID_STATE", answer.text)
              assert.strictEqual(answer.json.error.message, "withdrawal can no longer be cancelled")
            } else {
              assert.strictEqual(answer.status, 200, answer.text)
              assert.deepStrictEqual([answer.json.status, answer.json.subStatus, answer.json.state], ["CANCELLED", "CANCELLED_BY_USER", "CANCELLED"])
              assert.strictEqual(answer.json.transactionId, id)
            }
          }
          const won = statuses.filter((status) => status === 200).length
          assert.isAtMost(won, 1, `round ${round}: at most one cancel succeeds, got ${statuses}`)

          if (won === 1) {
            // Let the entity (still running or asked again) do whatever it would; it must change nothing.
            yield* Effect.sleep("200 millis")
            assert.strictEqual(yield* processor.process(id), "CANCELLED")
            const final = yield* getTransaction(tenant, id)
            assert.deepStrictEqual([final.status, final.subStatus, final.txHash ?? null], ["CANCELLED", "CANCELLED_BY_USER", null])
            const signed = yield* signedOf(id)
            assert.isNull(signed.signed_raw, `round ${round}: cancelled and signed`)
            assert.isNull(signed.signed_tx_hash)
            assert.strictEqual(signed.broadcasts, 0)
            assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_RELEASE"), 1)
            assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_SETTLE"), 0)
            const events = yield* statusEvents(tenant, id)
            assert.strictEqual(events.at(-1), "UPDATED:CANCELLED/CANCELLED_BY_USER")
            assert.strictEqual(events.filter((event) => event.startsWith("UPDATED:CANCELLED")).length, 1)
            assert.notInclude(events, "UPDATED:PENDING_SIGNATURE/", `round ${round}: cancelled after signing began`)
            outcomes.push("CANCELLED")
          } else {
            // Every cancel refused: the entity had committed PENDING_SIGNATURE first; it goes on to the chain.
            const confirming = yield* waitFor(tenant, id, "CONFIRMING")
            const signed = yield* signedOf(id)
            assert.strictEqual(confirming.txHash, signed.signed_tx_hash)
            assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_RELEASE"), 0, `round ${round}: refused yet released`)
            assert.deepStrictEqual(yield* statusEvents(tenant, id), [
              "CREATED:SUBMITTED/",
              "UPDATED:QUEUED/",
              "UPDATED:PENDING_SIGNATURE/",
              "UPDATED:CONFIRMING/"
            ])
            outcomes.push("SENT")
            sent.push(id)
          }
          // Balances add up after every round: what is still frozen is exactly the withdrawals sent.
          assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_FREEZE"), 1)
          const reserved = BigInt(sent.length) * (amount + fee)
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), {
            available: (funded - reserved).toString(),
            frozen: reserved.toString()
          }, `round ${round} (${outcomes.join(",")})`)
        }
        yield* Effect.logInfo(`cancel race outcomes: ${outcomes.join(", ")}`)

        // The ones sent complete; the cancelled ones stay cancelled, released once.
        yield* mine("ETH_SEPOLIA", 13)
        for (const id of sent) assert.strictEqual((yield* getTransaction(tenant, id)).status, "COMPLETED")
        const spent = BigInt(sent.length) * (amount + fee)
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), { available: (funded - spent).toString(), frozen: "0" })
        assert.strictEqual(yield* tenantAccount(tenant, "FEES", eth), (BigInt(sent.length) * fee).toString())
        const [totals] = yield* sql<{ releases: number; settles: number }>`
          SELECT count(*) FILTER (WHERE e.kind = 'WITHDRAWAL_RELEASE')::int AS releases,
            count(*) FILTER (WHERE e.kind = 'WITHDRAWAL_SETTLE')::int AS settles
          FROM ledger_entries e WHERE e.tenant_id = ${tenant.tenantId}`
        assert.deepStrictEqual(totals, {
          releases: outcomes.filter((outcome) => outcome === "CANCELLED").length,
          settles: sent.length
        })
        // No transaction both released and settled, none signed among the cancelled.
        const both = yield* sql`
          SELECT t.id FROM transactions t JOIN withdrawals w ON w.transaction_id = t.id
          WHERE t.tenant_id = ${tenant.tenantId}
            AND (t.status = 'CANCELLED') <> (w.signed_raw IS NULL)`
        assert.deepStrictEqual(both, [], "cancelled exactly when never signed")
      }), 90_000) // 12 rounds, each waiting on the entity: 9-15 s alone, past 30 s beside four node tests at load 20-25
  })
})
