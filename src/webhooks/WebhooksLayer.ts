/**
 * Webhooks as one layer for App.ts: the endpoint and delivery services the handlers use, the endpoint entities, and
 * the dispatcher/sweeper loop. The data renderer is the seam for `TRANSACTION_*` events (EventData.ts): replace
 * `EventDataRenderer.layer` here when transactions render their own.
 */
import { Layer } from "effect"
import { WebhookEndpointEntityLive } from "../entities/WebhookEndpointEntity.ts"
import { WebhookDispatcher } from "./Dispatcher.ts"
import { EventDataRenderer } from "./EventData.ts"
import { WebhookDeliveries } from "./WebhookDeliveries.ts"
import { WebhookDelivery } from "./WebhookDelivery.ts"
import { WebhookEndpoints } from "./WebhookEndpoints.ts"
import { WebhookTransport } from "./WebhookTransport.ts"

export const WebhooksLayer = Layer.mergeAll(WebhookEndpoints.layer, WebhookDeliveries.layer, WebhookDispatcher).pipe(
  Layer.provideMerge(WebhookEndpointEntityLive),
  Layer.provideMerge(WebhookDelivery.layer),
  Layer.provideMerge(Layer.mergeAll(WebhookTransport.layer, EventDataRenderer.layer))
)
