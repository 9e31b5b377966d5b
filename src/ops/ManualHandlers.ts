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
import { OpsApi } from "./OpsApi.ts"

export const OpsManualHandlers = HttpApiBuilder.group(OpsApi, "manual", (handlers) =>
  Effect.gen(function*() {
    const manualCredit = yield* ManualDepositCredit
    const tenants = yield* Tenants
    const catalog = yield* Catalog
    const transfers = yield* Transfers
    const withdrawals = yield* Withdrawals
    const transactions = yield* TransactionRepository
    /** A pending withdrawal goes on to QUEUED or is rejected; a pending internal transfer completes or is rejected. */
    const decide = (tenantId: string, id: string, decision: "APPROVE" | "REJECT") =>
      Effect.gen(function*() {
        const tenant = yield* tenants.require(tenantId)
        const transaction = yield* transactions.find(tenant.id, id)
        const decided = transaction?.kind === "WITHDRAWAL"
          ? yield* withdrawals.decide(tenant.id, id, decision)
          : yield* transfers.decide(tenant.id, id, decision)
        return transactionObject(catalog, decided)
      })
    return handlers
      .handle("creditDeposit", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          return transactionObject(catalog, yield* manualCredit.credit(tenant.id, params.id))
        }))
      .handle("approve", ({ params }) => decide(params.tenantId, params.id, "APPROVE"))
      // Only an approval checks the wallets (Transfers.decide): a rejection releases funds whatever their state.
      .handle("reject", ({ params }) =>
        decide(params.tenantId, params.id, "REJECT").pipe(Effect.catchTag("WalletNotActive", Effect.die)))
  }))
