/**
 * Entity ids are UUID v7 (spec section 1, "Common conventions"): 48-bit Unix milliseconds from the Clock, then
 * random bits from Entropy, so ids are time-ordered and deterministic under TestClock with a seeded Entropy.
 */
import { Clock, Effect, Schema } from "effect"
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

export const uuidV7: Effect.Effect<string, never, Entropy> = Effect.gen(function*() {
  const millis = yield* Clock.currentTimeMillis
  const random = yield* Entropy.use((entropy) => entropy.bytes(10))
  return formatUuidV7(millis, random)
})
