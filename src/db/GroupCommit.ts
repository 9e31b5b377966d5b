/**
 * Group commit: many fibers each hand over one item and wait for its own result, while a single flusher writes
 * everything queued since its last statement as one statement. Under load the statements per second stay few (one
 * per flush, not one per item) and nobody waits for a timer: an item that arrives while a flush runs goes into the
 * next one, which starts as soon as the running one ends. Each caller proceeds only after its own item is written,
 * so durability is the same as writing it alone. Used where a hot path writes one small row per request (NonceStore,
 * Idempotency's claims), or one movement or signing per request (Movements, OutgoingSends), with the helpers below.
 * (Webhook attempts end in plain callbacks, not fibers: WebhookDelivery.ts has a recorder of its own on the same idea.)
 */
import { Context, Deferred, Effect, Exit, Scope } from "effect"
import type { SqlClient } from "effect/sql"

interface Pending<A, B> {
  readonly item: A
  readonly result: Deferred.Deferred<B>
}

/**
 * `write` gets a batch of at most `batchMax` items in arrival order and answers one result per item, in the same
 * order. `write` cannot fail (callers turn storage failures into defects first); when it dies, every caller of that
 * batch dies with its cause, and later batches are written as usual.
 */
export const makeGroupCommit = <A, B>(options: {
  readonly batchMax: number
  readonly write: (batch: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<B>>
}): Effect.Effect<(item: A) => Effect.Effect<B>, never, Scope.Scope> =>
  Effect.map(makeGroupCommitQueue(options), (enqueue) => (item: A) => Effect.flatten(enqueue(item)))

/**
 * The same group commit, for a caller that has more to do before it needs the result: `enqueue` queues the item
 * (a flush starts if none runs) and answers the effect that waits for its result.
 */
export const makeGroupCommitQueue = <A, B>(options: {
  readonly batchMax: number
  readonly write: (batch: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<B>>
}): Effect.Effect<(item: A) => Effect.Effect<Effect.Effect<B>>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Scope.Scope
    let pending: Array<Pending<A, B>> = []
    let flushing = false

    const flush: Effect.Effect<void> = Effect.gen(function*() {
      while (true) {
        // Checked and cleared in one synchronous step. The fiber may yield between any two effects: had `flushing`
        // been cleared after the loop, an item queued in between would see `flushing` still set, start no flush,
        // and wait for some later caller to flush it (a lost wakeup).
        if (pending.length === 0) {
          flushing = false
          return
        }
        const batch = pending.splice(0, options.batchMax)
        const written = yield* Effect.exit(options.write(batch.map((entry) => entry.item)))
        if (written._tag === "Failure") {
          for (const entry of batch) yield* Deferred.failCause(entry.result, written.cause)
          continue
        }
        if (written.value.length !== batch.length) {
          const defect = new Error(`group commit: ${written.value.length} results for ${batch.length} items`)
          for (const entry of batch) yield* Deferred.die(entry.result, defect)
          continue
        }
        for (let index = 0; index < batch.length; index++) {
          yield* Deferred.succeed(batch[index]!.result, written.value[index]!)
        }
      }
    }).pipe(Effect.onInterrupt(() =>
      Effect.sync(() => {
        flushing = false
      })
    ))

    return Effect.fnUntraced(function*(item: A) {
      const result = yield* Deferred.make<B>()
      pending.push({ item, result })
      if (!flushing) {
        flushing = true
        yield* Effect.forkIn(flush, scope)
      }
      return Deferred.await(result)
    })
  })

/**
 * `write` for a batch whose items could each fail on their own (a refusal, a constraint, a deadlock): the batch in
 * one go, and when that fails whole, each item again alone, so every caller gets the outcome it would have had
 * alone. `writeMany` answers one result per item, in order.
 */
export const togetherOrAlone = <A, B, E, R>(
  batch: ReadonlyArray<A>,
  writeMany: (items: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<B>, E, R>
): Effect.Effect<ReadonlyArray<Exit.Exit<B, E>>, never, R> =>
  Effect.flatMap(Effect.exit(writeMany(batch)), (together): Effect.Effect<ReadonlyArray<Exit.Exit<B, E>>, never, R> =>
    Exit.isSuccess(together)
      ? Effect.succeed(together.value.map((result) => Exit.succeed(result) as Exit.Exit<B, E>))
      : batch.length === 1
      ? Effect.succeed([Exit.failCause(together.cause)])
      : Effect.forEach(batch, (item) => Effect.exit(Effect.map(writeMany([item]), (results) => results[0] as B))))

/**
 * A flush runs on the fiber of whichever caller started it, with that caller's context: its statements must never
 * run inside that caller's transaction.
 */
export const outsideTransaction = (sql: SqlClient.SqlClient) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.updateContext(effect, (context: Context.Context<R>) =>
    Context.omit(sql.transactionService)(context) as Context.Context<R>)

/** Which of `stripes` queues serves `key`: the same one for the same key, spread over all of them otherwise. */
export const stripeOf = (key: string, stripes: number): number => {
  let hash = 0
  for (const char of key) hash = (hash * 31 + char.charCodeAt(0)) | 0
  return Math.abs(hash) % stripes
}
