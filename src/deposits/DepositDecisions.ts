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
 * - `DROP`: it was confirming and the chain no longer knows its transaction → `FAILED`/`DROPPED`;
 * - `AWAIT_BLOCK`: it was confirming and the chain still has its transaction (pending, or in another block) → back to
 *   waiting for a block; it is recorded again when that block is scanned;
 * - `REVERSE`: it was credited and its transaction is in no block of the chain → `REVERSED`, debited back;
 * - `KEEP`: a credited one re-mined elsewhere stays credited (its block is refreshed when scanned), and one that ended
 *   without a credit has nothing to undo.
 */
export type OrphanedDepositDecision = "DROP" | "AWAIT_BLOCK" | "REVERSE" | "KEEP"

export const decideOrphanedDeposit = (
  deposit: { readonly status: TransactionStatus; readonly subStatus: SubStatus | null },
  chainState: TransactionState
): OrphanedDepositDecision => {
  if (deposit.status === "CONFIRMING") return chainState === "UNKNOWN" ? "DROP" : "AWAIT_BLOCK"
  const credited = deposit.status === "COMPLETED" && deposit.subStatus === null
  return credited && chainState !== "INCLUDED" ? "REVERSE" : "KEEP"
}
