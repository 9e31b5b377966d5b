/**
 * Marks the sleeps of periodic background loops (polls and housekeeping that repeat on a fixed interval) apart from
 * sleeps that wait for one instant (a webhook retry's due time, a request's timeout). Production ignores the mark.
 * The testers' kit (src/testing/VirtualClock.ts) reads it: when nothing in the service has changed, a polling sleep
 * would only find nothing again, so a long jump of virtual time runs it at the next instant that matters instead of
 * every second in between.
 */
import { Context, Effect } from "effect"

export const PollingLoop = Context.Reference<boolean>("coffer/PollingLoop", { defaultValue: () => false })

/** `effect` (a loop) with every sleep in it marked as a poll. */
export const pollingLoop = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, PollingLoop, true)

/** `effect` with its sleeps marked as waits for an instant again, inside a polling context (an entity's timers). */
export const exactTimers = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, PollingLoop, false)
