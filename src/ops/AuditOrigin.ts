/** Who made an operator request and under which request id: what its audit entry and a price's `setBy` record. */
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { CurrentRequestId } from "../domain/ApiError.ts"
import type { AuditOrigin } from "./OperatorAudit.ts"

/**
 * The operator interface has one bearer token and no accounts, so the caller names itself in `X-Operator` (e.g. the
 * CLI's user); without it the change is recorded as made by the token holder.
 */
export const operatorHeader = "x-operator"
export const anonymousOperator = "ops-token"
/** Longer names are cut: the name is the caller's say-so, not an identity worth a large row. */
export const operatorNameLengthMax = 200

/** The `X-Operator` name when it is storable text, else `ops-token`. */
export const operatorName: Effect.Effect<string, never, HttpServerRequest.HttpServerRequest> = Effect.map(
  HttpServerRequest.HttpServerRequest,
  (request) => {
    const named = (request.headers[operatorHeader] ?? "").trim()
    const storable = named.length > 0 && named.isWellFormed() && !named.includes("\u0000")
    // Cut by code points, as PostgreSQL counts them: a cut inside a surrogate pair would not be text.
    return storable ? Array.from(named).slice(0, operatorNameLengthMax).join("").trim() : anonymousOperator
  }
)

/** The current operator request's origin (request id from the error boundary, http/ErrorBoundary.ts). */
export const auditOrigin: Effect.Effect<AuditOrigin, never, HttpServerRequest.HttpServerRequest> = Effect.gen(
  function*() {
    return { requestId: yield* CurrentRequestId, operator: yield* operatorName }
  }
)
