/**
 * The per-key requests-per-second cap (spec section 5, check 11): a fixed one-second window per key, counted in
 * this process. With several processes behind a balancer each enforces the cap on its share (docs/decisions.md).
 */
import { Clock, Context, Effect, Layer } from "effect"

export const rateLimiterKeysMax = 100_000

export class RateLimiter extends Context.Service<RateLimiter, {
  /** True when this request is within `perSecond` for the current second. */
  readonly take: (keyId: string, perSecond: number) => Effect.Effect<boolean>
  /** The same at a time the caller already read from the Clock (plain code: it runs on every request). */
  readonly takeAt: (keyId: string, perSecond: number, nowMillis: number) => boolean
}>()("coffer/RateLimiter") {
  static readonly layer = Layer.sync(RateLimiter, () => {
    const windows = new Map<string, { second: number; count: number }>()
    const takeAt = (keyId: string, perSecond: number, nowMillis: number): boolean => {
      const second = Math.floor(nowMillis / 1000)
      const window = windows.get(keyId)
      if (window === undefined || window.second !== second) {
        if (windows.size >= rateLimiterKeysMax) windows.clear()
        windows.set(keyId, { second, count: 1 })
        return true
      }
      if (window.count >= perSecond) return false
      window.count++
      return true
    }
    return RateLimiter.of({
      take: (keyId, perSecond) => Effect.map(Clock.currentTimeMillis, (millis) => takeAt(keyId, perSecond, millis)),
      takeAt
    })
  })
}
