/**
 * The pure deposit decisions (src/deposits/DepositDecisions.ts): the crediting condition of decisions.md
 * ("Confirmations": the block that includes the transaction is confirmation 1) and the reorganization table of
 * docs/deposits.md ("Reorganizations"). No database, no chain.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChainHead, TransactionState } from "../../src/chains/ChainClient.ts"
import { decideOrphanedDeposit, meetsConfirmationRule } from "../../src/deposits/DepositDecisions.ts"
import type { SubStatus, TransactionStatus } from "../../src/transactions/Transaction.ts"

const head = (height: bigint, finalizedHeight: bigint): ChainHead => ({ height, hash: "h", finalizedHeight })
const states: ReadonlyArray<TransactionState> = ["INCLUDED", "PENDING", "UNKNOWN"]

describe("deposit decisions", () => {
  describe("crediting condition (decisions.md, Confirmations)", () => {
    it("confirmations n: a deposit in block h is due once the head reaches h + n - 1, not a block earlier", () => {
      const network = { confirmations: { mode: "confirmations", n: 12 } } as const
      assert.isFalse(meetsConfirmationRule(network, head(110n, 0n), 100n))
      assert.isTrue(meetsConfirmationRule(network, head(111n, 0n), 100n))
      assert.isTrue(meetsConfirmationRule(network, head(500n, 0n), 100n))
    })

    it("confirmations 1: due in the block that includes it", () => {
      const network = { confirmations: { mode: "confirmations", n: 1 } } as const
      assert.isTrue(meetsConfirmationRule(network, head(100n, 0n), 100n))
      assert.isFalse(meetsConfirmationRule(network, head(99n, 0n), 100n))
    })

    it("finalized and solidified: due once the block is at or below the finalized height, whatever the head", () => {
      for (const mode of ["finalized", "solidified"] as const) {
        const network = { confirmations: { mode } }
        assert.isFalse(meetsConfirmationRule(network, head(1_000n, 99n), 100n), mode)
        assert.isTrue(meetsConfirmationRule(network, head(1_000n, 100n), 100n), mode)
        assert.isTrue(meetsConfirmationRule(network, head(100n, 100n), 100n), mode)
      }
    })
  })

  describe("a deposit whose block the chain dropped (docs/deposits.md, Reorganizations)", () => {
    const decide = (status: TransactionStatus, subStatus: SubStatus | null, state: TransactionState) =>
      decideOrphanedDeposit({ status, subStatus }, state)

    it("CONFIRMING: dropped when the chain no longer knows its transaction, else back to waiting for a block", () => {
      assert.strictEqual(decide("CONFIRMING", null, "UNKNOWN"), "DROP")
      assert.strictEqual(decide("CONFIRMING", null, "PENDING"), "AWAIT_BLOCK")
      assert.strictEqual(decide("CONFIRMING", null, "INCLUDED"), "AWAIT_BLOCK")
    })

    it("credited: reversed unless its transaction is in a block of the new chain", () => {
      assert.strictEqual(decide("COMPLETED", null, "UNKNOWN"), "REVERSE")
      assert.strictEqual(decide("COMPLETED", null, "PENDING"), "REVERSE")
      assert.strictEqual(decide("COMPLETED", null, "INCLUDED"), "KEEP")
    })

    it("ended without a credit (BELOW_MIN_DEPOSIT, MANUAL_REVIEW): dropped like a confirming one, never left creditable", () => {
      for (const subStatus of ["BELOW_MIN_DEPOSIT", "MANUAL_REVIEW"] as const) {
        assert.strictEqual(decide("COMPLETED", subStatus, "UNKNOWN"), "DROP", subStatus)
        assert.strictEqual(decide("COMPLETED", subStatus, "PENDING"), "AWAIT_BLOCK", subStatus)
        assert.strictEqual(decide("COMPLETED", subStatus, "INCLUDED"), "AWAIT_BLOCK", subStatus)
      }
    })

    it("already failed or reversed: nothing to undo", () => {
      for (const state of states) {
        assert.strictEqual(decide("FAILED", "DROPPED", state), "KEEP", state)
        assert.strictEqual(decide("REVERSED", null, state), "KEEP", state)
      }
    })
  })
})
