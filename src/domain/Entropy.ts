/**
 * Randomness as a service, so tests can make ids and secrets deterministic. The default draws from the operating
 * system's CSPRNG; `layerSeeded` is a reproducible stream for tests (never for production).
 *
 * Every draw names its purpose (what the bytes become: a kind of row id, a salt, a block hash). The CSPRNG ignores
 * it; the seeded layer keeps one stream per purpose, so a draw whose count depends on timing (a retry, a second
 * request id) shifts only its own purpose's later bytes, never another's (docs/scenarios.md, "Determinism").
 */
import { Context, Effect, Layer } from "effect"
import { createHash, randomBytes } from "node:crypto"

export class Entropy extends Context.Service<Entropy, {
  /** `length` random bytes for `purpose` (a short fixed label naming what they become). */
  readonly bytes: (length: number, purpose: string) => Effect.Effect<Uint8Array>
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

  /**
   * Deterministic streams, one per purpose: the purpose's key is SHA-256 over the seed and the purpose (each
   * length-prefixed, so no two pairs meet), and its blocks are SHA-256 over the key and a counter of its own.
   */
  static readonly layerSeeded = (seed: string) =>
    Layer.sync(Entropy, () => {
      const streams = new Map<string, { readonly key: Buffer; counter: number }>()
      const streamOf = (purpose: string) => {
        let stream = streams.get(purpose)
        if (stream === undefined) {
          stream = { key: createHash("sha256").update(lengthPrefixed(seed)).update(lengthPrefixed(purpose)).digest(), counter: 0 }
          streams.set(purpose, stream)
        }
        return stream
      }
      return {
        bytes: (length, purpose) =>
          Effect.sync(() => {
            const stream = streamOf(purpose)
            const out = new Uint8Array(length)
            const counter = Buffer.alloc(8)
            for (let offset = 0; offset < length; offset += 32) {
              counter.writeBigUInt64BE(BigInt(stream.counter++))
              const block = createHash("sha256").update(stream.key).update(counter).digest()
              out.set(block.subarray(0, Math.min(32, length - offset)), offset)
            }
            return out
          })
      }
    })
}

const lengthPrefixed = (text: string) => {
  const bytes = Buffer.from(text, "utf8")
  const length = Buffer.alloc(4)
  length.writeUInt32BE(bytes.length)
  return Buffer.concat([length, bytes])
}

export const randomHex = (length: number, purpose: string) =>
  Effect.map(Entropy.use((entropy) => entropy.bytes(length, purpose)), (bytes) => Buffer.from(bytes).toString("hex"))
