/**
 * Operator changes to API keys and tenants reach every process at once: the writer announces them on a PostgreSQL
 * channel, and each process's caches listen and drop their entries. Together with the in-process invalidation this
 * makes a revoked key fail on the next request in every process; the caches' TTL stays as the bound should a
 * notification be lost with a connection.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Queue, Schedule } from "effect"

export const configChangedChannel = "coffer_config_changed"

export const announceConfigChange = Effect.gen(function*() {
  const pg = yield* PgClient.PgClient
  yield* pg.notify(configChangedChannel, "changed")
}).pipe(Effect.catchCause((cause) => Effect.logWarning("could not announce a configuration change", cause)))

/** Runs `clear` on every announcement, for the life of the enclosing scope (reconnecting after failures). */
export const onConfigChange = (clear: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const pg = yield* PgClient.PgClient
    yield* Effect.scoped(Effect.gen(function*() {
      const notifications = yield* pg.listen(configChangedChannel)
      // Anything may have changed while not listening.
      yield* clear
      for (;;) {
        yield* Queue.take(notifications)
        yield* clear
      }
    })).pipe(
      Effect.tapCause((cause) => Effect.logWarning("configuration change listener failed; reconnecting", cause)),
      Effect.retry(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
  })
