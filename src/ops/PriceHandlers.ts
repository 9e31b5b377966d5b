/** Handlers of the operator's prices (operator-interface.md, "Platform": PUT/GET /ops/prices; docs/operations.md). */
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { type PriceView, PriceFeed } from "../catalog/PriceFeed.ts"
import { toRfc3339 } from "../domain/Time.ts"
import { OpsApi } from "./OpsApi.ts"

/**
 * Who set a price, for the audit trail: the operator interface has one bearer token and no accounts, so the caller
 * names itself in `X-Operator` (e.g. the CLI's user); without it the change is recorded as made by the token holder.
 */
export const operatorHeader = "x-operator"
export const anonymousOperator = "ops-token"

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
    return handlers
      .handle("list", () => Effect.map(priceFeed.current, pricesObject))
      .handle("set", ({ payload }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const named = (request.headers[operatorHeader] ?? "").trim()
          const storable = named.length > 0 && named.isWellFormed() && !named.includes("\u0000")
          const setBy = storable ? named : anonymousOperator
          return pricesObject(yield* priceFeed.set(payload, setBy))
        }))
  }))
