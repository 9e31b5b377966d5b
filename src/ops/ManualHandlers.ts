/** Handlers of approvals and manual handling (operator-interface.md). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Catalog } from "../catalog/Catalog.ts"
import { ManualDepositCredit } from "../deposits/ManualDepositCredit.ts"
import { NotFound } from "../domain/ApiError.ts"
import { transactionObject } from "../http/TransactionViews.ts"
import { Tenants } from "../tenants/Tenants.ts"
import { OpsApi } from "./OpsApi.ts"

export const OpsManualHandlers = HttpApiBuilder.group(OpsApi, "manual", (handlers) =>
  Effect.gen(function*() {
    const manualCredit = yield* ManualDepositCredit
    const tenants = yield* Tenants
    const catalog = yield* Catalog
    return handlers.handle("creditDeposit", ({ params }) =>
      Effect.gen(function*() {
        const tenant = yield* tenants.get(params.tenantId)
        if (tenant === undefined) return yield* new NotFound({ message: "tenant not found" })
        return transactionObject(catalog, yield* manualCredit.credit(tenant.id, params.id))
      }))
  }))
