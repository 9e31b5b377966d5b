/** GET /ops/audit (operator-interface.md, "Listing, audit and documents"; docs/operations.md, "Audit trail"). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { PageLimit } from "../api/Common.ts"
import { BadRequestWire } from "../domain/ApiError.ts"
import { auditActions, auditTargetTypes } from "../domain/AuditActions.ts"
import { Uuid } from "../domain/Ids.ts"

export const AuditEntryObject = Schema.Struct({
  id: Schema.String,
  /** When the change was committed (RFC 3339 UTC). */
  at: Schema.String,
  action: Schema.Literals(auditActions),
  /** What was changed: its kind and id (null when the action names several, as a PUT /ops/prices). */
  target: Schema.Struct({ type: Schema.Literals(auditTargetTypes), id: Schema.NullOr(Schema.String) }),
  /** The tenant the change belongs to; null for platform-wide changes (network and asset switches, prices). */
  tenantId: Schema.NullOr(Schema.String),
  /** What changed, per action (docs/operations.md); never a secret. */
  change: Schema.Record(Schema.String, Schema.Unknown),
  /** The operator request's X-Request-Id. */
  requestId: Schema.String,
  /** The caller's X-Operator header, or `ops-token`. */
  operator: Schema.String
}).annotate({ identifier: "AuditEntry" })

export class OpsAuditApi extends HttpApiGroup.make("audit")
  .add(
    HttpApiEndpoint.get("list", "/ops/audit", {
      query: {
        // Strings here: a value that is not RFC 3339 is a 422 naming the bounds (as /v1's createdFrom/createdTo).
        from: Schema.optional(Schema.String.annotate({ description: "RFC 3339, inclusive" })),
        to: Schema.optional(Schema.String.annotate({ description: "RFC 3339, exclusive" })),
        action: Schema.optional(Schema.Literals(auditActions)),
        tenantId: Schema.optional(Uuid),
        limit: Schema.optional(PageLimit),
        cursor: Schema.optional(Uuid)
      },
      success: Schema.Struct({ items: Schema.Array(AuditEntryObject), nextCursor: Schema.NullOr(Schema.String) }),
      error: [BadRequestWire]
    })
      .annotate(OpenApi.Summary, "List the audit trail")
      .annotate(
        OpenApi.Description,
        "Every operator request that changed something, newest first, each stored in the transaction of its change " +
          "and never edited. `nextCursor` is set when the page is full."
      )
  )
  .annotateMerge(OpenApi.annotations({ title: "Audit trail" }))
{}
