/**
 * The withdrawal transition table (src/withdrawals/WithdrawalTransitions.ts) against decisions.md "Withdrawal life
 * cycle", spec section 3 (cancel) and operator-interface.md (approve, reject): every transition those documents name
 * is in the table, nothing else is, none goes back to an earlier state, each terminal one carries its ledger effect,
 * and applying one from a state the table does not allow is a defect that changes nothing.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { TransactionRepository } from "../../src/transactions/TransactionRepository.ts"
import { transactionObject } from "../../src/transactions/TransactionView.ts"
import { hotWalletBalanceDefault } from "../../src/chains/simulated/SimulatedChain.ts"
import type { SubStatus, TransactionStatus } from "../../src/transactions/Transaction.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import {
  allows,
  creation,
  IllegalTransition,
  type TransitionName,
  withdrawalTransitions
} from "../../src/withdrawals/WithdrawalTransitions.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import { balance, devnet, entryCount, fund, getTransaction, statusEvents, waitFor, walletOf, withdraw } from "./WithdrawalHelpers.ts"

type Edge = readonly [from: TransactionStatus, to: TransactionStatus, subStatus: SubStatus | null]

/** The life cycle as the documents draw it, one edge per line (the diagram's combined lines written out). */
const documented: ReadonlyArray<Edge> = [
  // decisions.md "Withdrawal life cycle"
  ["SUBMITTED", "PENDING_AUTHORIZATION", null],
  ["SUBMITTED", "QUEUED", null],
  ["QUEUED", "PENDING_SIGNATURE", null],
  ["PENDING_SIGNATURE", "CONFIRMING", null],
  ["CONFIRMING", "COMPLETED", null],
  ["QUEUED", "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM"],
  ["SUBMITTED", "REJECTED", "BLOCKED_BY_POLICY"],
  ["QUEUED", "REJECTED", "BLOCKED_BY_POLICY"],
  ["SUBMITTED", "REJECTED", "REJECTED_BY_OPERATOR"],
  ["QUEUED", "REJECTED", "REJECTED_BY_OPERATOR"],
  ["PENDING_SIGNATURE", "FAILED", "SIGNING_FAILED"],
  ["PENDING_SIGNATURE", "FAILED", "BROADCAST_FAILED"],
  ["PENDING_SIGNATURE", "FAILED", "REVERTED_ON_CHAIN"],
  ["CONFIRMING", "FAILED", "REVERTED_ON_CHAIN"],
  // decisions.md "Sending on real networks": only once no version of the send can ever be included (failConflicted)
  ["CONFIRMING", "FAILED", "BROADCAST_FAILED"],
  // decisions.md and spec section 3: cancel before signing
  ["SUBMITTED", "CANCELLED", "CANCELLED_BY_USER"],
  ["PENDING_AUTHORIZATION", "CANCELLED", "CANCELLED_BY_USER"],
  ["QUEUED", "CANCELLED", "CANCELLED_BY_USER"],
  // operator-interface.md: approve a pending withdrawal (it goes on to QUEUED), reject it
  ["PENDING_AUTHORIZATION", "QUEUED", null],
  ["PENDING_AUTHORIZATION", "REJECTED", "REJECTED_BY_OPERATOR"]
]

/**
 * decisions.md draws "PENDING_SIGNATURE/CONFIRMING ─► FAILED" for three sub-statuses at once; signing happens only in
 * PENDING_SIGNATURE, so this edge is deliberately not in the table. (CONFIRMING ─► BROADCAST_FAILED is, but only for
 * a send the chain proves can never be included; a failed rebroadcast alone is never terminal.)
 */
const narrowed: ReadonlyArray<Edge> = [
  ["CONFIRMING", "FAILED", "SIGNING_FAILED"]
]

const names = Object.keys(withdrawalTransitions) as ReadonlyArray<TransitionName>
const edges = names.flatMap((name) => {
  const rule = withdrawalTransitions[name]
  return rule.from.map((from) => ({ name, edge: [from, rule.to, rule.subStatus] as Edge }))
})
const key = (edge: Edge) => edge.join(" → ")
const order: ReadonlyArray<TransactionStatus> = ["SUBMITTED", "PENDING_AUTHORIZATION", "QUEUED", "PENDING_SIGNATURE", "CONFIRMING"]
const terminal: ReadonlyArray<TransactionStatus> = ["COMPLETED", "FAILED", "REJECTED", "CANCELLED"]

