/** Handlers of the webhooks group (spec 4.5); the rules live in webhooks/. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { pageLimitDefault } from "../api/Common.ts"
import type { WebhookDeliveryRecord, WebhookEndpointObject } from "../api/WebhooksApi.ts"
import { CurrentApiKey } from "../api/SignatureAuth.ts"
import { toRfc3339 } from "../domain/Time.ts"
import { Signer } from "../signer/Signer.ts"
import { webhookKeyId } from "../webhooks/EventTypes.ts"
import type { DeliveryRecord } from "../webhooks/WebhookDeliveries.ts"
import { WebhookDeliveries } from "../webhooks/WebhookDeliveries.ts"
import { type WebhookEndpoint, WebhookEndpoints } from "../webhooks/WebhookEndpoints.ts"

export const webhookEndpointObject = (endpoint: WebhookEndpoint): WebhookEndpointObject => ({
  id: endpoint.id,
  url: endpoint.url,
  events: [...endpoint.events],
  description: endpoint.description,
  status: endpoint.status,
  createdAt: toRfc3339(endpoint.createdAt)
})

export const webhookDeliveryRecord = (record: DeliveryRecord): WebhookDeliveryRecord => ({
  id: record.id,
  eventId: record.eventId,
  eventType: record.eventType,
  endpointId: record.endpointId,
  url: record.url,
  status: record.status,
  attempt: record.attempt,
  responseStatus: record.responseStatus,
  lastError: record.lastError,
  durationMs: record.durationMs,
  lastAttemptAt: record.lastAttemptAt === null ? null : toRfc3339(record.lastAttemptAt),
  nextAt: record.nextAt === null ? null : toRfc3339(record.nextAt)
})

/** Only the tenant id is needed here, so the tenant row is not read. */
const tenantId = Effect.map(Effect.service(CurrentApiKey), (key) => key.tenantId)

export const WebhooksHandlers = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const endpoints = yield* WebhookEndpoints
    const deliveries = yield* WebhookDeliveries
    const signer = yield* Signer

    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(tenantId, (tenant) => endpoints.create(tenant, payload)).pipe(Effect.map(webhookEndpointObject)))
      .handle("list", () =>
        Effect.flatMap(tenantId, (tenant) => endpoints.list(tenant)).pipe(
          Effect.map((items) => items.map(webhookEndpointObject))
        ))
      .handle("update", ({ params, payload }) =>
        Effect.flatMap(tenantId, (tenant) => endpoints.update(tenant, params.id, payload)).pipe(
          Effect.map(webhookEndpointObject)
        ))
      .handle("disable", ({ params }) => Effect.flatMap(tenantId, (tenant) => endpoints.disable(tenant, params.id)))
      .handle("test", ({ params }) =>
        Effect.flatMap(tenantId, (tenant) => endpoints.sendTest(tenant, params.id)).pipe(
          Effect.map((eventId) => ({ eventId }))
        ))
      .handle("deliveries", ({ query }) =>
        Effect.flatMap(tenantId, (tenant) =>
          deliveries.list(tenant, {
            endpointId: query.endpointId,
            status: query.status,
            limit: query.limit ?? pageLimitDefault,
            before: query.before
          })).pipe(Effect.map((items) => ({ items: items.map(webhookDeliveryRecord) }))))
      .handle("resend", ({ params }) =>
        Effect.flatMap(tenantId, (tenant) => deliveries.resend(tenant, params.eventId)).pipe(
          Effect.map((requeued) => ({ eventId: params.eventId, requeued }))
        ))
      .handle("publicKey", () =>
        Effect.map(signer.webhookPublicKey(), (publicKey) => ({ keyId: webhookKeyId, publicKey })))
  }))
