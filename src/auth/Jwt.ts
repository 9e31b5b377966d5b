/**
 * The request JWT of spec section 5: a compact JWS, alg EdDSA, six typed claims. Parsing and verification are pure
 * so the checks can be tested one by one; the order of the checks lives in SignatureAuthLayer.
 */
import type { KeyObject } from "node:crypto"
import { verifyEd25519 } from "./Ed25519.ts"
import { isStorableText } from "../domain/StorableText.ts"

export interface JwtClaims {
  readonly uri: string
  readonly nonce: string
  readonly iat: number
  readonly exp: number
  readonly sub: string
  readonly bodyHash: string
}

/** `exp - iat` at most this (spec section 8, "JWT lifetime"). */
export const jwtLifetimeSecondsMax = 30
/** `iat` at most this far ahead of the server clock. */
export const jwtIssuedAtSkewSecondsMax = 5
export const nonceBytesMin = 1
export const nonceBytesMax = 64

/** base64url without padding: the standard alphabet (`+`, `/`) or `=` padding is a failure of check 7. */
const base64UrlSegment = /^[A-Za-z0-9_-]+$/

const decodeJsonSegment = (segment: string): unknown => {
  try {
    return JSON.parse(Buffer.from(segment, "base64url").toString("utf8"))
  } catch {
    return undefined
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A token whose form is right; its signature still has to be checked over `signingInput`. */
export interface ParsedJwt {
  readonly signingInput: Buffer
  readonly signature: Buffer
  readonly claims: JwtClaims
}

/**
 * Check 7 without the signature: three base64url segments, `alg = EdDSA`, a 64-byte signature, all six claims of
 * the right type. Every failure of check 7 answers the same 401, so the signature may be checked last.
 */
export const parseJwt = (token: string): ParsedJwt | undefined => {
  const segments = token.split(".")
  if (segments.length !== 3) return undefined
  const [headerSegment, claimsSegment, signatureSegment] = segments as [string, string, string]
  if (!base64UrlSegment.test(headerSegment) || !base64UrlSegment.test(claimsSegment)) return undefined
  if (!base64UrlSegment.test(signatureSegment)) return undefined
  const header = decodeJsonSegment(headerSegment)
  if (!isRecord(header) || header.alg !== "EdDSA") return undefined
  const signature = Buffer.from(signatureSegment, "base64url")
  if (signature.length !== 64) return undefined
  const claims = decodeJsonSegment(claimsSegment)
  if (!isRecord(claims)) return undefined
  const { bodyHash, exp, iat, nonce, sub, uri } = claims
  if (typeof uri !== "string" || typeof nonce !== "string" || typeof sub !== "string") return undefined
  if (typeof bodyHash !== "string") return undefined
  if (!Number.isSafeInteger(iat) || !Number.isSafeInteger(exp)) return undefined
  return {
    signingInput: Buffer.from(`${headerSegment}.${claimsSegment}`, "ascii"),
    signature,
    claims: { uri, nonce, iat: iat as number, exp: exp as number, sub, bodyHash }
  }
}

/** All of check 7 on the calling thread (the service checks the signature on the thread pool instead). */
export const verifyJwt = (token: string, key: KeyObject): JwtClaims | undefined => {
  const parsed = parseJwt(token)
  return parsed !== undefined && verifyEd25519(key, parsed.signingInput, parsed.signature) ? parsed.claims : undefined
}

/** Check 8: the claims against the request and the server clock. */
export const claimsMatch = (
  claims: JwtClaims,
  request: { readonly keyId: string; readonly target: string; readonly bodySha256Hex: string; readonly nowSeconds: number }
): boolean => {
  if (claims.sub !== request.keyId) return false
  if (claims.uri !== request.target) return false
  if (!(claims.exp > request.nowSeconds)) return false
  if (!(claims.iat <= request.nowSeconds + jwtIssuedAtSkewSecondsMax)) return false
  if (!(claims.exp - claims.iat <= jwtLifetimeSecondsMax)) return false
  if (claims.bodyHash.toLowerCase() !== request.bodySha256Hex) return false
  const nonceBytes = Buffer.byteLength(claims.nonce, "utf8")
  // The nonce is stored (check 10): one PostgreSQL cannot hold would fail the whole group commit.
  return nonceBytes >= nonceBytesMin && nonceBytes <= nonceBytesMax && isStorableText(claims.nonce)
}
