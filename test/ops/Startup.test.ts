/**
 * Starting the service (operator-interface.md, "Running the service", "Transport and authentication"): the
 * environment variables and their defaults, the generated operator token, and the development tenant provisioned on
 * the first start only.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, Option, Redacted } from "effect"
import { createPrivateKey } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PublicAddress } from "../../src/App.ts"
import { AppConfig } from "../../src/Config.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { devKeyFile, DevProvisioning, devTenantFile } from "../../src/ops/DevProvisioning.ts"
import { OpsToken } from "../../src/ops/OpsToken.ts"
import { makeTestAppLayer, rawRequest, testMnemonic } from "../support/TestApp.ts"

const freshDataDir = () => mkdtempSync(join(tmpdir(), "coffer-startup-"))
const modeOf = (path: string) => statSync(path).mode & 0o777

const configFrom = (env: Record<string, string>) =>
  Effect.service(AppConfig).pipe(
    Effect.provide(AppConfig.layerConfig),
    Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown(env)))
  )

describe("configuration", () => {
  it.effect("defaults of the documented environment variables", () =>
    Effect.gen(function*() {
      const config = yield* configFrom({})
      assert.strictEqual(config.host, "127.0.0.1")
      assert.strictEqual(config.port, 8080)
      assert.strictEqual(config.opsHost, "127.0.0.1")
      assert.strictEqual(config.opsPort, 8081)
      assert.strictEqual(config.dataDir, "./.data")
      assert.isTrue(Option.isNone(config.databaseUrl))
      assert.isTrue(Option.isNone(config.opsToken))
      assert.strictEqual(config.serviceEnv, "development")
      assert.deepStrictEqual(config.trustedProxies, [])
      // Above the 15 s a broadcast call may take (docs/operations.md "Broadcast claims").
      assert.strictEqual(config.broadcastClaimGraceMillis, 20_000)
    }))

  it.effect("BROADCAST_CLAIM_GRACE_MS: milliseconds from 1000 to 3600000, anything else refused by name", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* configFrom({ BROADCAST_CLAIM_GRACE_MS: "2000" })).broadcastClaimGraceMillis, 2_000)
      for (const value of ["999", "3600001", "soon"]) {
        const refused = yield* Effect.exit(configFrom({ BROADCAST_CLAIM_GRACE_MS: value }))
        assert.isTrue(Exit.isFailure(refused), value)
        if (Exit.isFailure(refused)) assert.include(String(refused.cause), "BROADCAST_CLAIM_GRACE_MS")
      }
    }))

  it.effect("values from the environment; TRUSTED_PROXIES is a list; secrets stay redacted", () =>
    Effect.gen(function*() {
      const config = yield* configFrom({
        HOST: "0.0.0.0",
        PORT: "9000",
        OPS_PORT: "9001",
        DATA_DIR: "/var/lib/coffer",
        DATABASE_URL: "postgres://u:secret@db/coffer",
        OPS_TOKEN: "operator-secret",
        SERVICE_ENV: "production",
        TRUSTED_PROXIES: "10.0.0.0/8, 192.168.1.1\n::1"
      })
      assert.strictEqual(config.host, "0.0.0.0")
      assert.strictEqual(config.port, 9000)
      assert.strictEqual(config.opsPort, 9001)
      assert.strictEqual(config.dataDir, "/var/lib/coffer")
      assert.strictEqual(config.serviceEnv, "production")
      assert.deepStrictEqual(config.trustedProxies, ["10.0.0.0/8", "192.168.1.1", "::1"])
      assert.strictEqual(Redacted.value(Option.getOrThrow(config.opsToken)), "operator-secret")
      assert.notInclude(String(Option.getOrThrow(config.databaseUrl)), "secret")
      assert.notInclude(JSON.stringify(config), "operator-secret")
    }))

  it.effect("an unknown SERVICE_ENV or a bad port refuses to start", () =>
    Effect.gen(function*() {
      assert.isTrue(Exit.isFailure(yield* Effect.exit(configFrom({ SERVICE_ENV: "staging" }))))
      assert.isTrue(Exit.isFailure(yield* Effect.exit(configFrom({ PORT: "http" }))))
      assert.isTrue(Exit.isFailure(yield* Effect.exit(configFrom({ OPS_PORT: "70000" }))))
    }))
})

describe("operator token", () => {
  const tokenWith = (overrides: Parameters<typeof AppConfig.layerTest>[0]) =>
    Effect.service(OpsToken).pipe(
      Effect.provide(OpsToken.layer.pipe(Layer.provide(Layer.mergeAll(AppConfig.layerTest(overrides), Entropy.layer))))
    )

  it.effect("generated once into <data dir>/ops-token (mode 0600) and reused on the next start", () =>
    Effect.gen(function*() {
      const dataDir = freshDataDir()
      const first = Redacted.value(yield* tokenWith({ dataDir }))
      assert.match(first, /^[0-9a-f]{64}$/)
      const file = join(dataDir, "ops-token")
      assert.strictEqual(readFileSync(file, "utf8").trim(), first)
      assert.strictEqual(modeOf(file), 0o600)
      assert.strictEqual(Redacted.value(yield* tokenWith({ dataDir })), first)
      assert.notStrictEqual(Redacted.value(yield* tokenWith({ dataDir: freshDataDir() })), first)
    }))

  it.effect("OPS_TOKEN wins and nothing is written", () =>
    Effect.gen(function*() {
      const dataDir = freshDataDir()
      const token = yield* tokenWith({ dataDir, opsToken: Option.some(Redacted.make("from-env")) })
      assert.strictEqual(Redacted.value(token), "from-env")
      assert.isFalse(existsSync(join(dataDir, "ops-token")))
    }))
})

describe("development provisioning", () => {
  const development = (dataDir: string) =>
    makeTestAppLayer({ serviceEnv: "development", dataDir, signerMnemonic: Option.some(Redacted.make(testMnemonic)) })

  it.effect("the first start in development provisions a dev tenant whose key signs /v1 calls; later starts do nothing", () =>
    Effect.gen(function*() {
      const dataDir = freshDataDir()
      const first = yield* Effect.gen(function*() {
        const credentials = yield* DevProvisioning
        assert.isDefined(credentials)
        const keyFile = join(dataDir, devKeyFile)
        const privateKey = createPrivateKey(readFileSync(keyFile, "utf8"))
        const baseUrl = yield* PublicAddress
        const tenant = { tenantId: credentials!.tenantId, keyId: credentials!.keyId, privateKey, publicKeyHex: "", baseUrl }
        const networks = yield* rawRequest({ baseUrl, method: "GET", target: "/v1/networks", tenant })
        assert.strictEqual(networks.status, 200, networks.text)
        assert.isTrue(networks.json.length >= 4)
        return credentials!
      }).pipe(Effect.provide(development(dataDir)))
      assert.match(first.keyId, /^ak_[0-9a-f]{24}$/)
      assert.strictEqual(modeOf(join(dataDir, devKeyFile)), 0o600)
      const marker = JSON.parse(readFileSync(join(dataDir, devTenantFile), "utf8"))
      assert.deepStrictEqual(marker, { tenantId: first.tenantId, keyId: first.keyId })
      const keyBefore = readFileSync(join(dataDir, devKeyFile), "utf8")
      const second = yield* Effect.service(DevProvisioning).pipe(Effect.provide(development(dataDir)))
      assert.isUndefined(second)
      assert.strictEqual(readFileSync(join(dataDir, devKeyFile), "utf8"), keyBefore)
    }))

  it.effect("never outside development", () =>
    Effect.gen(function*() {
      const dataDir = freshDataDir()
      const credentials = yield* Effect.service(DevProvisioning).pipe(Effect.provide(makeTestAppLayer({ dataDir })))
      assert.isUndefined(credentials)
      assert.isFalse(existsSync(join(dataDir, devKeyFile)))
      assert.isFalse(existsSync(join(dataDir, devTenantFile)))
    }))
})