describe("withdrawal transition table (decisions.md \"Withdrawal life cycle\")", () => {
  it("every documented transition is in the table", () => {
    const declared = new Set(edges.map(({ edge }) => key(edge)))
    for (const edge of documented) assert.isTrue(declared.has(key(edge)), `missing: ${key(edge)}`)
  })

  it("the table holds no transition the documents do not name", () => {
    const allowed = new Set(documented.map(key))
    for (const { edge, name } of edges) assert.isTrue(allowed.has(key(edge)), `undocumented: ${name} ${key(edge)}`)
    for (const edge of narrowed) assert.isFalse(edges.some((declared) => key(declared.edge) === key(edge)))
  })

  it("a withdrawal never goes back to an earlier state, and nothing leaves a terminal one", () => {
    for (const { edge: [from, to], name } of edges) {
      assert.isFalse(terminal.includes(from), `${name} leaves terminal ${from}`)
      if (!terminal.includes(to)) assert.isTrue(order.indexOf(to) >= order.indexOf(from), `${name} goes back`)
    }
  })

  it("frozen from SUBMITTED until a terminal state: COMPLETED settles (with the network fee), FAILED/REJECTED/CANCELLED release (REVERTED_ON_CHAIN with the burned network fee), nothing else books", () => {
    assert.deepStrictEqual(creation, { to: "SUBMITTED", ledger: ["freeze"], event: "TRANSACTION_CREATED" })
    for (const name of names) {
      const rule = withdrawalTransitions[name]
      const expected = rule.to === "COMPLETED"
        ? ["settle", "networkFee"]
        : rule.subStatus === "REVERTED_ON_CHAIN"
        ? ["release", "networkFee"]
        : terminal.includes(rule.to)
        ? ["release"]
        : []
      assert.deepStrictEqual<ReadonlyArray<string>>(rule.ledger, expected, name)
      assert.strictEqual(rule.event, "TRANSACTION_STATUS_UPDATED", name)
    }
  })

  it("illegal requests are refused by the table: no cancel or operator reject from PENDING_SIGNATURE on (spec section 3)", () => {
    for (const status of ["PENDING_SIGNATURE", "CONFIRMING", ...terminal] as const) {
      assert.isFalse(allows("cancelByUser", status), status)
      assert.isFalse(allows("rejectByOperator", status), status)
      assert.isFalse(allows("approve", status), status)
    }
    assert.isFalse(allows("approve", "QUEUED"))
    assert.isFalse(allows("complete", "PENDING_SIGNATURE"))
    assert.isFalse(allows("startSigning", "PENDING_AUTHORIZATION"))
  })
})

/**
 * A withdrawal of `amount` to `to` from a funded wallet of a new tenant, held QUEUED / INSUFFICIENT_FUNDS_PLATFORM
 * (the network's hot wallet emptied first), so nothing else moves it while a test works on it. The caller puts the
 * hot wallet back.
 */
