/**
 * Helpers for the authentication and framework tests: a realistic TestClock time, extra API keys, forged tokens,
 * and one assertion for the error envelope of spec section 7.
 */
import { assert } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { randomUUID } from "node:crypto"
import { sha256Hex, signJwt } from "../../src/client/RequestSigner.ts"
import type { RawResponse, TestTenant } from "./TestApp.ts"

/** 2026-10-05T00:00:00Z: a realistic "now", so that millisecond timestamps differ from second ones. */
export const realisticEpochMillis = Date.UTC(2026, 9, 5)

/**
 * The layer built with the shared TestClock already at `realisticEpochMillis`. Set before anything is built on
 * purpose: moving a TestClock far forward later would run every repetition of the background loops (the nonce purge
 * runs each minute) in between.
 */
export const atRealisticTime = <A, E, R>(self: Layer.Layer<A, E, R>) =>
  self.pipe(Layer.provide(Layer.effectDiscard(TestClock.setTime(realisticEpochMillis))))

/**
 * Moves the shared TestClock two seconds on, so each test starts in a fresh rate-limit second and the caches' "loaded
 * at" times stay in the past; returns the new time in Unix seconds.
 */
export const freshTime = Effect.gen(function*() {
  yield* TestClock.adjust("2 seconds")
  return Math.floor((yield* Clock.currentTimeMillis) / 1000)
})

/** A second API key of the same tenant (TestApp's helper, kept importable from here). */
export { addApiKey } from "./TestApp.ts"

/** The six claims a correct client sends for this request at `now`. */
export const goodClaims = (tenant: TestTenant, target: string, body: string | Uint8Array, now: number) => ({
  uri: target,
  nonce: randomUUID(),
  iat: now,
  exp: now + 25,
  sub: tenant.keyId,
  bodyHash: sha256Hex(body)
})

/**
 * The two authentication headers with the claims (and optionally the JWS header) changed by `edit`. A claim set to
 * undefined is left out of the token.
 */
export const forgedHeaders = (
  tenant: TestTenant,
  request: { readonly target: string; readonly body?: string | Uint8Array; readonly now: number },
  edit: {
    readonly claims?: Record<string, unknown>
    readonly header?: Record<string, unknown>
  } = {}
): Record<string, string> => {
  const claims: Record<string, unknown> = {
    ...goodClaims(tenant, request.target, request.body ?? "", request.now),
    ...edit.claims
  }
  for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name]
  const jwt = signJwt(tenant.privateKey, { ...(edit.header === undefined ? {} : { header: edit.header }), claims })
  return { "x-api-key": tenant.keyId, authorization: `Bearer ${jwt}` }
}

const retryableCodes = new Set(["RATE_LIMITED", "PROVIDER_UNAVAILABLE", "SIGNER_UNAVAILABLE", "INTERNAL"])

/** Spec section 7: `{error:{code,message,retryable,requestId}}`, requestId equal to the X-Request-Id header. */
export const assertError = (
  response: RawResponse,
  status: number,
  code: string,
  message?: string
) => {
  assert.strictEqual(response.status, status, `status of ${response.text}`)
  assert.isObject(response.json, `an envelope, got ${response.text}`)
  assert.deepStrictEqual(Object.keys(response.json), ["error"])
  const error = response.json.error
  assert.deepStrictEqual(Object.keys(error).sort(), ["code", "message", "requestId", "retryable"])
  assert.strictEqual(error.code, code)
  assert.isString(error.message)
  assert.isTrue(error.message.length > 0)
  if (message !== undefined) assert.strictEqual(error.message, message)
  assert.strictEqual(error.retryable, retryableCodes.has(code))
  const requestId = response.headers.get("x-request-id")
  assert.isString(requestId)
  assert.strictEqual(error.requestId, requestId)
  assert.strictEqual(response.headers.get("content-type"), "application/json; charset=utf-8")
}

export const authenticationRequired = (response: RawResponse) =>
  assertError(response, 401, "UNAUTHORIZED", "authentication required")
