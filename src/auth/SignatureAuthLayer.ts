/**
 * Signed-request authentication, every check of spec section 5 in the documented order, stopping at the first
 * failure. Path and query values are decoded first, because a parse failure answers 400 before authentication
 * (section 7). The exact raw body bytes are read once (HttpServerRequest caches them, so the payload decoder
 * afterwards sees the same bytes) and the raw request target is compared with the `uri` claim.
 */
import { Clock, Effect, Layer } from "effect"
import { HttpServerRequest } from "effect/http"
import { createHash } from "node:crypto"
import { CurrentApiKey, SignatureAuth } from "../api/SignatureAuth.ts"
import { AppConfig } from "../Config.ts"
import { BadRequest, Forbidden, RateLimited, Unauthorized } from "../domain/ApiError.ts"
import { checkParameters } from "../http/RequestParameters.ts"
import { readDeclaredBody, requestBodyLimitBytes, StreamedBodySize, withReadBody } from "../http/StreamedBody.ts"
import { requireUtf8Body } from "../http/Utf8Body.ts"
import { ApiKeys } from "./ApiKeys.ts"
import { clientIp, makeIpMatcher } from "./IpAllowList.ts"
import { verifyEd25519Async } from "./Ed25519.ts"
import { claimsMatch, parseJwt } from "./Jwt.ts"
import { NonceStore } from "./NonceStore.ts"
import { requestFacts } from "../observability/RequestFacts.ts"
import { type AuthFailureReason, refused } from "../observability/ServiceMetrics.ts"

/** The body of a request that sends none, and its hash: the `bodyHash` of every signed GET. */
const noBody = new Uint8Array(0)
const emptyBodySha256Hex = createHash("sha256").update(noBody).digest("hex")

/** 401 `authentication required`, counted under the check that failed (observability/ServiceMetrics.ts). */
const authenticationRequired = (reason: AuthFailureReason) =>
  refused(reason, new Unauthorized({ message: "authentication required" }))

