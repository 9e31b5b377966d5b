/**
 * Logs (issue 32; docs/operations.md "Logs"): with LOG_FORMAT=json every line is one JSON object with `timestamp`,
 * `level` and `message`, each request leaves one access line (`method`, `route`, `status`, `durationMs`,
 * `requestId`, and `tenantId` once a tenant authenticated), and across real requests (the operator's, signed ones,
 * refused ones, a withdrawal) no secret reaches any line: not the operator token, the signer's mnemonic or its seed,
 * a tenant's private key, nor any JWT or its signature.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { createHash, pbkdf2Sync } from "node:crypto"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { jsonLogger, loggingLayer } from "../../src/observability/Logging.ts"
import {
  makeTestAppLayer,
  opsRequest,
  provisionTenant,
  rawRequest,
  type RawResponse,
  testMnemonic,
  testOpsToken,
  type TestTenant
} from "../support/TestApp.ts"
import { fund, settings, walletOf } from "../withdrawals/WithdrawalHelpers.ts"

const lines: Array<string> = []
const jsonLogging = loggingLayer({ format: "json", level: "Debug" }, (line) => lines.push(line))

/** Every bearer token this test sends, to look for afterwards. */
const sentTokens: Array<string> = []

const signed = (tenant: TestTenant, method: string, target: string, body = "") =>
  Effect.gen(function*() {
    const headers = signRequest({
      keyId: tenant.keyId,
      privateKey: tenant.privateKey,
      target,
      body,
      nowSeconds: Math.floor(Date.now() / 1000)
    })
    sentTokens.push(headers.authorization.slice("Bearer ".length))
    return yield* rawRequest({ baseUrl: tenant.baseUrl, method, target, body, headers })
  })

const parsed = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>)

const accessLine = (response: RawResponse) => {
  const id = response.headers.get("x-request-id")
  const found = parsed().filter((line) => line.route !== undefined && line.requestId === id)
  assert.strictEqual(found.length, 1, `one access line for request ${id}`)
  return found[0]!
}

describe("the JSON logger", () => {
  it.effect("annotations become fields of the line; a field named like the line's own is kept apart", () =>
    Effect.gen(function*() {
      const written: Array<string> = []
      yield* Effect.logWarning("inside a request").pipe(
        Effect.annotateLogs({ requestId: "r-1", tenantId: "t-1", message: "shadow" }),
        Effect.provide(Logger.layer([jsonLogger((line) => written.push(line))]))
      )
      assert.strictEqual(written.length, 1)
      assert.isTrue(written[0]!.endsWith("\n") && !written[0]!.slice(0, -1).includes("\n"), "one line")
      const line = JSON.parse(written[0]!)
      assert.strictEqual(line.level, "WARN")
      assert.strictEqual(line.message, "inside a request")
      assert.strictEqual(line.requestId, "r-1")
      assert.strictEqual(line.tenantId, "t-1")
      assert.strictEqual(line["annotation.message"], "shadow")
      assert.match(line.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    }))
})

layer(makeTestAppLayer({}, { logging: jsonLogging }), { excludeTestServices: true })("LOG_FORMAT=json", (it) => {
  it.effect("real requests: one access line each, with the request id; no secret in any line", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const eth = "ETH_SEPOLIA_ETH"
      yield* settings(tenant, { withdrawFees: { [eth]: (10n ** 15n).toString() } })
      const payer = yield* walletOf(tenant, "alice", "ETH_SEPOLIA")
      yield* fund(tenant, payer.walletId, eth, 10n ** 18n)

      const networks = yield* signed(tenant, "GET", "/v1/networks")
      assert.strictEqual(networks.status, 200, networks.text)
      const withdrawal = yield* signed(tenant, "POST", "/v1/transactions", JSON.stringify({
        assetId: eth,
        source: { type: "WALLET", id: payer.walletId },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" } },
        amountRaw: (10n ** 16n).toString(),
        externalTxId: "logged-1"
      }))
      assert.strictEqual(withdrawal.status, 202, withdrawal.text)
      // A reused token (nonce reused), a wrong operator token, an unknown route.
      const replayed = yield* rawRequest({
        baseUrl: tenant.baseUrl,
        method: "GET",
        target: "/v1/networks",
        headers: { "x-api-key": tenant.keyId, authorization: `Bearer ${sentTokens[0]}` }
      })
      assert.strictEqual(replayed.status, 401, replayed.text)
      const wrongToken = yield* opsRequest("GET", "/ops/health", undefined, { authorization: `Bearer ${testOpsToken}-wrong` })
      assert.strictEqual(wrongToken.status, 401)
      const health = yield* opsRequest("GET", "/ops/health")
      assert.strictEqual(health.status, 200, health.text)
      yield* Effect.sleep("500 millis")

      // Every line is one JSON object with the three fields.
      assert.isAbove(lines.length, 5)
      for (const line of lines) {
        assert.isTrue(line.endsWith("\n") && !line.slice(0, -1).includes("\n"), line)
        const object = JSON.parse(line)
        for (const field of ["timestamp", "level", "message"]) assert.isDefined(object[field], `${field} in ${line}`)
      }

      const access = accessLine(networks)
      assert.deepInclude(access, { method: "GET", route: "/v1/networks", status: 200, tenantId: tenant.tenantId, level: "INFO" })
      assert.isNumber(access.durationMs)
      assert.deepInclude(accessLine(withdrawal), { method: "POST", route: "/v1/transactions", status: 202, tenantId: tenant.tenantId })
      const refused = accessLine(replayed)
      assert.deepInclude(refused, { route: "/v1/networks", status: 401 })
      assert.isUndefined(refused.tenantId, "no tenant for a refused request")
      assert.deepInclude(accessLine(wrongToken), { route: "/ops/health", status: 401 })
      assert.deepInclude(accessLine(health), { route: "/ops/health", status: 200 })

      // No secret anywhere: each JWT, its signature, the operator token, the mnemonic and its seed, the tenant's key.
      const seedHex = pbkdf2Sync(testMnemonic.normalize("NFKD"), "mnemonic", 2048, 64, "sha512").toString("hex")
      const privateKeyPem = tenant.privateKey.export({ format: "pem", type: "pkcs8" }).toString()
      const privateKeyDer = tenant.privateKey.export({ format: "der", type: "pkcs8" })
      const secrets = [
        testOpsToken,
        testMnemonic,
        testMnemonic.split(" ").slice(0, 4).join(" "),
        seedHex,
        seedHex.slice(0, 32),
        privateKeyPem.split("\n")[1]!,
        privateKeyDer.subarray(-32).toString("hex"),
        privateKeyDer.subarray(-32).toString("base64"),
        ...sentTokens,
        ...sentTokens.map((token) => token.split(".")[2]!),
        createHash("sha256").update(testOpsToken).digest("hex")
      ]
      assert.isAtLeast(sentTokens.length, 2)
      const everything = lines.join("")
      for (const secret of secrets) assert.notInclude(everything, secret, "a secret reached the log")
    }), { timeout: 60_000 })
})
