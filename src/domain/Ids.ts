/**
 * Entity ids are UUID v7 (spec section 1, "Common conventions"): 48-bit Unix milliseconds from the Clock, then
 * random bits from Entropy, so ids are time-ordered and deterministic under TestClock with a seeded Entropy.
 * `Ids` is the generator as a service: built once over Entropy, so no caller passes Entropy around by hand.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { Entropy } from "./Entropy.ts"

export const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const Uuid = Schema.String.check(Schema.isPattern(uuidPattern, { message: "expected a UUID" }))
  .annotate({ identifier: "Uuid", format: "uuid" })

export const formatUuidV7 = (millis: number, random: Uint8Array): string => {
  const bytes = new Uint8Array(16)
  let time = BigInt(millis)
  for (let index = 5; index >= 0; index--) {
    bytes[index] = Number(time & 0xffn)
    time >>= 8n
  }
  bytes.set(random.subarray(0, 10), 6)
  bytes[6] = (bytes[6]! & 0x0f) | 0x70 // version 7
  bytes[8] = (bytes[8]! & 0x3f) | 0x80 // RFC 4122 variant
  const hex = Buffer.from(bytes).toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

/**
 * The last timestamp and the 12-bit counter in `rand_a` (RFC 9562 section 6.2, method 1): ids of one purpose made by
 * this process within one millisecond still sort in creation order, which is what "newest first" lists rely on. The
 * state lives with the layer instance, so each layer (each test) starts afresh and stays reproducible.
 */
interface Monotonic {
  millis: number
  counter: number
}

const nextStamp = (monotonic: Monotonic, now: number): { readonly millis: number; readonly counter: number } => {
  if (now > monotonic.millis) {
    monotonic.millis = now
    monotonic.counter = 0
  } else if (++monotonic.counter > 0xfff) {
    // 4096 ids in one millisecond: borrow the next millisecond rather than repeat an order.
    monotonic.millis++
    monotonic.counter = 0
  }
  return { millis: monotonic.millis, counter: monotonic.counter }
}

/**
 * What an id names. Each purpose has its own monotonic counter and its own Entropy stream (`id:<purpose>`), so under a
 * seed an id drawn more or less often in one purpose (a request id, a claim retried) never shifts another's ids.
 * Ids that must sort together (every kind of transaction, every outbox event) share one purpose.
 */
export type IdPurpose =
  | "tenant"
  | "user"
  | "wallet"
  | "transaction"
  | "ledger-entry"
  | "outbox-event"
  | "webhook-endpoint"
  | "webhook-resend"
  | "sweep"
  | "send"
  | "operator-audit"
  | "request"
  | "idempotency-claim"
  | "service-instance"
  /** Anything else (tests, one-off effects). */
  | "other"

export class Ids extends Context.Service<Ids, {
  /** A new UUID v7 for `purpose`, at the Clock of the calling fiber (TestClock in tests). */
  readonly uuidV7For: (purpose: IdPurpose) => Effect.Effect<string>
  /** `uuidV7For("other")`. */
  readonly uuidV7: Effect.Effect<string>
}>()("coffer/Ids") {
  static readonly layer = Layer.effect(
    Ids,
    Effect.gen(function*() {
      const entropy = yield* Entropy
      const monotonics = new Map<IdPurpose, Monotonic>()
      const uuidV7For = (purpose: IdPurpose) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const random = yield* entropy.bytes(10, `id:${purpose}`)
          let monotonic = monotonics.get(purpose)
          if (monotonic === undefined) {
            monotonic = { millis: -1, counter: 0 }
            monotonics.set(purpose, monotonic)
          }
          const { counter, millis } = nextStamp(monotonic, now)
          random[0] = (counter >> 8) & 0x0f
          random[1] = counter & 0xff
          return formatUuidV7(millis, random)
        })
      return Ids.of({ uuidV7For, uuidV7: uuidV7For("other") })
    })
  )
}

/** `Ids.uuidV7` for code that has the service in its context (tests, one-off effects). */
export const uuidV7: Effect.Effect<string, never, Ids> = Ids.use((ids) => ids.uuidV7)
