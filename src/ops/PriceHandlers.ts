/** Handlers of the operator's prices (operator-interface.md, "Platform": PUT/GET /ops/prices; docs/operations.md). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { type PriceView, PriceFeed } from "../catalog/PriceFeed.ts"
import { toRfc3339 } from "../domain/Time.ts"
import { auditOrigin } from "./AuditOrigin.ts"
import { OperatorAudit } from "./OperatorAudit.ts"
import { OpsApi } from "./OpsApi.ts"

const pricesObject = (view: PriceView) =>
  Object.fromEntries(view.entries.map((entry) => [entry.assetId, {
    priceUsd: entry.priceUsd,
    source: entry.source,
    setAt: entry.setAt === null ? null : toRfc3339(entry.setAt),
    setBy: entry.setBy
  }]))

export const OpsPriceHandlers = HttpApiBuilder.group(OpsApi, "prices", (handlers) =>
  Effect.gen(function*() {
    const priceFeed = yield* PriceFeed
    const audit = yield* OperatorAudit
    return handlers
      .handle("list", () => Effect.map(priceFeed.current, pricesObject))
      .handle("set", ({ payload }) =>
        Effect.gen(function*() {
          // Who set a price is who the audit entry names (ops/AuditOrigin.ts: X-Operator, else the token holder).
          const origin = yield* auditOrigin
          const view = yield* audit.audited(origin, priceFeed.set(payload, origin.operator), () => ({
            action: "PRICES_SET",
            target: { type: "PRICES", id: null },
            tenantId: null,
            change: payload
          }))
          return pricesObject(view)
        }))
  }))
