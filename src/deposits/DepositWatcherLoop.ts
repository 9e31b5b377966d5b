/**
 * The background scans of deposits: when each watched network is scanned (DepositWatcher.ts does one scan), how a
 * failing network backs off, and how many scans may hold a connection at once.
 */
import { Clock, Effect, Exit, Layer, Schedule, Semaphore } from "effect"
import { Singleton } from "effect/cluster"
import { ChainClients } from "../chains/ChainClient.ts"
import { DepositWatcher, scanIntervalMillis } from "./DepositWatcher.ts"
import { pollingLoop } from "../domain/Polling.ts"

/**
 * After a failed scan a network waits 2, 4, 8, ... scan intervals, at most this long, before it is tried again: a
 * node that is down is neither asked nor logged about every second.
 */
export const scanBackoffMaxMillis = 60_000
/**
 * Background scans running at once, across networks. A scan holds a pooled connection for each step, also while it
 * waits on its node, so without a bound a few slow nodes could take the whole pool (`poolConnectionsMax`, 10) from
 * the API. One hung node still leaves the other networks the remaining slots.
 */
export const scansConcurrentMax = 4

/**
 * One network's scans, every `scanIntervalMillis`, with its own backoff (above); `scanSlots` bounds the scans of one
 * process across networks.
 */
export const scanNetworkLoop = (networkKey: string, scanSlots: Semaphore.Semaphore) =>
  Effect.gen(function*() {
    const watcher = yield* DepositWatcher
    let failing: { readonly count: number; readonly retryAtMillis: number } | undefined
    const scanOne = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const previous = failing
      if (previous !== undefined && now < previous.retryAtMillis) return
      const exit = yield* Effect.exit(scanSlots.withPermit(watcher.scan(networkKey)))
      if (Exit.isSuccess(exit)) {
        if (previous !== undefined) {
          failing = undefined
          yield* Effect.logInfo(`deposit scan of ${networkKey} works again after ${previous.count} failures`)
        }
        return
      }
      const count = (previous?.count ?? 0) + 1
      const delayMillis = Math.min(scanIntervalMillis * 2 ** count, scanBackoffMaxMillis)
      failing = { count, retryAtMillis: now + delayMillis }
      yield* Effect.logWarning(
        `deposit scan of ${networkKey} failed (${count} in a row); next try in ${delayMillis} ms`,
        exit.cause
      )
    })
    yield* scanOne.pipe(Effect.repeat(Schedule.spaced(scanIntervalMillis)), pollingLoop)
  })

/**
 * Scans each watched network every `scanIntervalMillis`, each on a fiber of its own: a node that hangs (or answers
 * slowly) stalls only its own network's scans. A failing network backs off (above) and is logged. This is the
 * single-process form (tests); the service runs `DepositWatcherSingletons`.
 */
export const DepositWatcherLoop = Layer.effectDiscard(Effect.gen(function*() {
  const clients = yield* ChainClients
  const scanSlots = yield* Semaphore.make(scansConcurrentMax)
  yield* Effect.forEach(
    clients.networkKeys,
    (networkKey) => Effect.forkScoped(scanNetworkLoop(networkKey, scanSlots)),
    { discard: true }
  )
}))

/**
 * The service's watchers: one cluster singleton per network (entities/ClusterDuties.ts), so each network is scanned by
 * one process of the cluster, the networks spread over the processes, and a network whose process dies is taken over
 * by another like any entity. The concurrency bound stays per process.
 */
export const DepositWatcherSingletons = Layer.unwrap(Effect.gen(function*() {
  const clients = yield* ChainClients
  const scanSlots = yield* Semaphore.make(scansConcurrentMax)
  return Layer.mergeAll(
    Layer.empty,
    ...clients.networkKeys.map((networkKey) =>
      Singleton.make(`coffer/deposit-watcher/${networkKey}`, scanNetworkLoop(networkKey, scanSlots))
    )
  )
}))
