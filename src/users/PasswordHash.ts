/**
 * Portal passwords are stored only as a memory-hard hash (scrypt from node:crypto, N = 2^15), never returned.
 * Format: `scrypt$<N>$<r>$<p>$<salt base64url>$<hash base64url>`.
 */
import { Effect } from "effect"
import { scrypt, timingSafeEqual } from "node:crypto"
import { Entropy } from "../domain/Entropy.ts"

const cost = 32768
const blockSize = 8
const parallelization = 1
const keyLengthBytes = 32
const maxmem = 64 * 1024 * 1024

const derive = (password: string, salt: Buffer, n: number, r: number, p: number) =>
  Effect.callback<Buffer>((resume) => {
    scrypt(password.normalize("NFKC"), salt, keyLengthBytes, { N: n, r, p, maxmem }, (error, key) => {
      resume(error === null ? Effect.succeed(key) : Effect.die(error))
    })
  })

export const hashPassword = (password: string) =>
  Effect.gen(function*() {
    const salt = Buffer.from(yield* Entropy.use((entropy) => entropy.bytes(16)))
    const key = yield* derive(password, salt, cost, blockSize, parallelization)
    return `scrypt$${cost}$${blockSize}$${parallelization}$${salt.toString("base64url")}$${key.toString("base64url")}`
  })

export const verifyPassword = (password: string, stored: string) =>
  Effect.gen(function*() {
    const [scheme, n, r, p, salt, hash] = stored.split("$")
    if (scheme !== "scrypt" || salt === undefined || hash === undefined) return false
    const key = yield* derive(password, Buffer.from(salt, "base64url"), Number(n), Number(r), Number(p))
    const expected = Buffer.from(hash, "base64url")
    return key.length === expected.length && timingSafeEqual(key, expected)
  })
