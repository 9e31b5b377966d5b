/**
 * Durable JWT nonces (spec section 5, check 10): a nonce is accepted once per key, across restarts and processes,
 * because the primary key of `auth_nonces` decides. Concurrent requests share one INSERT (group commit): each
 * request still waits for its own nonce to be committed before it proceeds, so a crash can never reopen a replay,
 * but the database sees one statement per flush instead of one per request.
 */
import { Clock, Context, Deferred, Effect, Layer, Schedule, Scope } from "effect"
import { SqlClient } from "effect/sql"

/** Nonces per INSERT at most. */
export const nonceBatchSizeMax = 1_000
/** Expired nonces are purged this often; a nonce can never matter after its JWT's `exp`. */
export const noncePurgeIntervalMillis = 60_000

interface Pending {
  readonly keyId: string
  readonly nonce: string
  readonly expiresAt: Date
  readonly result: Deferred.Deferred<boolean>
}

export class NonceStore extends Context.Service<NonceStore, {
  /** True when the nonce was fresh and is now recorded; false when this key used it before. */
  readonly record: (keyId: string, nonce: string, expiresAtSeconds: number) => Effect.Effect<boolean>
}>()("coffer/NonceStore") {
  static readonly layer = Layer.effect(
    NonceStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const scope = yield* Scope.Scope
      let pending: Array<Pending> = []
      let flushing = false

      const insertBatch = (batch: ReadonlyArray<Pending>) =>
        sql<{ key_id: string; nonce: string }>`
          INSERT INTO auth_nonces (key_id, nonce, expires_at)
          SELECT key_id, nonce, expires_at FROM jsonb_to_recordset(${
          JSON.stringify(batch.map((p) => ({ key_id: p.keyId, nonce: p.nonce, expires_at: p.expiresAt.toISOString() })))
        }::jsonb) AS batch (key_id text, nonce text, expires_at timestamptz)
          ON CONFLICT (key_id, nonce) DO NOTHING
          RETURNING key_id, nonce`

      const flush: Effect.Effect<void> = Effect.gen(function*() {
        while (true) {
          // Checked and cleared in one synchronous step. The fiber may yield between any two effects: had
          // `flushing` been cleared after the loop, a nonce queued in between would see `flushing` still set, start
          // no flush, and wait for some later request to flush it (a lost wakeup, up to the 30 s request limit).
          if (pending.length === 0) {
            flushing = false
            return
          }
          const taken = pending.splice(0, nonceBatchSizeMax)
          // Two requests with one nonce in the same batch: only the first may win.
          const seen = new Set<string>()
          const batch: Array<Pending> = []
          for (const item of taken) {
            const id = `${item.keyId}\u0000${item.nonce}`
            if (seen.has(id)) yield* Deferred.succeed(item.result, false)
            else {
              seen.add(id)
              batch.push(item)
            }
          }
          const inserted = yield* Effect.exit(insertBatch(batch))
          if (inserted._tag === "Failure") {
            for (const item of batch) yield* Deferred.die(item.result, inserted.cause)
            continue
          }
          const fresh = new Set(inserted.value.map((row) => `${row.key_id}\u0000${row.nonce}`))
          for (const item of batch) yield* Deferred.succeed(item.result, fresh.has(`${item.keyId}\u0000${item.nonce}`))
        }
      }).pipe(Effect.onInterrupt(() =>
        Effect.sync(() => {
          flushing = false
        })
      ))

      // On the path of every signed request: no span of its own.
      const record = Effect.fnUntraced(function*(keyId: string, nonce: string, expiresAtSeconds: number) {
        const result = yield* Deferred.make<boolean>()
        pending.push({ keyId, nonce, expiresAt: new Date(expiresAtSeconds * 1000), result })
        if (!flushing) {
          flushing = true
          yield* Effect.forkIn(flush, scope)
        }
        return yield* Deferred.await(result)
      })

      yield* Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        yield* sql`DELETE FROM auth_nonces WHERE expires_at < ${new Date(now)}`
      }).pipe(
        Effect.catchCause((cause) => Effect.logWarning("nonce purge failed", cause)),
        Effect.repeat(Schedule.spaced(noncePurgeIntervalMillis)),
        Effect.forkIn(scope)
      )

      return NonceStore.of({ record })
    })
  )
}
