/**
 * Every webhook endpoint is a cluster entity (id = endpoint id) backed by one supervised fiber: while the entity is
 * active, its fiber runs delivery rounds (WebhookDelivery.deliverDue) and sleeps until the next delivery is due on
 * Effect's Clock, or until it is woken. A round that fails unexpectedly is logged and tried again after a pause; it
 * never ends the fiber. Passivation, a defect restart or a shard move interrupts the fiber with the entity; the next
 * activation starts a new one, which reads everything from PostgreSQL.
 *
 * `Wake` is volatile on purpose: the deliveries table is the truth, so a lost wake only waits for the sweeper
 * (webhooks/Dispatcher.ts), which wakes every endpoint with due deliveries, including those of a process that died.
 */
import { Cause, Clock, Duration, Effect, Queue, type Scope } from "effect"
import { Entity, type Sharding } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { WebhookTimings } from "../webhooks/DeliverySettings.ts"
import { WebhookDelivery } from "../webhooks/WebhookDelivery.ts"
import { exactTimers } from "../domain/Polling.ts"

export const Wake = Rpc.make("Wake")

export const WebhookEndpointEntity = Entity.make("WebhookEndpoint", [Wake])

/**
 * An idle entity (no message for this long) is passivated; deliveries due later are picked up by the sweeper, so
 * this only trades memory against how precisely long retry delays (30 min and more) are kept.
 */
export const webhookEntityMaxIdleTimeDefault: Duration.Input = "10 minutes"

export const webhookEndpointEntityLayer = (options: { readonly maxIdleTime?: Duration.Input } = {}) =>
  WebhookEndpointEntity.toLayer(
    Effect.gen(function*() {
      const { entityId } = yield* Entity.CurrentAddress
      const delivery = yield* WebhookDelivery
      // One pending wake is enough: a round reads every due delivery anyway.
      const wakes = yield* Queue.sliding<void>(1)
      // This instance's hold on the endpoint's lease (WebhookDelivery.ts, claim): another instance, here or in another
      // process, sends nothing of this endpoint while it lasts.
      const holder = yield* delivery.newHolder
      let inRound = false
      // Deactivated between rounds (passivation, a shard move), the lease is given up so the next instance starts at
      // once; deactivated mid-round, its attempts may be in flight, so the lease is left to expire as after a crash.
      // Added before the fiber is forked, so it runs after the fiber is interrupted.
      yield* Effect.addFinalizer(() => inRound ? Effect.void : delivery.release(entityId, holder))

      const round = delivery.deliverDue(entityId, holder).pipe(
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.failCause(cause)
            : Effect.gen(function*() {
              yield* Effect.logError(`webhook endpoint ${entityId}: delivery round failed; retrying`, cause)
              const timings = yield* WebhookTimings
              return (yield* Clock.currentTimeMillis) + timings.roundFailureRetryMillis
            })
        )
      )

      /**
       * Until an absolute due time: the clock is read right before the sleep starts, in the same fiber, so time that
       * passed during the round (or while the race was being set up) shortens the wait instead of delaying it.
       */
      const sleepUntil = (dueMillis: number) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sleep(Math.max(0, dueMillis - now)))

      const run = Effect.gen(function*() {
        for (;;) {
          inRound = true
          const nextDueMillis = yield* round
          inRound = false
          yield* Effect.raceFirst(nextDueMillis === undefined ? Effect.never : sleepUntil(nextDueMillis), Queue.take(wakes))
        }
      })
      // Scoped to the entity's handlers: it ends when the entity is passivated, restarted or moved.
      // Its sleeps wait for a delivery's due time: exact instants, never polls (domain/Polling.ts).
      yield* Effect.forkScoped(exactTimers(run))

      return WebhookEndpointEntity.of({
        Wake: () => Queue.offer(wakes, undefined).pipe(Effect.asVoid)
      })
    }),
    {
      maxIdleTime: options.maxIdleTime ?? webhookEntityMaxIdleTimeDefault,
      // A bug fails the message instead of restarting the entity forever (cluster notes, supervision).
      disableFatalDefects: true
    }
  )

export const WebhookEndpointEntityLayer = webhookEndpointEntityLayer()

/**
 * Wakes the endpoints' entities (fire and forget); a wake that cannot be sent is left to the sweeper. The send itself
 * waits for the runner that holds the entity to take it, so a request path forks this (`wakeEndpointsInBackground`).
 */
export const wakeEndpoints = (endpointIds: Iterable<string>): Effect.Effect<void, never, Sharding.Sharding> =>
  Effect.gen(function*() {
    const clientFor = yield* WebhookEndpointEntity.client
    for (const endpointId of endpointIds) {
      yield* clientFor(endpointId).Wake(undefined, { discard: true }).pipe(
        Effect.catchCause((cause) => Effect.logWarning(`could not wake webhook endpoint ${endpointId}`, cause))
      )
    }
  })

/**
 * `wakeEndpoints` forked into `scope` (a service's): a request answers without waiting for another process's runner
 * (frozen, say, until its shards are taken over). The deliveries are committed PENDING and due, so a wake lost with
 * this process or that runner is the dispatcher's sweep's to send (webhooks/Dispatcher.ts `sweepDue`).
 */
export const wakeEndpointsInBackground = (
  endpointIds: Iterable<string>,
  scope: Scope.Scope
): Effect.Effect<void, never, Sharding.Sharding> => Effect.asVoid(Effect.forkIn(wakeEndpoints(endpointIds), scope))
