/**
 * Typed configuration from the environment (operator-interface.md, "Running the service"). Secrets are Redacted so
 * they never print; limits are named with their unit last.
 */
import { Config, Context, Data, Effect, Layer, Option, Redacted } from "effect"

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
}

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
        autoSweeps: Config.Boolean("AUTO_SWEEPS").pipe(Config.withDefault(true))
      })
      return AppConfig.of({
        ...config,
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
      ...overrides
    })
}
