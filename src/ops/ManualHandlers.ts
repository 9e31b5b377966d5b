/** Handlers of approvals and manual handling (operator-interface.md). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Catalog } from "../catalog/Catalog.ts"
import { ManualDepositCredit } from "../deposits/ManualDepositCredit.ts"
import { transactionObject } from "../transactions/TransactionView.ts"
import { Tenants } from "../tenants/Tenants.ts"
import { TransactionRepository } from "../transactions/TransactionRepository.ts"
import { Transfers } from "../transfers/Transfers.ts"
import { Withdrawals } from "../withdrawals/Withdrawals.ts"
import { pageLimitDefault } from "../api/Common.ts"
import { Approvals } from "./Approvals.ts"
import { auditOrigin } from "./AuditOrigin.ts"
import { OperatorAudit } from "./OperatorAudit.ts"
import { OpsApi } from "./OpsApi.ts"

export const OpsManualHandlers = HttpApiBuilder.group(OpsApi, "manual", (handlers) =>
  Effect.gen(function*() {
    const manualCredit = yield* ManualDepositCredit
    const tenants = yield* Tenants
    const catalog = yield* Catalog
    const transfers = yield* Transfers
    const withdrawals = yield* Withdrawals
    const transactions = yield* TransactionRepository
    const audit = yield* OperatorAudit
    const approvals = yield* Approvals
    /**
     * A pending withdrawal goes on to QUEUED or is rejected; a pending internal transfer completes or is rejected.
     * The decision and its audit entry commit together; a withdrawal's entity is asked to go on after that commit.
     */
    const decide = (tenantId: string, id: string, decision: "APPROVE" | "REJECT") =>
      Effect.gen(function*() {
        const tenant = yield* tenants.require(tenantId)
        const transaction = yield* transactions.find(tenant.id, id)
        const isWithdrawal = transaction?.kind === "WITHDRAWAL"
        const change = isWithdrawal
          ? Effect.andThen(withdrawals.decideUncommitted(tenant.id, id, decision), transactions.find(tenant.id, id))
          : transfers.decide(tenant.id, id, decision)
        const recorded = yield* audit.audited(yield* auditOrigin, change, (after) => ({
          action: decision === "APPROVE" ? "TRANSACTION_APPROVED" : "TRANSACTION_REJECTED",
          target: { type: "TRANSACTION", id },
          tenantId: tenant.id,
          change: {
            kind: after!.kind,
            // As read before the decision's lock; the decision itself checks the state under it.
            status: { from: transaction?.status ?? null, to: after!.status },
            subStatus: after!.subStatus
          }
        }))
        return transactionObject(catalog, isWithdrawal ? yield* withdrawals.decided(tenant.id, id, decision) : recorded!)
      })
    return handlers
      .handle("approvals", ({ query }) =>
        Effect.map(
          approvals.list({
            tenantId: query.tenantId,
            kind: query.kind,
            limit: query.limit ?? pageLimitDefault,
            cursor: query.cursor
          }),
          (page) => ({
            items: page.items.map((transaction) => ({
              tenantId: transaction.tenantId,
              kind: transaction.kind,
              transaction: transactionObject(catalog, transaction)
            })),
            nextCursor: page.nextCursor
          })
        ))
      .handle("creditDeposit", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          const credited = yield* audit.audited(yield* auditOrigin, manualCredit.credit(tenant.id, params.id), (deposit) => ({
            action: "DEPOSIT_CREDITED",
            target: { type: "TRANSACTION", id: params.id },
            tenantId: tenant.id,
            change: {
              assetId: deposit.assetId,
              amountRaw: deposit.amount.toString(),
              feeRaw: deposit.fee?.toString() ?? null,
              subStatus: { from: "MANUAL_REVIEW", to: deposit.subStatus }
            }
          }))
          return transactionObject(catalog, credited)
        }))
      .handle("approve", ({ params }) => decide(params.tenantId, params.id, "APPROVE"))
      // Only an approval checks the wallets (Transfers.decide): a rejection releases funds whatever their state.
      .handle("reject", ({ params }) =>
        decide(params.tenantId, params.id, "REJECT").pipe(Effect.catchTag("WalletNotActive", Effect.die)))
  }))
