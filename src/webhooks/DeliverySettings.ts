/**
 * Bounds and timings of webhook delivery. The spec fixes the delivery timeout and the retry schedule
 * (EventTypes.ts); the rest are this service's choices (docs/webhooks.md). The timings are a Context.Reference so a
 * test can shorten them without touching the code that uses them.
 */
import { Context } from "effect"
import { retryScheduleSeconds } from "./EventTypes.ts"

/** Spec 6, rule 1: success is a 2xx within 10 seconds. */
export const deliveryTimeoutMillis = 10_000
/** Spec 6, rule 2: the first attempt plus one per retry delay; after the last failure the delivery is DEAD. */
export const deliveryAttemptsMax = retryScheduleSeconds.length + 1
/** Due deliveries an endpoint takes per round, and how many of them are in flight at once. */
export const deliveryBatchMax = 20
export const deliveryConcurrencyPerEndpoint = 4
/** Batches one round claims at most before it ends (and the entity looks at its mailbox again). */
export const roundBatchesMax = 10
/**
 * Signatures kept for the event's other endpoints (WebhookDelivery.ts, `signedBody`): one per event and second, so
 * this covers the events of a burst that several endpoints take in the same second; a miss only signs again.
 */
export const sharedSignaturesMax = 2_000
/** Events fanned out per statement. */
export const fanOutBatchMax = 500
/** Endpoints the sweeper wakes per round. */
export const sweepEndpointsMax = 1_000
/** A receiver's answer is read up to this much, then the connection is dropped. */
export const responseBodyBytesMax = 64 * 1024
/** Stored `lastError` text (the column allows 1000). */
export const lastErrorLengthMax = 500
/** The fixed text of WEBHOOK_TEST events (spec 6, event types). */
export const testEventMessage = "This is a test event from Coffer."

export interface WebhookTimingsShape {
  /**
   * The lease a round holds on its endpoint (WebhookDelivery.ts, claim): taken for now + this, renewed by a claim once
   * less than three quarters are left. A process that dies mid-attempt leaves it to expire, and the endpoint's
   * deliveries it had not recorded are due again (at least once). A batch is claimed while the previous batch's last
   * attempts are still in flight, so what is left at a claim (at least three quarters, 67.5 s) must outlast those plus
   * the batch itself (one delivery timeout, then deliveryBatchMax / deliveryConcurrencyPerEndpoint waves of at most the
   * delivery timeout: 10 s + 5 × 10 s = 60 s), or a live attempt could be taken twice.
   */
  readonly claimLeaseMillis: number
  /** How often the sweeper looks for due deliveries of endpoints whose entity is not running (restart, passivation). */
  readonly sweepIntervalMillis: number
  /** How often the dispatcher polls the outbox besides the wakes after commits (outbox/OutboxSignal.ts). */
  readonly dispatchPollIntervalMillis: number
  /** A delivery whose signature could not be made (signer disabled) waits this long; not counted as an attempt. */
  readonly signerRetryMillis: number
  /** After an unexpected failure of a delivery round, the endpoint's fiber tries again after this. */
  readonly roundFailureRetryMillis: number
}

export const WebhookTimings = Context.Reference<WebhookTimingsShape>("coffer/WebhookTimings", {
  defaultValue: () => ({
    claimLeaseMillis: 90_000,
    sweepIntervalMillis: 5_000,
    dispatchPollIntervalMillis: 5_000,
    signerRetryMillis: 60_000,
    roundFailureRetryMillis: 5_000
  })
})
