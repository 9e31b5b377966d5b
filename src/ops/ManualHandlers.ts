/** Handlers of approvals and manual handling (operator-interface.md). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Catalog } from "../catalog/Catalog.ts"
import { ManualDepositCredit } from "../deposits/ManualDepositCredit.ts"
import { NotFound } from "../domain/ApiError.ts"
import { transactionObject } from "../http/TransactionViews.ts"
import { Tenants } from "../tenants/Tenants.ts"
import { Transfers } from "../transfers/Transfers.ts"
import { OpsApi } from "./OpsApi.ts"

export const OpsManualHandlers = HttpApiBuilder.group(OpsApi, "manual", (handlers) =>
  Effect.gen(function*() {
    const manualCredit = yield* ManualDepositCredit
    const tenants = yield* Tenants
    const catalog = yield* Catalog
    const transfers = yield* Transfers
    const tenantOf = (tenantId: string) =>
      Effect.flatMap(tenants.get(tenantId), (tenant) =>
        tenant === undefined ? Effect.fail(new NotFound({ message: "tenant not found" })) : Effect.succeed(tenant))
    return handlers
      .handle("creditDeposit", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenantOf(params.tenantId)
          return transactionObject(catalog, yield* manualCredit.credit(tenant.id, params.id))
        }))
      .handle("approve", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenantOf(params.tenantId)
          return transactionObject(catalog, yield* transfers.decide(tenant.id, params.id, "APPROVE"))
        }))
      .handle("reject", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenantOf(params.tenantId)
          return transactionObject(catalog, yield* transfers.decide(tenant.id, params.id, "REJECT"))
        }))
  }))
