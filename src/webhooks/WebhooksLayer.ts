/**
 * Webhooks as one layer for App.ts: the endpoint and delivery services the handlers use, the endpoint entities, and
 * the dispatcher/sweeper loop. It requires an `EventDataRenderer` (EventData.ts), which App.ts provides: that line is
 * the seam where `TRANSACTION_*` events get the latest transaction object.
 */
import { Layer } from "effect"
import { clusterDuty } from "../entities/ClusterDuties.ts"
import { ServiceInstance } from "../idempotency/ServiceInstance.ts"
import { WebhookEndpointEntityLayer } from "../entities/WebhookEndpointEntity.ts"
import { WebhookDispatcher } from "./Dispatcher.ts"
import { WebhookDeliveries } from "./WebhookDeliveries.ts"
import { WebhookDelivery } from "./WebhookDelivery.ts"
import { WebhookEndpoints } from "./WebhookEndpoints.ts"
import { WebhookTransport } from "./WebhookTransport.ts"

export const WebhooksLayer = Layer.mergeAll(
  WebhookEndpoints.layer,
  WebhookDeliveries.layer,
  // One dispatcher in the cluster (ClusterDuties.ts); the other processes wake it by NOTIFY (OutboxSignal.ts).
  clusterDuty("webhook-dispatcher", WebhookDispatcher)
).pipe(
  Layer.provideMerge(WebhookEndpointEntityLayer),
  // The same ServiceInstance.layer the idempotency engine uses (one process, one instance: layers are memoized).
  Layer.provideMerge(WebhookDelivery.layer.pipe(Layer.provide(ServiceInstance.layer))),
  Layer.provideMerge(WebhookTransport.layer)
)
