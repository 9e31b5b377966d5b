/**
 * Randomness as a service, so tests can make ids and secrets deterministic. The default draws from the operating
 * system's CSPRNG; `layerSeeded` is a reproducible stream for tests (never for production).
 */
import { Context, Effect, Layer } from "effect"
import { createHash, randomBytes } from "node:crypto"

export class Entropy extends Context.Service<Entropy, {
  readonly bytes: (length: number) => Effect.Effect<Uint8Array>
}>()("coffer/Entropy") {
  static readonly layer = Layer.succeed(Entropy)({
    bytes: (length) => Effect.sync(() => new Uint8Array(randomBytes(length)))
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
