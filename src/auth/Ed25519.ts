/** Ed25519 keys as node:crypto KeyObjects: parsed once per API key, then reused for every verify. */
import { Effect } from "effect"
import { createPrivateKey, createPublicKey, type KeyObject, verify } from "node:crypto"

/** DER SubjectPublicKeyInfo prefix of an Ed25519 key: the raw 32 bytes follow it. */
const spkiPrefix = Buffer.from("302a300506032b6570032100", "hex")

export const publicKeyHexPattern = /^[0-9a-f]{64}$/

export const publicKeyFromHex = (hex: string): KeyObject =>
  createPublicKey({ key: Buffer.concat([spkiPrefix, Buffer.from(hex, "hex")]), format: "der", type: "spki" })

export const rawPublicKeyHex = (key: KeyObject): string => {
  const der = key.export({ format: "der", type: "spki" })
  return Buffer.from(der.subarray(der.length - 32)).toString("hex")
}

/**
 * node:crypto's native Ed25519 measured fastest here (about 14x @noble/curves; docs/benchmarks.md). The service uses
 * the callback form, which runs on libuv's thread pool: one verify costs about as much as a whole unsigned request,
 * so keeping it off the event loop lets the other core verify while this one serves.
 */
export const verifyEd25519Async = (key: KeyObject, message: Uint8Array, signature: Uint8Array): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    try {
      verify(null, message, key, signature, (error, valid) => resume(Effect.succeed(error === null && valid)))
    } catch {
      resume(Effect.succeed(false))
    }
  })

/** The same check on the calling thread. */
export const verifyEd25519 = (key: KeyObject, message: Uint8Array, signature: Uint8Array): boolean => {
  try {
    return verify(null, message, key, signature)
  } catch {
    return false
  }
}

/** DER PKCS#8 prefix of an Ed25519 private key: the 32-byte seed follows it. */
const pkcs8Prefix = Buffer.from("302e020100300506032b657004220420", "hex")

/** A key pair from a 32-byte seed (the seed comes from Entropy, so tests are reproducible). */
export const keyPairFromSeed = (seed: Uint8Array): { readonly privateKey: KeyObject; readonly publicKeyHex: string } => {
  const privateKey = createPrivateKey({ key: Buffer.concat([pkcs8Prefix, seed]), format: "der", type: "pkcs8" })
  return { privateKey, publicKeyHex: rawPublicKeyHex(createPublicKey(privateKey)) }
}