const heldWithdrawal = (networkKey: string, assetId: string, to: string, amount: bigint) =>
  Effect.gen(function*() {
    const tenant = yield* provisionTenant()
    const payer = yield* walletOf(tenant, "held", networkKey)
    yield* fund(tenant, payer.walletId, assetId, amount * 100n)
    yield* devnet(networkKey, { hotWalletBalance: { [assetId]: 0n } })
    const response = yield* withdraw(tenant, payer.walletId, assetId, to, amount, "held-1")
    const id: string = response.json.transactionId
    yield* waitFor(tenant, id, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
    return { id, payer, tenant }
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("applying the table (WithdrawalProcessor.transition)", (it) => {
  it.effect("a transition of the entity's steps is one statement whose event carries the transaction as the database has it after; a lost race records no event", () =>
    Effect.gen(function*() {
      const trx = "TRON_NILE_TRX"
      // The entity's steps queue it and then hold it (both one-statement transitions).
      const { id, tenant } = yield* heldWithdrawal("TRON_NILE", trx, "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7", 10n ** 8n)
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const stored = (yield* (yield* TransactionRepository).find(tenant.tenantId, id))!
      const [event] = yield* sql<{ data: unknown }>`
        SELECT data FROM outbox_events WHERE subject_id = ${id} AND event_type = 'TRANSACTION_STATUS_UPDATED'
          AND dedupe_key = 'QUEUED/INSUFFICIENT_FUNDS_PLATFORM'`
      assert.deepStrictEqual(event?.data, JSON.parse(JSON.stringify(transactionObject(catalog, stored))))

      // A step from a read that is not true (PENDING_SIGNATURE): the UPDATE matches nothing, no event is written.
      const processor = yield* WithdrawalProcessor
      const queued = (yield* processor.load(id))!
      const before = yield* statusEvents(tenant, id)
      assert.deepStrictEqual(before, ["CREATED:SUBMITTED/", "UPDATED:QUEUED/", "UPDATED:QUEUED/INSUFFICIENT_FUNDS_PLATFORM"])
      assert.isFalse(yield* processor.transition({ ...queued, status: "PENDING_SIGNATURE", sub_status: null }, "broadcast", {
        txHash: "0xfeed"
      }))
      assert.deepStrictEqual(yield* statusEvents(tenant, id), before)
      assert.strictEqual((yield* getTransaction(tenant, id)).subStatus, "INSUFFICIENT_FUNDS_PLATFORM")
      yield* devnet("TRON_NILE", { hotWalletBalance: { [trx]: hotWalletBalanceDefault } })
    }))

  it.effect("a legal transition books its declared effect and emits its event once; a stale repeat is a lost race; an illegal one dies with IllegalTransition and changes nothing", () =>
    Effect.gen(function*() {
      const eth = "ETH_SEPOLIA_ETH"
      const { id, payer, tenant } = yield* heldWithdrawal("ETH_SEPOLIA", eth, "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", 10n ** 16n)
      const processor = yield* WithdrawalProcessor
      const queued = (yield* processor.load(id))!
      const frozen = yield* balance(tenant, payer.walletId, eth)
      assert.notStrictEqual(frozen.frozen, "0")
      const eventsQueued = yield* statusEvents(tenant, id)

      // Legal: the table's rejectByOperator from QUEUED, REJECTED / REJECTED_BY_OPERATOR with one release.
      assert.isTrue(yield* processor.transition(queued, "rejectByOperator"))
      const rejected = yield* getTransaction(tenant, id)
      assert.deepStrictEqual([rejected.status, rejected.subStatus], ["REJECTED", "REJECTED_BY_OPERATOR"])
      assert.deepStrictEqual(yield* statusEvents(tenant, id), [...eventsQueued, "UPDATED:REJECTED/REJECTED_BY_OPERATOR"])
      const released = yield* balance(tenant, payer.walletId, eth)
      assert.deepStrictEqual(released, { available: (BigInt(frozen.available) + BigInt(frozen.frozen)).toString(), frozen: "0" })
      assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_RELEASE"), 1)

      // The same request from the stale read (still QUEUED): legal by the table, but the row moved on: false, no change.
      assert.isFalse(yield* processor.transition(queued, "cancelByUser"))
      const row = (yield* processor.load(id))!
      assert.strictEqual(row.status, "REJECTED")
      const eventsBefore = yield* statusEvents(tenant, id)

      for (const name of ["cancelByUser", "complete", "failBroadcast", "startSigning"] as const) {
        const exit = yield* Effect.exit(processor.transition(row, name, {
          networkFee: { amount: 1n, assetId: eth, blockHeight: 1n }
        }))
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), name)
        const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
        assert.instanceOf(defect, IllegalTransition)
        const illegal = defect as IllegalTransition
        assert.deepStrictEqual([illegal.transition, illegal.status, illegal.withdrawalId], [name, "REJECTED", id])
        assert.include(illegal.message, `${name} from REJECTED`)
      }
      const after = yield* getTransaction(tenant, id)
      assert.deepStrictEqual([after.status, after.subStatus], ["REJECTED", "REJECTED_BY_OPERATOR"])
      assert.deepStrictEqual(yield* statusEvents(tenant, id), eventsBefore)
      assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), released)
      assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_RELEASE"), 1)
      assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_SETTLE"), 0)
      yield* devnet("ETH_SEPOLIA", { hotWalletBalance: { [eth]: hotWalletBalanceDefault } })
    }))
})
