/**
 * Signing a /v1 request per spec section 5, as a tenant's backend does it: a fresh EdDSA JWT per request over the
 * exact target (path plus query as sent) and the SHA-256 of the exact body bytes. Tests use the parts to forge
 * every kind of bad token.
 */
import { createHash, type KeyObject, randomUUID, sign } from "node:crypto"

export interface JwtParts {
  readonly header?: Record<string, unknown>
  readonly claims: Record<string, unknown>
}

/** Lifetime used by the client: `iat + 25` as the spec recommends. */
export const clientJwtLifetimeSeconds = 25

export const sha256Hex = (body: Uint8Array | string): string => createHash("sha256").update(body).digest("hex")

const segment = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

/** A compact JWS over any header and claims (no validation: tests send malformed ones on purpose). */
export const signJwt = (privateKey: KeyObject, parts: JwtParts): string => {
  const signingInput = `${segment(parts.header ?? { alg: "EdDSA", typ: "JWT" })}.${segment(parts.claims)}`
  const signature = sign(null, Buffer.from(signingInput, "ascii"), privateKey)
  return `${signingInput}.${signature.toString("base64url")}`
}

export interface SignRequestInput {
  readonly keyId: string
  readonly privateKey: KeyObject
  /** Path plus query exactly as it goes on the request line. */
  readonly target: string
  readonly body: Uint8Array | string
  readonly nowSeconds: number
  readonly nonce?: string
}

/** The two authentication headers for one request. */
export const signRequest = (input: SignRequestInput): { "x-api-key": string; authorization: string } => {
  const jwt = signJwt(input.privateKey, {
    claims: {
      uri: input.target,
      nonce: input.nonce ?? randomUUID(),
      iat: input.nowSeconds,
      exp: input.nowSeconds + clientJwtLifetimeSeconds,
      sub: input.keyId,
      bodyHash: sha256Hex(input.body)
    }
  })
  return { "x-api-key": input.keyId, authorization: `Bearer ${jwt}` }
}
