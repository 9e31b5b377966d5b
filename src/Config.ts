/**
 * Typed configuration from the environment (operator-interface.md, "Running the service"). Secrets are Redacted so
 * they never print; limits are named with their unit last.
 */
import { Config, Context, Effect, Layer, Option, type Redacted } from "effect"

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
   * developer machine and in tests). `SIMULATED_CHAINS`; default true in development only. Real chain clients are
   * not built yet, so without it no network is watched.
   */
  readonly simulatedChains: boolean
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
        simulatedChains: Config.Boolean("SIMULATED_CHAINS").pipe(Config.option)
      })
      return AppConfig.of({
        ...config,
        trustedProxies: config.trustedProxies.split(/[\s,]+/).filter((entry) => entry.length > 0),
        simulatedChains: Option.getOrElse(config.simulatedChains, () => config.serviceEnv === "development")
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
      ...overrides
    })
}
