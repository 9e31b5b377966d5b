/**
 * Portal passwords are stored only as a memory-hard hash (scrypt, N = 2^15), never returned.
 * Format: `scrypt$<N>$<r>$<p>$<salt base64url>$<hash base64url>`.
 *
 * The hash itself runs on PasswordHasher's worker threads (ScryptPool.ts), never on libuv's thread pool, where it
 * would hold up every tenant's signature checks (issue 36).
 */
import { Context, Effect, Layer } from "effect"
import { timingSafeEqual } from "node:crypto"
import { RateLimited } from "../domain/ApiError.ts"
import { Entropy } from "../domain/Entropy.ts"
import { makeScryptPool, type ScryptParameters, type ScryptPoolOptions } from "./ScryptPool.ts"

const cost = 32768
const blockSize = 8
const parallelization = 1
const keyLengthBytes = 32
const maxmem = 64 * 1024 * 1024

/**
 * One worker: a hash is about 170 ms of one core and 32 MiB of memory, the machine has 2 cores shared by the event
 * loop, libuv's thread and PostgreSQL; a second worker would take CPU from signed requests to make a rare operation
 * faster. Four hashes per tenant (one running, three waiting: under a second of wait when it is alone), 32 in all.
 * docs/operations.md, "Password hashing".
 */
export const passwordHashPool: ScryptPoolOptions = { workers: 1, perTenantMax: 4, totalMax: 32 }

export const passwordHashBusyMessage = "too many password hashes in progress; try again later"

export class PasswordHasher extends Context.Service<PasswordHasher, {
  /** A new stored hash of `password`, counted against the tenant's share of the pool (429 when it is full). */
  readonly hash: (tenantId: string, password: string) => Effect.Effect<string, RateLimited>
  /** Whether `password` matches a stored hash; the same pool and bounds. */
  readonly verify: (tenantId: string, password: string, stored: string) => Effect.Effect<boolean, RateLimited>
}>()("coffer/PasswordHasher") {
  static readonly layerWith = (options: ScryptPoolOptions) =>
    Layer.effect(
      PasswordHasher,
      Effect.gen(function*() {
        const entropy = yield* Entropy
        const pool = yield* Effect.acquireRelease(
          Effect.sync(() => makeScryptPool(options)),
          (pool) => Effect.promise(pool.close)
        )

        const derive = (tenantId: string, parameters: ScryptParameters) =>
          Effect.callback<Buffer, RateLimited>((resume) => {
            const cancel = pool.submit(tenantId, parameters, (result) =>
              resume("key" in result ? Effect.succeed(result.key) : Effect.die(result.error)))
            if (cancel === "full") {
              resume(Effect.fail(new RateLimited({ message: passwordHashBusyMessage })))
              return
            }
            return Effect.sync(cancel)
          })

        const hash = Effect.fn("PasswordHasher.hash")(function*(tenantId: string, password: string) {
          const salt = yield* entropy.bytes(16, "password-salt")
          const key = yield* derive(tenantId, {
            password: password.normalize("NFKC"),
            salt,
            keyLength: keyLengthBytes,
            n: cost,
            r: blockSize,
            p: parallelization,
            maxmem
          })
          return `scrypt$${cost}$${blockSize}$${parallelization}$${Buffer.from(salt).toString("base64url")}$${
            key.toString("base64url")
          }`
        })

        const verify = Effect.fn("PasswordHasher.verify")(function*(tenantId: string, password: string, stored: string) {
          const [scheme, n, r, p, salt, expectedText] = stored.split("$")
          if (scheme !== "scrypt" || salt === undefined || expectedText === undefined) return false
          const expected = Buffer.from(expectedText, "base64url")
          const key = yield* derive(tenantId, {
            password: password.normalize("NFKC"),
            salt: Buffer.from(salt, "base64url"),
            keyLength: expected.length,
            n: Number(n),
            r: Number(r),
            p: Number(p),
            maxmem
          })
          return key.length === expected.length && timingSafeEqual(key, expected)
        })

        return PasswordHasher.of({ hash, verify })
      })
    )

  static readonly layer = PasswordHasher.layerWith(passwordHashPool)
}
