/** GET /ops/audit (operator-interface.md, "Listing, audit and documents"; docs/operations.md, "Audit trail"). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { pageLimitDefault } from "../api/Common.ts"
import { BadRequest } from "../domain/ApiError.ts"
import { parseRfc3339, toRfc3339 } from "../domain/Time.ts"
import { OperatorAudit } from "./OperatorAudit.ts"
import { OpsApi } from "./OpsApi.ts"

/** An optional RFC 3339 query bound; one message for both, as /v1's createdFrom/createdTo. */
const optionalTime = (value: string | undefined) =>
  value === undefined
    ? Effect.succeed(undefined)
    : Effect.fromNullishOr(parseRfc3339(value)).pipe(
      Effect.mapError(() => new BadRequest({ message: "from/to must be RFC 3339" }))
    )

export const OpsAuditHandlers = HttpApiBuilder.group(OpsApi, "audit", (handlers) =>
  Effect.gen(function*() {
    const audit = yield* OperatorAudit
    return handlers.handle("list", ({ query }) =>
      Effect.gen(function*() {
        const page = yield* audit.list({
          from: yield* optionalTime(query.from),
          to: yield* optionalTime(query.to),
          action: query.action,
          tenantId: query.tenantId,
          limit: query.limit ?? pageLimitDefault,
          cursor: query.cursor
        })
        return {
          items: page.items.map((entry) => ({
            id: entry.id,
            at: toRfc3339(entry.at),
            action: entry.action,
            target: entry.target,
            tenantId: entry.tenantId,
            change: entry.change,
            requestId: entry.requestId,
            operator: entry.operator
          })),
          nextCursor: page.nextCursor
        }
      }))
  }))
