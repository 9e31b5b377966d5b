/**
 * The whole service over this test file's database, on real loopback ports (port 0), with a fixed signer mnemonic
 * and the real clock unless a test provides TestClock. Tests talk to it through the typed clients or raw fetch.
 */
import { FetchHttpClient } from "effect/http"
import { Clock, Effect, Layer, Option, Redacted, References } from "effect"
import { generateKeyPairSync, type KeyObject } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { afterAll } from "vitest"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { OpsAddress, PublicAddress, ServiceLayer } from "../../src/App.ts"
import { rawPublicKeyHex } from "../../src/auth/Ed25519.ts"
import { makeOpsClient } from "../../src/client/OpsClient.ts"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { makeTenantClient } from "../../src/client/TenantClient.ts"
import { AppConfig, type AppConfigShape } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Signer } from "../../src/signer/Signer.ts"

/** The BIP-39 test mnemonic of the chains notes (never holds real funds). */
export const testMnemonic = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
export const testOpsToken = "test-ops-token"

/** A DATA_DIR for one test file's service, removed after the file. */
const testDataDir = () => {
  const directory = mkdtempSync(join(tmpdir(), "coffer-app-"))
  afterAll(() => rmSync(directory, { recursive: true, force: true }))
  return directory
}

/**
 * The service's log level in tests: `LOG_LEVEL` when set, else warnings and above. Every request writes an access
 * line at INFO (observability/RequestObservation.ts); thousands of them would bury a failing test's output.
 */
const testLogging = Layer.succeed(References.MinimumLogLevel)(
  ({ trace: "Trace", debug: "Debug", info: "Info", warn: "Warn", error: "Error" } as const)[
    (process.env.LOG_LEVEL ?? "warn").toLowerCase() as "warn"
  ] ?? "Warn"
)

export const makeTestAppLayer = (
  overrides: Partial<AppConfigShape> = {},
  options: {
    readonly signer?: Layer.Layer<Signer, never>
    /** Replaces the test's log level (test/observability/Logs.test.ts: the JSON logger at debug). */
    readonly logging?: Layer.Layer<never>
  } = {}
) => {
  const databaseUrl = process.env.DATABASE_URL
  if (databaseUrl === undefined) throw new Error("DATABASE_URL is not set: test/support/db-per-file.ts must run first")
  const config = AppConfig.layerTest({
    dataDir: testDataDir(),
    opsToken: Option.some(Redacted.make(testOpsToken)),
    // Tests provision their own tenants through the operator interface.
    serviceEnv: "preproduction",
    ...overrides
  })
  const signer = options.signer ?? ((overrides.serviceEnv ?? "preproduction") === "preproduction" && overrides.signerMnemonic === undefined
    ? Signer.layerLocalHd(Redacted.make(testMnemonic))
    : Signer.layerConfig)
  return ServiceLayer.pipe(
    Layer.provideMerge(signer),
    Layer.provideMerge(Entropy.layer),
    Layer.provideMerge(Database.layerFromUrl(Redacted.make(databaseUrl))),
    Layer.provideMerge(config),
    Layer.provideMerge(FetchHttpClient.layer),
    Layer.provide(options.logging ?? testLogging),
    Layer.orDie
  )
}

export const opsClient = Effect.gen(function*() {
  const baseUrl = yield* OpsAddress
  return yield* makeOpsClient({ baseUrl, token: Redacted.make(testOpsToken) })
})

export interface TestTenant {
  readonly tenantId: string
  readonly keyId: string
  readonly privateKey: KeyObject
  readonly publicKeyHex: string
  readonly baseUrl: string
}

/**
 * An API key with a fresh Ed25519 key pair for this tenant, created through the operator interface. Its rate limit
 * is the maximum (1,000/s) unless the test asks for one: the default 50/s would answer 429 to a test's burst of
 * requests on a fast machine (a CI run caught it), and the tests of the limit set their own.
 */
const testKeyRateLimitPerSecond = 1_000

export const addApiKey = (
  tenant: { readonly tenantId: string },
  options: { readonly allowedIps?: ReadonlyArray<string>; readonly rateLimitPerSecond?: number } = {}
) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    const { privateKey, publicKey } = generateKeyPairSync("ed25519")
    const publicKeyHex = rawPublicKeyHex(publicKey)
    const key = yield* ops.tenants.createApiKey({
      params: { tenantId: tenant.tenantId },
      payload: {
        name: "test key",
        publicKey: publicKeyHex,
        ...(options.allowedIps === undefined ? {} : { allowedIps: options.allowedIps }),
        rateLimitPerSecond: options.rateLimitPerSecond ?? testKeyRateLimitPerSecond
      }
    })
    const baseUrl = yield* PublicAddress
    return { tenantId: tenant.tenantId, keyId: key.keyId, privateKey, publicKeyHex, baseUrl } satisfies TestTenant
  }).pipe(Effect.orDie)

/** A tenant with one API key, made through the operator interface as an operator would. */
export const provisionTenant = (options: {
  readonly name?: string
  readonly networks?: ReadonlyArray<string>
  readonly allowedIps?: ReadonlyArray<string>
  readonly rateLimitPerSecond?: number
} = {}) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    const tenant = yield* ops.tenants.create({
      payload: { name: options.name ?? "test tenant", ...(options.networks ? { networks: options.networks } : {}) }
    })
    return yield* addApiKey({ tenantId: tenant.id }, options)
  }).pipe(Effect.orDie)

export const tenantClient = (tenant: TestTenant) =>
  makeTenantClient({ baseUrl: tenant.baseUrl, keyId: tenant.keyId, privateKey: tenant.privateKey })

export interface RawResponse {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: any
}

const toRaw = async (response: Response): Promise<RawResponse> => {
  const text = await response.text()
  let json: unknown = undefined
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

/**
 * A raw request to the operator listener with the test's token: `body` as JSON (a string is sent as it is, for
 * malformed bodies); `headers` add to or override the token.
 */
export const opsRequest = (method: string, target: string, body?: unknown, headers: Record<string, string> = {}) =>
  Effect.flatMap(OpsAddress, (baseUrl) =>
    rawRequest({
      baseUrl,
      method,
      target,
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
      headers: { authorization: `Bearer ${testOpsToken}`, ...headers }
    }))

/**
 * A raw request over the socket; with `tenant`, signed like a tenant would (unless headers override), at the time of
 * the Clock the server runs on (TestClock inside `it.effect`).
 */
export const rawRequest = (options: {
  readonly baseUrl: string
  readonly method: string
  readonly target: string
  readonly body?: string | Uint8Array
  readonly tenant?: TestTenant
  readonly headers?: Record<string, string>
  readonly nowSeconds?: number
}) =>
  Effect.flatMap(Clock.currentTimeMillis, (millis) => Effect.promise(async () => {
    const body = options.body ?? ""
    const signed = options.tenant === undefined ? {} : signRequest({
      keyId: options.tenant.keyId,
      privateKey: options.tenant.privateKey,
      target: options.target,
      body,
      nowSeconds: options.nowSeconds ?? Math.floor(millis / 1000)
    })
    const response = await fetch(`${options.baseUrl}${options.target}`, {
      method: options.method,
      headers: {
        ...(typeof body === "string" && body.length > 0 ? { "content-type": "application/json" } : {}),
        ...(body instanceof Uint8Array ? { "content-type": "application/json" } : {}),
        ...signed,
        ...options.headers
      },
      ...(options.method === "GET" || options.method === "HEAD" ? {} : { body: body.length > 0 ? body as string | Uint8Array<ArrayBuffer> : null })
    })
    return toRaw(response)
  }))
