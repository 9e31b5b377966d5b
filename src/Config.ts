/**
 * Typed configuration from the environment (operator-interface.md, "Running the service"). Secrets are Redacted so
 * they never print; limits are named with their unit last.
 */
import { Config, Context, Data, Effect, Layer, Option, Redacted } from "effect"
import { broadcastAnswerMaxMillis } from "./chains/ChainClient.ts"

export const ServiceEnv = ["development", "preproduction", "production"] as const
export type ServiceEnv = (typeof ServiceEnv)[number]

export interface AppConfigShape {
  readonly host: string
  readonly port: number
  readonly opsHost: string
  readonly opsPort: number
  readonly dataDir: string
  /** Unset: the service starts an embedded PostgreSQL under `dataDir`. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  /** Unset: generated once and written to `<dataDir>/ops-token`. */
  readonly opsToken: Option.Option<Redacted.Redacted<string>>
  readonly serviceEnv: ServiceEnv
  /** Peers whose `X-Forwarded-For` is believed (IP or CIDR). */
  readonly trustedProxies: ReadonlyArray<string>
  /** BIP-39 mnemonic of the local HD signer; unset in development: generated once under `dataDir`. */
  readonly signerMnemonic: Option.Option<Redacted.Redacted<string>>
  /**
   * Whether every catalog network runs on the built-in simulated chain (operator-interface.md: the default on a
   * developer machine and in tests). `SIMULATED_CHAINS`; default true in development only. Only EVM networks have
   * a real client (`chainRpcUrls`); without either, a network is not watched.
   */
  readonly simulatedChains: boolean
  /**
   * JSON-RPC node per network (`CHAIN_RPC_URLS`, a JSON object networkKey -> URL). Redacted: provider URLs often
   * carry an API key. A network listed here is watched on that node instead of the simulated chain.
   */
  readonly chainRpcUrls: Readonly<Record<string, Redacted.Redacted<string>>>
  /**
   * Whether the sweep loop runs (`AUTO_SWEEPS`, default true; docs/sweeps.md): off, credited deposits stay on their
   * addresses until it is on again, e.g. while an operator investigates an address, or in a test that audits
   * balances without sweeps moving them.
   */
  readonly autoSweeps: boolean
  /**
   * Where the other processes of the cluster reach this one (entities/Cluster.ts, README "Several processes"):
   * `RUNNER_HOST` (default 127.0.0.1: every process on one machine) and `RUNNER_PORT` (default 0: a free port is
   * taken and the bound one advertised), or both at once as `RUNNER_ADDRESS=host:port`. `RUNNER_LISTEN_HOST` is the
   * interface the runner port listens on: by default the advertised host when it is loopback, else every interface.
   * `RUNNER_SECRET`: the cluster's shared secret; set, runners speak TLS with a key derived from it (TLS-PSK,
   * entities/RunnerTransport.ts) and a peer without it cannot connect. Required when the port listens beyond loopback.
   */
  readonly runner: {
    readonly host: string
    readonly port: number
    readonly listenHost: string
    readonly secret: Option.Option<Redacted.Redacted<string>>
  }
  /**
   * Shards of the cluster (`CLUSTER_SHARDS`, default 60): every process of a cluster must use the same number, and
   * one with another refuses to start (entities/Cluster.ts, `checkClusterSettings`).
   */
  readonly clusterShards: number
  /**
   * How long a version's broadcast claim (sql/0030, sending/OutgoingSends.ts) is left to its claimer before another
   * process may take it again (`BROADCAST_CLAIM_GRACE_MS`, default `broadcastClaimGraceDefaultMillis`). It must
   * exceed the longest a live process takes from its last look at its claim to the node's answer, which is the
   * broadcast call's bound (chains/ChainClient.ts `broadcastAnswerMaxMillis`); shorter, a node slow to answer may be
   * given the same bytes by a second process too (harmless on chain, docs/operations.md). Shorter is for tests on
   * local nodes that kill the claimer on purpose.
   */
  readonly broadcastClaimGraceMillis: number
}

