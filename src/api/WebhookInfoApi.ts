/** The one unauthenticated /v1 route: how deliveries are signed and retried (spec 4.5, `event_types`). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"

export const EventTypesResponse = Schema.Struct({
  eventTypes: Schema.Array(Schema.String),
  signature: Schema.Struct({
    algorithm: Schema.Literal("Ed25519"),
    keyId: Schema.String,
    publicKey: Schema.NullOr(Schema.String),
    headers: Schema.Array(Schema.String),
    signedMessage: Schema.String,
    signatureHeaderFormat: Schema.String
  }),
  retrySchedule: Schema.Array(Schema.String)
}).annotate({ identifier: "WebhookEventTypes" })

export class WebhookInfoApi extends HttpApiGroup.make("webhookInfo")
  .add(HttpApiEndpoint.get("eventTypes", "/v1/webhooks/event_types", { success: EventTypesResponse }))
  .annotateMerge(OpenApi.annotations({ title: "Webhook signing", description: "No authentication (spec 4.5)" }))
{}
