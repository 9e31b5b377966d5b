/**
 * The runner port with `RUNNER_SECRET` (src/entities/RunnerTransport.ts): the service's own runner (ClusterLayer, as
 * every process starts it) answers effect/cluster's runner protocol only to a peer that holds the same secret. A peer
 * with another secret, or with none (plain TCP, as effect/cluster's own socket client speaks), is not served. Without a
 * secret the port speaks plain TCP, and Config.ts refuses to listen beyond loopback that way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Layer, Option, Redacted } from "effect"
import { MessageStorage, type RunnerAddress, Runners, ShardingConfig, Snowflake } from "effect/cluster"
import { RpcSerialization } from "effect/rpc"
import { AppConfig, parseRunnerAddress } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { ClusterLayer } from "../../src/entities/Cluster.ts"
import { runnerClientProtocol, runnerPsk } from "../../src/entities/RunnerTransport.ts"

const secret = Redacted.make("a-cluster-secret-of-more-than-32-characters")
const otherSecret = Redacted.make("another-secret-of-more-than-32-characters!!")

/** A runner of the cluster as another process would start it, with `RUNNER_SECRET` set or not. */
const runnerLayer = (withSecret: Option.Option<Redacted.Redacted<string>>) =>
  ClusterLayer.pipe(
    Layer.provide(AppConfig.layerTest({
      // No data directory: the runner takes a free port and records nothing.
      dataDir: "/nonexistent/coffer-runner-transport-test",
      runner: { host: "127.0.0.1", port: 0, listenHost: "127.0.0.1", secret: withSecret }
    })),
    Layer.provide(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!)))
  )

/** effect/cluster's runner ping (its health check) to `address`, from a peer connecting with `psk` (none: plain TCP). */
const pingFrom = (psk: Buffer | undefined, address: RunnerAddress.RunnerAddress) =>
  Effect.scoped(Effect.gen(function*() {
    const runners = yield* Runners.makeRpc.pipe(
      Effect.provide(runnerClientProtocol(psk)),
      Effect.provide(RpcSerialization.layerSchemaBinary()),
      Effect.provide(MessageStorage.layerNoop),
      Effect.provide(Snowflake.layerGenerator),
      Effect.provide(ShardingConfig.layer())
    )
    // A peer that is not served either fails (RunnerUnavailable) or hears nothing; both are bounded here.
    return yield* Effect.exit(runners.ping(address).pipe(Effect.timeout(Duration.seconds(5))))
  }))

const runnerAddress = Effect.map(ShardingConfig.ShardingConfig, (config) => Option.getOrThrow(config.runnerAddress))

describe("the runner port", () => {
  it.live("with RUNNER_SECRET: a peer with the secret is answered; one with another secret or none is not", () =>
    Effect.gen(function*() {
      const address = yield* runnerAddress
      const served = yield* pingFrom(runnerPsk(secret), address)
      assert.isTrue(Exit.isSuccess(served), `the ping with the secret: ${String(served)}`)
      const otherKey = yield* pingFrom(runnerPsk(otherSecret), address)
      assert.isTrue(Exit.isFailure(otherKey), "a peer with another secret is not served")
      const plain = yield* pingFrom(undefined, address)
      assert.isTrue(Exit.isFailure(plain), "a peer without a secret (plain TCP) is not served")
    }).pipe(Effect.provide(runnerLayer(Option.some(secret)))), 60_000)

  it.live("without RUNNER_SECRET: plain TCP, and a peer speaking TLS is not served", () =>
    Effect.gen(function*() {
      const address = yield* runnerAddress
      const served = yield* pingFrom(undefined, address)
      assert.isTrue(Exit.isSuccess(served), `the plain ping: ${String(served)}`)
      const tls = yield* pingFrom(runnerPsk(secret), address)
      assert.isTrue(Exit.isFailure(tls))
    }).pipe(Effect.provide(runnerLayer(Option.none()))), 60_000)

  it.effect("Config: no secret beyond loopback; a short secret refused; loopback needs none", () =>
    Effect.gen(function*() {
      const settings = {
        runnerAddress: Option.none<string>(),
        runnerHost: Option.some("10.0.0.11"),
        runnerPort: 34431,
        runnerListenHost: Option.none<string>(),
        runnerSecret: Option.none<Redacted.Redacted<string>>()
      }
      const refused = yield* Effect.flip(parseRunnerAddress(settings))
      assert.include(refused.message, "RUNNER_SECRET: required when the runner port listens beyond loopback (on 0.0.0.0)")
      const short = yield* Effect.flip(parseRunnerAddress({ ...settings, runnerSecret: Option.some(Redacted.make("short")) }))
      assert.include(short.message, "at least 32 characters")
      assert.notInclude(short.message, "short\"")
      const withSecret = yield* parseRunnerAddress({ ...settings, runnerSecret: Option.some(secret) })
      assert.deepStrictEqual([withSecret.host, withSecret.port, withSecret.listenHost], ["10.0.0.11", 34431, "0.0.0.0"])
      const loopback = yield* parseRunnerAddress({ ...settings, runnerHost: Option.none() })
      assert.strictEqual(loopback.listenHost, "127.0.0.1")
      const boundToPrivate = yield* Effect.flip(parseRunnerAddress({ ...settings, runnerListenHost: Option.some("10.0.0.11") }))
      assert.include(boundToPrivate.message, "(on 10.0.0.11)")
    }))
})
