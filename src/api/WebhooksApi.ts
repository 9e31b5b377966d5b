/**
 * Webhook endpoints, deliveries and the verification key (spec 4.5, section 2 "Webhook endpoint object", "Webhook
 * delivery record"). `GET /v1/webhooks/event_types` is the unauthenticated group in WebhookInfoApi.ts.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { LimitExceededWire, NotFoundWire, SignerUnavailableWire } from "../domain/ApiError.ts"
import { Uuid } from "../domain/Ids.ts"
import { storable } from "../domain/StorableText.ts"
import { DecimalIntegerFromString, PageLimit } from "./Common.ts"

export const WebhookEndpointStatus = Schema.Literals(["ACTIVE", "DISABLED"])
export const WebhookDeliveryStatus = Schema.Literals(["PENDING", "DELIVERED", "DEAD"])

export const WebhookEndpointObject = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  description: Schema.NullOr(Schema.String),
  status: WebhookEndpointStatus,
  createdAt: Schema.String
}).annotate({ identifier: "WebhookEndpoint" })
export type WebhookEndpointObject = typeof WebhookEndpointObject.Type

export const WebhookDeliveryRecord = Schema.Struct({
  id: Schema.Number,
  eventId: Schema.String,
  eventType: Schema.String,
  endpointId: Schema.String,
  url: Schema.String,
  status: WebhookDeliveryStatus,
  attempt: Schema.Number,
  responseStatus: Schema.NullOr(Schema.Number),
  lastError: Schema.NullOr(Schema.String),
  durationMs: Schema.NullOr(Schema.Number),
  lastAttemptAt: Schema.NullOr(Schema.String),
  nextAt: Schema.NullOr(Schema.String)
}).annotate({ identifier: "WebhookDelivery" })
export type WebhookDeliveryRecord = typeof WebhookDeliveryRecord.Type

/** Field types only: URL, event and description rules answer with their own messages (422). */
export const CreateWebhookBody = storable(Schema.Struct({
  url: Schema.String,
  events: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  description: Schema.optional(Schema.NullOr(Schema.String))
}))
export const PatchWebhookBody = storable(Schema.Struct({
  url: Schema.optional(Schema.String),
  events: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  description: Schema.optional(Schema.NullOr(Schema.String)),
  active: Schema.optional(Schema.Boolean)
}))

/** A delivery id as `before`: decimal digits, a positive integer; anything else is 400 before authentication. */
export const DeliveryIdParam = DecimalIntegerFromString({ minimum: 1, maximum: 999_999_999_999_999 })

const endpointParams = { id: Uuid }

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.post("create", "/v1/webhooks", {
      payload: CreateWebhookBody,
      success: WebhookEndpointObject.pipe(HttpApiSchema.status(201)),
      error: [LimitExceededWire]
    }).annotate(OpenApi.Description, "Not idempotent: a repeat registers another endpoint."),
    HttpApiEndpoint.get("list", "/v1/webhooks", { success: Schema.Array(WebhookEndpointObject) })
      .annotate(OpenApi.Description, "Every endpoint of the tenant, disabled ones included, newest first."),
    HttpApiEndpoint.patch("update", "/v1/webhooks/:id", {
      params: endpointParams,
      payload: PatchWebhookBody,
      success: WebhookEndpointObject,
      error: [NotFoundWire, LimitExceededWire]
    }),
    HttpApiEndpoint.delete("disable", "/v1/webhooks/:id", {
      params: endpointParams,
      success: HttpApiSchema.NoContent,
      error: [NotFoundWire]
    }).annotate(OpenApi.Description, "The endpoint becomes DISABLED; the record is kept."),
    HttpApiEndpoint.post("test", "/v1/webhooks/:id/test", {
      params: endpointParams,
      success: Schema.Struct({ eventId: Schema.String }).pipe(HttpApiSchema.status(202)),
      error: [NotFoundWire]
    }).annotate(OpenApi.Description, "A WEBHOOK_TEST event for this endpoint only; a DISABLED one gets it once re-enabled."),
    HttpApiEndpoint.get("deliveries", "/v1/webhooks/deliveries", {
      query: {
        endpointId: Schema.optional(Uuid),
        status: Schema.optional(WebhookDeliveryStatus),
        limit: Schema.optional(PageLimit),
        before: Schema.optional(DeliveryIdParam)
      },
      success: Schema.Struct({ items: Schema.Array(WebhookDeliveryRecord) })
    }).annotate(OpenApi.Description, "Newest first; the last page has fewer than `limit` items."),
    HttpApiEndpoint.post("resend", "/v1/webhooks/events/:eventId/resend", {
      params: { eventId: Uuid },
      success: Schema.Struct({ eventId: Schema.String, requeued: Schema.Number }),
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.get("publicKey", "/v1/webhooks/public_key", {
      success: Schema.Struct({ keyId: Schema.String, publicKey: Schema.String }),
      error: [SignerUnavailableWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Webhooks", description: "Webhook endpoints and deliveries (spec 4.5)" }))
{}
