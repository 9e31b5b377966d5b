/**
 * The scenario's clock: Effect's `Clock` service over virtual time, like `TestClock`, with what a whole-service
 * scenario needs on top of it. `TestClock.adjust` wakes each sleep and waits only for the work that follows it
 * synchronously; the service's duties wait on PostgreSQL and HTTP, so under `TestClock` a long jump runs them late, in
 * any order, while time keeps moving. This clock wakes one sleep at a time and waits (`settle`) until the service is
 * quiet again before it moves on, so every duty runs at its instant, in order, and the run is reproducible.
 *
 * Sleeps of periodic loops (marked with `PollingLoop`, domain/Polling.ts) are coalesced: once each of them has run
 * without the database changing, they are not woken every second; they run next at the next exact timer (a webhook
 * retry, a timeout), at the latest after `pollStrideMillis`, and at the end of the jump.
 */
import { Clock, Duration, Effect } from "effect"
import { PollingLoop } from "../domain/Polling.ts"

interface Sleeper {
  at: number
  readonly seq: number
  readonly poll: boolean
  readonly resume: () => void
}

export interface VirtualClockOptions {
  readonly startMillis: number
  /** Waits until the service has finished what the last wake started (database and HTTP quiet). */
  readonly settle: Effect.Effect<void>
  /** A number that changes whenever the service's database changes (ScenarioDatabase.ts: a trigger-fed sequence). */
  readonly changes: Effect.Effect<string>
  /**
   * The next instant the database says work falls due (a webhook delivery's `next_at`), which only a polling loop
   * (the webhook sweeper) acts on: quiet loops are woken then.
   */
  readonly nextDue: Effect.Effect<number | undefined>
}

export interface VirtualClock {
  readonly clock: Clock.Clock
  readonly nowMillis: () => number
  /** Moves time on by `duration`, running every duty that falls due on the way, in order. */
  readonly advance: (duration: Duration.Input, options?: AdvanceOptions) => Effect.Effect<void>
  /** Moves time on until no exact timer is left (or `max` has passed) and the loops are quiet; returns the time moved. */
  readonly untilIdle: (max?: Duration.Input) => Effect.Effect<number>
  /** The exact timers pending, as absolute milliseconds (for diagnostics and tests). */
  readonly pendingTimers: () => ReadonlyArray<number>
  readonly settle: Effect.Effect<void>
  /** The registration number the next sleep will get. */
  readonly nextSeq: () => number
  /**
   * Wakes the earliest exact timer registered at or after `sinceSeq` (what a waiting call waits for), or with
   * `anySleeper` the earliest polling loop's; false when there is none.
   */
  readonly wakeNext: (sinceSeq: number, anySleeper?: boolean) => Effect.Effect<boolean>
}

export interface AdvanceOptions {
  /** The longest virtual time quiet polling loops are left asleep during a jump (default: no bound). */
  readonly pollStride?: Duration.Input
}

/** What `wakeNext` treats as a call's own short wait. */
const shortWaitMillis = 1_000

const debug = process.env.COFFER_SCENARIO_DEBUG === "1"

