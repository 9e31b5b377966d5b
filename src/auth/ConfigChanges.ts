/**
 * Operator changes to API keys and tenants reach every process at once: the writer announces them on a PostgreSQL
 * channel, and each process's caches listen and drop their entries. Together with the in-process invalidation this
 * makes a revoked key fail on the next request in every process; the caches' TTL stays as the bound should a
 * notification be lost with a connection.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Queue, Schedule, type Scope } from "effect"

export const configChangedChannel = "coffer_config_changed"

export const announceConfigChange = Effect.gen(function*() {
  const pg = yield* PgClient.PgClient
  yield* pg.notify(configChangedChannel, "changed")
}).pipe(Effect.catchCause((cause) => Effect.logWarning("could not announce a configuration change", cause)))

/**
 * One listener per process, shared by every cache: each `pg.listen` pins one of the pool's connections for good, and
 * a pool of 10 already had five pinned (the cluster's shard locks, the instance's liveness lock, the outbox and two
 * listeners on this one channel), which left five for requests and workers.
 */
export class ConfigChanges extends Context.Service<ConfigChanges, {
  /**
   * Runs `clear` on every announcement, and whenever the listener (re)connects (anything may have changed while it
   * was not listening), for the life of the enclosing scope.
   */
  readonly onChange: (clear: Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
}>()("coffer/ConfigChanges") {
  static readonly layer = Layer.effect(
    ConfigChanges,
    Effect.gen(function*() {
      const pg = yield* PgClient.PgClient
      const subscribers = new Set<Effect.Effect<void>>()
      const clearAll = Effect.suspend(() => Effect.forEach([...subscribers], (clear) => clear, { discard: true }))
      yield* Effect.scoped(Effect.gen(function*() {
        const notifications = yield* pg.listen(configChangedChannel)
        yield* clearAll
        for (;;) {
          yield* Queue.take(notifications)
          yield* clearAll
        }
      })).pipe(
        Effect.tapCause((cause) => Effect.logWarning("configuration change listener failed; reconnecting", cause)),
        Effect.retry(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
      return ConfigChanges.of({
        onChange: (clear) =>
          Effect.acquireRelease(
            Effect.sync(() => subscribers.add(clear)),
            () => Effect.sync(() => subscribers.delete(clear))
          ).pipe(Effect.asVoid)
      })
    })
  )
}