export const SignatureAuthLayer = Layer.effect(
  SignatureAuth,
  Effect.gen(function*() {
    const apiKeys = yield* ApiKeys
    const nonces = yield* NonceStore
    const config = yield* AppConfig
    const isTrustedProxy = makeIpMatcher(config.trustedProxies)

    // Runs on every signed request, so the checks are plain code and the Effect steps are the few that wait
    // (body, key load on a cache miss, the signature on the thread pool, the nonce's group commit).
    return (httpEffect, { endpoint }) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest

        yield* checkParameters(endpoint)

        // 1, 2: the two headers.
        const keyId = request.headers["x-api-key"]
        if (keyId === undefined || keyId.length === 0) return yield* authenticationRequired("missing_credentials")
        const authorization = request.headers["authorization"]
        if (authorization === undefined || !authorization.startsWith("Bearer ")) return yield* authenticationRequired("missing_credentials")

        // 3: body size, from the Content-Length (the parser holds the body to it) or, for a chunked body, as the
        // boundary counted it (http/StreamedBody.ts, which held at most 256 KiB of it). Checks 3-6 need none of the
        // body: it is read after them, so a request with an unknown key, a suspended tenant or a refused address is
        // answered without a declared body being held (issue 36). A read failure (a client gone mid-body) is a
        // defect here, classified by ErrorBoundary.
        const declared = request.headers["content-length"]
        const bodyBytes = declared === undefined ? (yield* StreamedBodySize) ?? 0 : Number(declared)
        if (bodyBytes > requestBodyLimitBytes) return yield* refused("body_too_large", new BadRequest({ message: "body too large" }))

        // 4, 5: the key and its tenant.
        const nowMillis = yield* Clock.currentTimeMillis
        const key = yield* apiKeys.lookupAt(keyId, nowMillis)
        if (key === undefined || key.status !== "ACTIVE") return yield* authenticationRequired("unknown_key")
        if (key.tenantStatus !== "ACTIVE") return yield* refused("tenant_suspended", new Forbidden({ message: "tenant suspended" }))

        // 6: the allow-list.
        if (key.allowedIps.length > 0) {
          const ip = clientIp(request.remoteAddress._tag === "Some" ? request.remoteAddress.value : undefined,
            request.headers["x-forwarded-for"], isTrustedProxy)
          if (ip === undefined) return yield* refused("ip_not_allowed", new Forbidden({ message: "client ip unknown" }))
          if (!key.isAllowedIp(ip)) {
            return yield* refused("ip_not_allowed", new Forbidden({ message: `ip ${ip} not allowed for this api key` }))
          }
        }

        // A chunked body was read by the boundary (the request here is its view); a declared one is read now, in a
        // way the 30 s limit can interrupt without closing the connection under its 408 (http/StreamedBody.ts). A
        // request with neither header has no body at all (RFC 9112 section 6.3): nothing to read, and reading the
        // platform's stream to learn that it is empty cost a signed GET more than its JWT's parsing did.
        const chunked = declared === undefined
        const read = chunked ? undefined : yield* readDeclaredBody(request)
        const body = read?.bytes ??
          (request.headers["transfer-encoding"] === undefined ? noBody : new Uint8Array(yield* Effect.orDie(request.arrayBuffer)))

        // 7: the token's form, then its signature (verified on the thread pool).
        const token = parseJwt(authorization.slice("Bearer ".length))
        if (token === undefined) return yield* authenticationRequired("malformed_token")
        if (!(yield* verifyEd25519Async(key.publicKey, token.signingInput, token.signature))) {
          return yield* authenticationRequired("bad_signature")
        }

        // 8: the claims against this request and the server clock.
        const matches = claimsMatch(token.claims, {
          keyId,
          target: request.url,
          bodySha256Hex: body.byteLength === 0 ? emptyBodySha256Hex : createHash("sha256").update(body).digest("hex"),
          nowSeconds: Math.floor(nowMillis / 1000)
        })
        if (!matches) return yield* authenticationRequired("claims_mismatch")

        // 9: the subscription.
        if (key.subscriptionExpiresAtMillis !== undefined && key.subscriptionExpiresAtMillis <= nowMillis) {
          return yield* refused("subscription_expired", new Forbidden({ message: "tenant subscription expired" }))
        }

        // 10: the nonce, durably.
        const recorded = yield* nonces.record(keyId, token.claims.nonce, token.claims.exp)
        if (!recorded.fresh) return yield* refused("nonce_reused", new Unauthorized({ message: "nonce reused" }))
        // 4, 5 and 9 again, as committed when the nonce was recorded: a revocation, suspension or expiry made
        // through another process holds from its commit, not from when this process's cache hears of it.
        const standing = recorded.standing
        if (standing === undefined || !standing.keyActive) return yield* authenticationRequired("key_revoked")
        if (!standing.tenantActive) return yield* refused("tenant_suspended", new Forbidden({ message: "tenant suspended" }))
        if (standing.subscriptionExpiresAtMillis !== undefined && standing.subscriptionExpiresAtMillis <= nowMillis) {
          return yield* refused("subscription_expired", new Forbidden({ message: "tenant subscription expired" }))
        }

        // 11: the per-key cap, counted for the key across every process by the statement that recorded the nonce
        // (NonceStore.ts): this request's place in the key's current second against the key's cap.
        if (recorded.windowPosition > key.rateLimitPerSecond) {
          return yield* refused("rate_limited", new RateLimited({ message: "rate limit exceeded" }))
        }

        // Authenticated: body errors (422) from here on, the first of them that the bytes are UTF-8 at all.
        yield* requireUtf8Body(body)

        // The tenant, for the access line and the span (observability/RequestObservation.ts) and every log line inside.
        requestFacts(request).tenantId = key.tenantId
        return yield* Effect.provideService(httpEffect, CurrentApiKey, { keyId, tenantId: key.tenantId }).pipe(
          read === undefined ? (effect) => effect : Effect.provideService(HttpServerRequest.HttpServerRequest, withReadBody(request, read)),
          Effect.annotateLogs("tenantId", key.tenantId)
        )
      })
  })
)