export const makeVirtualClock = (options: VirtualClockOptions): VirtualClock => {
  let now = options.startMillis
  let seq = 0
  const sleepers: Array<Sleeper> = []

  const register = (sleeper: Sleeper) => {
    sleepers.push(sleeper)
  }
  const unregister = (sleeper: Sleeper) => {
    const index = sleepers.indexOf(sleeper)
    if (index !== -1) sleepers.splice(index, 1)
  }
  /** The earliest sleeper, ties in registration order. */
  const earliest = (filter: (sleeper: Sleeper) => boolean = () => true): Sleeper | undefined => {
    let best: Sleeper | undefined
    for (const sleeper of sleepers) {
      if (!filter(sleeper)) continue
      if (best === undefined || sleeper.at < best.at || (sleeper.at === best.at && sleeper.seq < best.seq)) best = sleeper
    }
    return best
  }

  const sleep = (duration: Duration.Duration): Effect.Effect<void> =>
    Effect.flatMap(Effect.service(PollingLoop), (poll: boolean) => {
      const millis = Duration.toMillis(duration)
      if (!(millis > 0)) return Effect.yieldNow
      const at = now + millis
      return Effect.callback<void>((resume) => {
        const sleeper: Sleeper = { at, seq: seq++, poll, resume: () => resume(Effect.void) }
        register(sleeper)
        return Effect.sync(() => unregister(sleeper))
      })
    })

  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => now,
    currentTimeMillis: Effect.sync(() => now),
    currentTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
    monotonicTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep
  }

  const wake = (sleeper: Sleeper) =>
    Effect.gen(function*() {
      unregister(sleeper)
      if (sleeper.at > now) now = sleeper.at
      sleeper.resume()
      yield* options.settle
    })

  /** Poll wakes in a row that left the database as it was: as many as there are polling loops means quiet. */
  let lastChanges = ""
  let quietPolls = 0
  const observe = Effect.map(options.changes, (changes) => {
    const unchanged = changes === lastChanges
    lastChanges = changes
    return unchanged
  })
  const pollCount = () => sleepers.filter((sleeper) => sleeper.poll).length

  const wakeTimer = (timer: Sleeper) =>
    Effect.gen(function*() {
      yield* wake(timer)
      if (!(yield* observe)) {
        // The timer changed something: the loops that slept through look again now.
        quietPolls = 0
        for (const sleeper of sleepers) if (sleeper.poll && sleeper.at > now) sleeper.at = now
      }
      if (debug) console.error(`timer at +${timer.at - options.startMillis} quiet=${quietPolls}`)
    })

  /**
   * When the database says work falls due that only a polling loop acts on: its instant, or Infinity when nothing is
   * due ahead. A due instant already passed is left alone: a delivery that stays due without being taken (its
   * endpoint's entity busy or deferring it) would otherwise wake every loop again after each change; the wake of a
   * due instant ahead, and a call's short waits (`wakeNext`), keep time from passing one untaken.
   */
  const dueInstant = Effect.map(options.nextDue, (due) => due !== undefined && due > now ? due : Number.POSITIVE_INFINITY)

  /** Wakes every polling loop at `at` (now or later), one at a time in order, as the quiet path of a jump does. */
  const runLoopsAt = (at: number) =>
    Effect.gen(function*() {
      if (debug) console.error(`loops at +${at - options.startMillis} (now +${now - options.startMillis})`)
      if (at > now) now = at
      for (const sleeper of sleepers) if (sleeper.poll && sleeper.at > now) sleeper.at = now
      for (;;) {
        const loop = earliest((sleeper) => sleeper.poll && sleeper.at <= now)
        if (loop === undefined) break
        yield* wake(loop)
      }
      if (!(yield* observe)) quietPolls = 0
    })

  const advanceTo = (end: number, strideMillis: number) =>
    Effect.gen(function*() {
      let lastPollRun = now
      yield* options.settle
      if (!(yield* observe)) quietPolls = 0
      // Work the database says is due already (recorded due at once, or a call carried time past its instant) runs
      // first: the loops asleep past now are pulled back to it. Once per advance, so a delivery that stays due
      // without being taken costs one round of the loops per advance, not one per change (dueInstant, above).
      const dueAtStart = yield* options.nextDue
      if (dueAtStart !== undefined && dueAtStart <= now) {
        for (const sleeper of sleepers) if (sleeper.poll && sleeper.at > now) sleeper.at = now
        quietPolls = 0
      }
      for (;;) {
        const next = earliest()
        if (next === undefined || next.at > end) break
        if (quietPolls >= pollCount()) {
          // The loops are quiet: they wait while exact timers run; a timer that changes something wakes them (the
          // counter resets), and so does the stride. With nothing left before the end they sleep past it.
          const timer = earliest((sleeper) => !sleeper.poll)
          const strideAt = lastPollRun + strideMillis
          if (next.poll || (timer !== undefined && timer.at > strideAt)) {
            const dueAt = yield* dueInstant
            if (timer !== undefined && timer.at <= end && timer.at <= strideAt && timer.at <= dueAt) {
              yield* wakeTimer(timer)
              continue
            }
            if (dueAt <= end && dueAt <= strideAt) {
              for (const sleeper of sleepers) if (sleeper.poll && sleeper.at > dueAt) sleeper.at = dueAt
              if (dueAt > now) now = dueAt
              quietPolls = 0
              continue
            }
            if (strideAt <= end) {
              // At the latest after the stride: a loop asleep past it is pulled back to it too.
              for (const sleeper of sleepers) if (sleeper.poll) sleeper.at = strideAt
              if (strideAt > now) now = strideAt
              lastPollRun = strideAt
              quietPolls = 0
              continue
            }
            for (const sleeper of sleepers) if (sleeper.poll && sleeper.at <= end) sleeper.at = end + 1
            continue
          }
        }
        const wakeStarted = performance.now()
        yield* wake(next)
        const unchanged = yield* observe
        if (!unchanged) quietPolls = 0
        else if (next.poll) quietPolls++
        if (debug) {
          console.error(`wake at +${next.at - options.startMillis} poll=${next.poll} unchanged=${unchanged} quiet=${quietPolls}/${pollCount()} took ${(performance.now() - wakeStarted).toFixed(1)} ms`)
        }
      }
      if (end > now) now = end
      yield* options.settle
    })

  const advance = (duration: Duration.Input, advanceOptions: AdvanceOptions = {}) =>
    Effect.suspend(() => {
      const millis = Duration.toMillis(Duration.fromInputUnsafe(duration))
      const stride = advanceOptions.pollStride === undefined
        ? Number.POSITIVE_INFINITY
        : Duration.toMillis(Duration.fromInputUnsafe(advanceOptions.pollStride))
      return advanceTo(now + millis, stride)
    })

  const untilIdle = (max: Duration.Input = "30 days") =>
    Effect.gen(function*() {
      const start = now
      const end = now + Duration.toMillis(Duration.fromInputUnsafe(max))
      for (;;) {
        const timer = earliest((sleeper) => !sleeper.poll)
        const target = timer === undefined || timer.at > end ? undefined : timer.at
        // With no timer left, one more pass of the loops (about a minute) lets them finish what they started.
        if (target === undefined) {
          yield* advanceTo(Math.min(end, now + 60_000), Number.POSITIVE_INFINITY)
          if (earliest((sleeper) => !sleeper.poll && sleeper.at <= end) === undefined || now >= end) break
          continue
        }
        yield* advanceTo(target, Number.POSITIVE_INFINITY)
        if (now >= end) break
      }
      return now - start
    })

  return {
    clock,
    nowMillis: () => now,
    advance,
    untilIdle,
    pendingTimers: () => sleepers.filter((sleeper) => !sleeper.poll).map((sleeper) => sleeper.at).sort((a, b) => a - b),
    settle: options.settle,
    nextSeq: () => seq,
    wakeNext: (sinceSeq, anySleeper = false) =>
      Effect.suspend(() => {
        // A short wait of the call's own (a poll for a result), never a far one (a request's timeout).
        const next = anySleeper
          ? earliest((sleeper) => sleeper.poll)
          : earliest((sleeper) => !sleeper.poll && sleeper.seq >= sinceSeq && sleeper.at - now <= shortWaitMillis)
        if (next === undefined) return Effect.succeed(false)
        if (anySleeper) return Effect.as(wakeTimer(next), true)
        // Work the database says falls due before the call's timer runs first, at its instant: a call that waits
        // in short steps must not carry time past a webhook retry that only the sweeper's loop takes. Only a due
        // instant ahead: what is due already is the call's own work in flight (an event it just recorded, which the
        // endpoint's entity is about to claim), and waking the sweeper beside it would race the entity for it.
        return Effect.flatMap(options.nextDue, (due) =>
          due !== undefined && due > now && due <= next.at
            ? Effect.as(runLoopsAt(due), true)
            : Effect.as(wakeTimer(next), true))
      })
  }
}
