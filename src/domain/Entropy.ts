/**
 * Randomness as a service, so tests can make ids and secrets deterministic. The default draws from the operating
 * system's CSPRNG; `layerSeeded` is a reproducible stream for tests (never for production).
 */
import { Context, Effect, Layer } from "effect"
import { createHash, randomBytes } from "node:crypto"

export class Entropy extends Context.Service<Entropy, {
  readonly bytes: (length: number) => Effect.Effect<Uint8Array>
}>()("coffer/Entropy") {
  /**
   * The operating system's CSPRNG, drawn 4 KiB at a time: every request takes 10 bytes for its id, and one
   * `randomBytes` call per request measured as a visible share of a request's CPU.
   */
  static readonly layer = Layer.sync(Entropy, () => {
    const poolBytes = 4096
    let pool = randomBytes(poolBytes)
    let offset = 0
    return {
      bytes: (length) =>
        Effect.sync(() => {
          if (length > poolBytes) return new Uint8Array(randomBytes(length))
          if (offset + length > poolBytes) {
            pool = randomBytes(poolBytes)
            offset = 0
          }
          // A copy, so no caller ever shares bytes with another; the pool forgets what it handed out.
          const out = new Uint8Array(pool.subarray(offset, offset + length))
          pool.fill(0, offset, offset + length)
          offset += length
          return out
        })
    }
  })

  /** A deterministic stream: SHA-256 in counter mode over the seed. */
  static readonly layerSeeded = (seed: string) =>
    Layer.sync(Entropy, () => {
      let counter = 0
      return {
        bytes: (length) =>
          Effect.sync(() => {
            const out = new Uint8Array(length)
            for (let offset = 0; offset < length; offset += 32) {
              const block = createHash("sha256").update(`${seed}:${counter++}`).digest()
              out.set(block.subarray(0, Math.min(32, length - offset)), offset)
            }
            return out
          })
      }
    })
}

export const randomHex = (length: number) =>
  Effect.map(Entropy.use((entropy) => entropy.bytes(length)), (bytes) => Buffer.from(bytes).toString("hex"))
