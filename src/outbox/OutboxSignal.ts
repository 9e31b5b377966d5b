/**
 * Wakes the webhook dispatcher once events are committed, without a NOTIFY in the transaction that wrote them.
 *
 * Why not a NOTIFY at commit (what the `outbox_events_notify` trigger did until sql/0023): PostgreSQL serializes the
 * commits of every transaction that notified, holding one database-wide lock from before its commit record until its
 * end, through the WAL flush. Every transfer, withdrawal and deposit writes an event, so their commits queued one
 * behind another: sampling `pg_stat_activity` in the bench's transfers load found on average 0.85 of the 10 pool
 * connections waiting on that lock (`Lock:object`) and 0.55 in a WAL flush, while 7.5 sat idle (2026-11-27).
 *
 * Instead, whoever records an event calls `committed` after its commit (Outbox does it through
 * `SqlClient.afterCommit`). While this process runs a dispatcher, that wakes it directly: every dispatcher can fan out
 * every event and wake every endpoint's entity wherever the cluster runs it, so no other process needs waking. A
 * process without a dispatcher (a test process or a tool writing events) sends one NOTIFY on `outboxChannel` in its
 * own transaction after the commit, at most one in flight, so a burst of events costs a handful. A lost wake only
 * delays: every dispatcher also polls (WebhookTimings `dispatchPollIntervalMillis`).
 */
import { Cause, Context, Effect, Layer, Queue, type Scope } from "effect"
import { SqlClient } from "effect/sql"

/** The channel every dispatcher listens on: what a process without a dispatcher notifies after its events commit. */
export const outboxChannel = "coffer_outbox"

export class OutboxSignal extends Context.Service<OutboxSignal, {
  /** Events were committed: wakes this process's dispatcher, or, with none running here, the others'. */
  readonly committed: Effect.Effect<void>
  /**
   * A dispatcher's wake-ups, for as long as its scope lasts (sliding, room for one: wakes fold while it works); while
   * any is open, `committed` sends no NOTIFY. The dispatcher offers its LISTEN's notifications to it too.
   */
  readonly subscribe: Effect.Effect<Queue.Queue<void>, never, Scope.Scope>
}>()("coffer/OutboxSignal") {
  static readonly layer = Layer.effect(
    OutboxSignal,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const dispatchers = new Set<Queue.Queue<void>>()
      // Sliding with room for one: wakes asked while a NOTIFY is on its way fold into the next one.
      const notifyAsked = yield* Queue.sliding<void>(1)

      yield* Effect.gen(function*() {
        for (;;) {
          yield* Queue.take(notifyAsked)
          yield* sql`SELECT pg_notify(${outboxChannel}, '')`.pipe(
            Effect.catchCause((cause) =>
              Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.logWarning("outbox notify failed", cause)
            )
          )
        }
      }).pipe(Effect.forkScoped)

      const committed = Effect.suspend(() => {
        if (dispatchers.size === 0) return Effect.asVoid(Queue.offer(notifyAsked, undefined))
        return Effect.forEach(dispatchers, (queue) => Queue.offer(queue, undefined), { discard: true })
      })

      const subscribe = Effect.acquireRelease(
        Effect.tap(Queue.sliding<void>(1), (queue) => Effect.sync(() => dispatchers.add(queue))),
        (queue) => Effect.sync(() => dispatchers.delete(queue))
      )

      return OutboxSignal.of({ committed, subscribe })
    })
  )
}
