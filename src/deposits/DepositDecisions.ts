/**
 * What happens to a deposit, decided from the chain alone (decisions.md "Deposits"; docs/deposits.md, "Reorgs"):
 * pure functions, so every case is tested without a database or a chain (test/deposits/DepositDecisions.test.ts).
 * DepositWatcher scans the chain and carries the decisions out. Whether a deposit that is due is credited or held
 * (`BELOW_MIN_DEPOSIT`, `MANUAL_REVIEW`) depends on the tenant, the asset and the wallet, and is decided where those
 * are read, in DepositWatcher's `settle`.
 */
import type { CatalogNetwork } from "../catalog/Catalog.ts"
import type { ChainHead, TransactionState } from "../chains/ChainClient.ts"
import type { SubStatus, TransactionStatus } from "../transactions/Transaction.ts"

/**
 * Whether a deposit in block `height` meets the network's crediting condition (decisions.md: the block is 1): a
 * confirming deposit whose block the chain still has is settled once this holds, and waits until then.
 */
export const meetsConfirmationRule = (
  network: Pick<CatalogNetwork, "confirmations">,
  head: ChainHead,
  height: bigint
): boolean =>
  network.confirmations.mode === "confirmations"
    ? head.height >= height + BigInt(network.confirmations.n) - 1n
    : height <= head.finalizedHeight

/**
 * A deposit whose block the chain dropped:
 * - `DROP`: it was never credited (confirming, or ended held for review or below the minimum) and the chain no
 *   longer knows its transaction → `FAILED`/`DROPPED` (decisions.md: "dropped before crediting");
 * - `AWAIT_BLOCK`: it was never credited and the chain still has its transaction (pending, or in another block) →
 *   its block is cleared and it is recorded again when that block is scanned; a held one stays held, and cannot be
 *   credited by the operator until then (ManualDepositCredit.ts);
 * - `REVERSE`: it was credited and its transaction is in no block of the chain → `REVERSED`, debited back;
 * - `KEEP`: a credited one re-mined elsewhere stays credited (its block is refreshed when scanned); a failed or
 *   reversed one has nothing left to undo.
 *
 * A held deposit (`MANUAL_REVIEW`) is the case that matters: left as it was, an operator could credit a deposit
 * whose transaction no longer exists, booking funds no chain holds.
 */
export type OrphanedDepositDecision = "DROP" | "AWAIT_BLOCK" | "REVERSE" | "KEEP"

export const decideOrphanedDeposit = (
  deposit: { readonly status: TransactionStatus; readonly subStatus: SubStatus | null },
  chainState: TransactionState
): OrphanedDepositDecision => {
  if (deposit.status !== "CONFIRMING" && deposit.status !== "COMPLETED") return "KEEP"
  const credited = deposit.status === "COMPLETED" && deposit.subStatus === null
  if (credited) return chainState === "INCLUDED" ? "KEEP" : "REVERSE"
  return chainState === "UNKNOWN" ? "DROP" : "AWAIT_BLOCK"
}
