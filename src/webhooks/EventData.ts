/**
 * What goes into a delivery's `data`. For most events it is the data stored with the event. For `TRANSACTION_*`
 * events the spec wants "the latest transaction object at delivery time" (section 6), so a retried event may carry a
 * newer status than it announced: the transactions stage provides a renderer that reads the transaction by the
 * event's `subjectId` (its transaction id) and falls back to the stored data for every other type (docs/webhooks.md
 * has it, ready for the merge); App.ts provides the renderer. Rendering runs on every attempt, so the body, and with
 * it the signature, is rebuilt each time.
 */
import { Context, Effect, Layer } from "effect"

export interface StoredEvent {
  readonly id: string
  readonly tenantId: string
  readonly type: string
  /** What the event is about: the wallet id, the transaction id, the endpoint id of a test event. */
  readonly subjectId: string
  readonly data: unknown
  readonly createdAt: Date
}

export class EventDataRenderer extends Context.Service<EventDataRenderer, {
  readonly render: (event: StoredEvent) => Effect.Effect<unknown>
}>()("coffer/EventDataRenderer") {
  /** The stored data for every type: right for all events until transactions render their own. */
  static readonly layer = Layer.succeed(EventDataRenderer)({ render: (event) => Effect.succeed(event.data) })
}