/** The broadcast claim's grace by default: the broadcast call's bound and 5 s of margin for the process itself. */
export const broadcastClaimGraceDefaultMillis = broadcastAnswerMaxMillis + 5_000

/** A setting that is present but unusable; the message never repeats the value (it may be a secret). */
export class ConfigInvalid extends Data.TaggedError("ConfigInvalid")<{ readonly message: string }> {}

/** `CHAIN_RPC_URLS`: a JSON object of networkKey to an http(s) URL. */
export const parseChainRpcUrls = (
  text: string
): Effect.Effect<Readonly<Record<string, Redacted.Redacted<string>>>, ConfigInvalid> => {
  const invalid = (why: string) => Effect.fail(new ConfigInvalid({ message: `CHAIN_RPC_URLS: ${why}` }))
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return invalid("not JSON (expected an object of networkKey to URL)")
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return invalid("expected a JSON object of networkKey to URL")
  }
  const urls: Record<string, Redacted.Redacted<string>> = {}
  for (const [networkKey, url] of Object.entries(parsed)) {
    if (typeof url !== "string" || !/^https?:\/\/\S+$/.test(url)) {
      return invalid(`the URL of ${networkKey} is not an http(s) URL`)
    }
    urls[networkKey] = Redacted.make(url)
  }
  return Effect.succeed(urls)
}

/**
 * Shards of the cluster by default: enough to spread entities over a handful of processes; effect/cluster's own
 * 300 made every start and stop take and release 300 advisory locks one by one (seconds on a loaded machine).
 */
export const defaultClusterShards = 60

const isLoopback = (host: string) => host === "localhost" || host === "::1" || /^127\./.test(host)

/** The shortest `RUNNER_SECRET` taken: the key of every runner connection is derived from it. */
export const runnerSecretMinLength = 32

/** The runner's advertised and listening address from `RUNNER_ADDRESS` or `RUNNER_HOST`/`RUNNER_PORT` (above). */
export const parseRunnerAddress = (settings: {
  readonly runnerAddress: Option.Option<string>
  readonly runnerHost: Option.Option<string>
  readonly runnerPort: number
  readonly runnerListenHost: Option.Option<string>
  readonly runnerSecret: Option.Option<Redacted.Redacted<string>>
}): Effect.Effect<AppConfigShape["runner"], ConfigInvalid> => {
  let host = Option.getOrElse(settings.runnerHost, () => "127.0.0.1")
  let port = settings.runnerPort
  if (Option.isSome(settings.runnerAddress)) {
    const match = /^(.+):(\d{1,5})$/.exec(settings.runnerAddress.value.trim())
    if (match === null) {
      return Effect.fail(new ConfigInvalid({ message: "RUNNER_ADDRESS: expected host:port" }))
    }
    host = match[1]!.replace(/^\[(.*)\]$/, "$1")
    port = Number(match[2])
  }
  if (!Number.isSafeInteger(port) || port < 0 || port > 65_535) {
    return Effect.fail(new ConfigInvalid({ message: "RUNNER_PORT: expected a port from 0 to 65535" }))
  }
  const listenHost = Option.getOrElse(settings.runnerListenHost, () => isLoopback(host) ? host : "0.0.0.0")
  const secret = settings.runnerSecret
  if (Option.isSome(secret) && Redacted.value(secret.value).length < runnerSecretMinLength) {
    return Effect.fail(new ConfigInvalid({ message: `RUNNER_SECRET: expected at least ${runnerSecretMinLength} characters` }))
  }
  // The runner port takes the cluster's messages and runs entity handlers on request: reachable from other machines,
  // only peers that hold the secret may speak to it (docs/operations.md, "The runner port").
  if (Option.isNone(secret) && !isLoopback(listenHost)) {
    return Effect.fail(new ConfigInvalid({
      message: `RUNNER_SECRET: required when the runner port listens beyond loopback (on ${listenHost}); ` +
        "set the same secret of at least 32 characters on every process of the cluster"
    }))
  }
  return Effect.succeed({ host, port, listenHost, secret })
}

export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("coffer/AppConfig") {
  static readonly layerConfig = Layer.effect(
    AppConfig,
    Effect.gen(function*() {
      const config = yield* Config.all({
        host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
        port: Config.Port("PORT").pipe(Config.withDefault(8080)),
        opsHost: Config.String("OPS_HOST").pipe(Config.withDefault("127.0.0.1")),
        opsPort: Config.Port("OPS_PORT").pipe(Config.withDefault(8081)),
        dataDir: Config.String("DATA_DIR").pipe(Config.withDefault("./.data")),
        databaseUrl: Config.Redacted("DATABASE_URL").pipe(Config.option),
        opsToken: Config.Redacted("OPS_TOKEN").pipe(Config.option),
        serviceEnv: Config.Literals(ServiceEnv, "SERVICE_ENV").pipe(Config.withDefault("development" as const)),
        trustedProxies: Config.String("TRUSTED_PROXIES").pipe(Config.withDefault("")),
        signerMnemonic: Config.Redacted("SIGNER_MNEMONIC").pipe(Config.option),
        simulatedChains: Config.Boolean("SIMULATED_CHAINS").pipe(Config.option),
        chainRpcUrls: Config.Redacted("CHAIN_RPC_URLS").pipe(Config.option),
        autoSweeps: Config.Boolean("AUTO_SWEEPS").pipe(Config.withDefault(true)),
        runnerAddress: Config.String("RUNNER_ADDRESS").pipe(Config.option),
        runnerHost: Config.String("RUNNER_HOST").pipe(Config.option),
        runnerPort: Config.Int("RUNNER_PORT").pipe(Config.withDefault(0)),
        runnerListenHost: Config.String("RUNNER_LISTEN_HOST").pipe(Config.option),
        runnerSecret: Config.Redacted("RUNNER_SECRET").pipe(Config.option),
        clusterShards: Config.Int("CLUSTER_SHARDS").pipe(Config.withDefault(defaultClusterShards)),
        broadcastClaimGraceMillis: Config.Int("BROADCAST_CLAIM_GRACE_MS").pipe(
          Config.withDefault(broadcastClaimGraceDefaultMillis)
        )
      })
      const runner = yield* parseRunnerAddress(config)
      if (config.clusterShards < 1 || config.clusterShards > 10_000) {
        return yield* new ConfigInvalid({ message: "CLUSTER_SHARDS: expected a whole number from 1 to 10000" })
      }
      if (config.broadcastClaimGraceMillis < 1_000 || config.broadcastClaimGraceMillis > 3_600_000) {
        return yield* new ConfigInvalid({ message: "BROADCAST_CLAIM_GRACE_MS: expected milliseconds from 1000 to 3600000" })
      }
      const {
        runnerAddress: _address,
        runnerHost: _host,
        runnerPort: _port,
        runnerListenHost: _listen,
        runnerSecret: _secret,
        ...rest
      } = config
      return AppConfig.of({
        ...rest,
        runner,
        trustedProxies: config.trustedProxies.split(/[\s,]+/).filter((entry) => entry.length > 0),
        simulatedChains: Option.getOrElse(config.simulatedChains, () => config.serviceEnv === "development"),
        chainRpcUrls: Option.isSome(config.chainRpcUrls)
          ? yield* parseChainRpcUrls(Redacted.value(config.chainRpcUrls.value))
          : {}
      })
    })
  )

  /** For tests: every field explicit, nothing read from the environment. */
  static readonly layerTest = (overrides: Partial<AppConfigShape> = {}) =>
    Layer.succeed(AppConfig)({
      host: "127.0.0.1",
      port: 0,
      opsHost: "127.0.0.1",
      opsPort: 0,
      dataDir: "./.data-test",
      databaseUrl: Option.none(),
      opsToken: Option.none(),
      serviceEnv: "development",
      trustedProxies: [],
      signerMnemonic: Option.none(),
      simulatedChains: true,
      chainRpcUrls: {},
      autoSweeps: true,
      runner: { host: "127.0.0.1", port: 0, listenHost: "127.0.0.1", secret: Option.none() },
      clusterShards: defaultClusterShards,
      broadcastClaimGraceMillis: broadcastClaimGraceDefaultMillis,
      ...overrides
    })
}
