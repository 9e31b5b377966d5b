/**
 * The network and asset catalog: data, not code (src/catalog/<SERVICE_ENV>.json). Loaded and validated at start,
 * upserted into `networks`/`assets` so SQL can join it, and held in memory for the hot read paths.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { readFileSync } from "node:fs"
import { AppConfig } from "../Config.ts"
import { RawAmount } from "../domain/RawAmount.ts"
import { projectFile } from "../ProjectRoot.ts"

export const Confirmations = Schema.Union([
  Schema.Struct({ mode: Schema.Literal("confirmations"), n: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1000 })) }),
  Schema.Struct({ mode: Schema.Literal("finalized") }),
  Schema.Struct({ mode: Schema.Literal("solidified") })
])
export type Confirmations = typeof Confirmations.Type

export const CatalogNetwork = Schema.Struct({
  networkKey: Schema.String,
  chainFamily: Schema.Literals(["EVM", "TRON", "BTC", "SOL"]),
  displayName: Schema.String,
  isTestnet: Schema.Boolean,
  enabled: Schema.Boolean,
  depositEnabled: Schema.Boolean,
  withdrawEnabled: Schema.Boolean,
  newWalletsEnabled: Schema.Boolean,
  confirmations: Confirmations,
  btcNetwork: Schema.NullOr(Schema.Literals(["main", "test", "regtest"])),
  /** EVM networks' chain id (EIP-155): a configured node must report it, and signatures commit to it. */
  evmChainId: Schema.NullOr(Schema.Int.check(Schema.isGreaterThan(0))),
  /**
   * SOL and TRON: the hash of the network's genesis block (SOL `getGenesisHash`, TRON block 0's `blockID`). When
   * named, a configured node must report it (decisions.md "Sending on real networks"); absent: not checked.
   */
  genesisHash: Schema.optionalKey(Schema.NullOr(Schema.String)),
  nativeAssetId: Schema.String,
  /** Typical time between blocks; a watcher more than 10 block times behind the head reports DEGRADED. */
  blockTimeMillis: Schema.Int.check(Schema.isGreaterThan(0)),
  /**
   * The most the network's fee rate may reach, in the family's unit (decisions.md "Sending on real networks"): EVM
   * maxFeePerGas in wei, TRON the fee limit in sun, BTC sat/vB, SOL lamports per transaction. Estimates and
   * replacements never go above it.
   */
  feeRateCap: RawAmount,
  /** Fee rule 3's margin on the dynamic floor (decisions.md: default 0.2); a ratio, not money. */
  feeSafetyFactor: Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 10 }))
})
export type CatalogNetwork = typeof CatalogNetwork.Type

export const CatalogAsset = Schema.Struct({
  assetId: Schema.String,
  networkKey: Schema.String,
  kind: Schema.Literals(["NATIVE", "TOKEN"]),
  contract: Schema.NullOr(Schema.String),
  tokenProgram: Schema.NullOr(Schema.String),
  symbol: Schema.String,
  name: Schema.String,
  decimals: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 36 })),
  status: Schema.Literals(["ENABLED", "DEPOSIT_PAUSED", "DISABLED"]),
  withdrawEnabled: Schema.Boolean,
  minDeposit: RawAmount,
  minWithdraw: RawAmount,
  withdrawFeeFloor: RawAmount,
  depositFeeFloor: RawAmount,
  singleLimitCap: Schema.NullOr(RawAmount),
  dailyLimitCap: Schema.NullOr(RawAmount),
  iconUrl: Schema.NullOr(Schema.String),
  /** The default price (PriceFeed; PUT /ops/prices overrides it), a decimal string in USD; null: no price. */
  priceUsd: Schema.NullOr(Schema.String.check(Schema.isPattern(/^(0|[1-9][0-9]*)(\.[0-9]{1,18})?$/))),
  /** Sweeps go to HOT while HOT holds less than this, else to SWEEP (decisions.md "Operating wallets"). */
  hotTargetRaw: RawAmount,
  /** A deposit address's balance below this waits for more; null: 10 × the current cost of one sweep. */
  sweepThresholdRaw: Schema.NullOr(RawAmount)
})
export type CatalogAsset = typeof CatalogAsset.Type

/** The tokens among `assets` with their contract (EVM, TRON) or mint (SOL) address: what a node client watches. */
export const tokenContracts = (assets: ReadonlyArray<CatalogAsset>) =>
  assets.flatMap((asset) =>
    asset.kind === "TOKEN" && asset.contract !== null ? [{ asset, assetId: asset.assetId, contract: asset.contract }] : []
  )

export const CatalogFile = Schema.Struct({
  networks: Schema.Array(CatalogNetwork),
  assets: Schema.Array(CatalogAsset)
})
export type CatalogFile = typeof CatalogFile.Type

export class CatalogError extends Schema.TaggedError<CatalogError>()("CatalogError", { message: Schema.String }) {}

/** Cross-record rules a schema cannot state: unique keys, every asset on a known network, one native per network. */
export const checkCatalog = (catalog: CatalogFile): string | undefined => {
  const networks = new Map(catalog.networks.map((network) => [network.networkKey, network]))
  if (networks.size !== catalog.networks.length) return "duplicate networkKey"
  const assetIds = new Set(catalog.assets.map((asset) => asset.assetId))
  if (assetIds.size !== catalog.assets.length) return "duplicate assetId"
  for (const asset of catalog.assets) {
    if (!networks.has(asset.networkKey)) return `asset ${asset.assetId} names unknown network ${asset.networkKey}`
    if ((asset.kind === "NATIVE") !== (asset.contract === null)) return `asset ${asset.assetId}: contract iff TOKEN`
  }
  for (const network of catalog.networks) {
    const native = catalog.assets.find((asset) => asset.assetId === network.nativeAssetId)
    if (native === undefined || native.kind !== "NATIVE" || native.networkKey !== network.networkKey) {
      return `network ${network.networkKey}: nativeAssetId must name its NATIVE asset`
    }
    if ((network.chainFamily === "BTC") !== (network.btcNetwork !== null)) {
      return `network ${network.networkKey}: btcNetwork is required for BTC and only for BTC`
    }
    if ((network.chainFamily === "EVM") !== (network.evmChainId !== null)) {
      return `network ${network.networkKey}: evmChainId is required for EVM and only for EVM`
    }
  }
  return undefined
}

export const loadCatalogFile = (environment: string): Effect.Effect<CatalogFile, CatalogError> =>
  Effect.gen(function*() {
    const url = projectFile(`src/catalog/${environment}.json`)
    const text = yield* Effect.try({
      try: () => readFileSync(url, "utf8"),
      catch: () => new CatalogError({ message: `no catalog for SERVICE_ENV=${environment} (${url.pathname})` })
    })
    const catalog = yield* Schema.decodeUnknownEffect(Schema.fromJsonString(CatalogFile))(text).pipe(
      Effect.mapError((error) => new CatalogError({ message: `catalog ${environment}.json is invalid: ${error.message}` }))
    )
    const problem = checkCatalog(catalog)
    if (problem !== undefined) return yield* new CatalogError({ message: `catalog ${environment}.json: ${problem}` })
    return catalog
  })

export class Catalog extends Context.Service<Catalog, {
  readonly networks: ReadonlyArray<CatalogNetwork>
  readonly assets: ReadonlyArray<CatalogAsset>
  readonly network: (networkKey: string) => CatalogNetwork | undefined
  readonly asset: (assetId: string) => CatalogAsset | undefined
}>()("coffer/Catalog") {
  static readonly make = (catalog: CatalogFile) => {
    const networks = new Map(catalog.networks.map((network) => [network.networkKey, network]))
    const assets = new Map(catalog.assets.map((asset) => [asset.assetId, asset]))
    return Catalog.of({
      networks: catalog.networks,
      assets: catalog.assets,
      network: (networkKey) => networks.get(networkKey),
      asset: (assetId) => assets.get(assetId)
    })
  }

  /** Loads the file for SERVICE_ENV and mirrors it into the database. */
  static readonly layer = Layer.effect(
    Catalog,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* loadCatalogFile(config.serviceEnv)
      yield* sql.withTransaction(Effect.gen(function*() {
        for (const network of catalog.networks) {
          yield* sql`
            INSERT INTO networks (network_key, chain_family, display_name, is_testnet, enabled, deposit_enabled,
              withdraw_enabled, new_wallets_enabled, confirmations, btc_network, native_asset_id)
            VALUES (${network.networkKey}, ${network.chainFamily}, ${network.displayName}, ${network.isTestnet},
              ${network.enabled}, ${network.depositEnabled}, ${network.withdrawEnabled}, ${network.newWalletsEnabled},
              ${JSON.stringify(network.confirmations)}::jsonb, ${network.btcNetwork}, ${network.nativeAssetId})
            ON CONFLICT (network_key) DO UPDATE SET chain_family = EXCLUDED.chain_family,
              display_name = EXCLUDED.display_name, is_testnet = EXCLUDED.is_testnet, enabled = EXCLUDED.enabled,
              deposit_enabled = EXCLUDED.deposit_enabled, withdraw_enabled = EXCLUDED.withdraw_enabled,
              new_wallets_enabled = EXCLUDED.new_wallets_enabled, confirmations = EXCLUDED.confirmations,
              btc_network = EXCLUDED.btc_network, native_asset_id = EXCLUDED.native_asset_id`
        }
        for (const [index, asset] of catalog.assets.entries()) {
          yield* sql`
            INSERT INTO assets (asset_id, network_key, kind, contract, token_program, symbol, name, decimals, status,
              withdraw_enabled, min_deposit, min_withdraw, withdraw_fee_floor, deposit_fee_floor, single_limit_cap,
              daily_limit_cap, icon_url, sort_order)
            VALUES (${asset.assetId}, ${asset.networkKey}, ${asset.kind}, ${asset.contract}, ${asset.tokenProgram},
              ${asset.symbol}, ${asset.name}, ${asset.decimals}, ${asset.status}, ${asset.withdrawEnabled},
              ${asset.minDeposit.toString()}::numeric, ${asset.minWithdraw.toString()}::numeric,
              ${asset.withdrawFeeFloor.toString()}::numeric, ${asset.depositFeeFloor.toString()}::numeric,
              ${asset.singleLimitCap?.toString() ?? null}::numeric, ${asset.dailyLimitCap?.toString() ?? null}::numeric,
              ${asset.iconUrl}, ${index})
            ON CONFLICT (asset_id) DO UPDATE SET network_key = EXCLUDED.network_key, kind = EXCLUDED.kind,
              contract = EXCLUDED.contract, token_program = EXCLUDED.token_program, symbol = EXCLUDED.symbol,
              name = EXCLUDED.name, decimals = EXCLUDED.decimals, status = EXCLUDED.status,
              withdraw_enabled = EXCLUDED.withdraw_enabled, min_deposit = EXCLUDED.min_deposit,
              min_withdraw = EXCLUDED.min_withdraw, withdraw_fee_floor = EXCLUDED.withdraw_fee_floor,
              deposit_fee_floor = EXCLUDED.deposit_fee_floor, single_limit_cap = EXCLUDED.single_limit_cap,
              daily_limit_cap = EXCLUDED.daily_limit_cap, icon_url = EXCLUDED.icon_url, sort_order = EXCLUDED.sort_order`
        }
      })).pipe(Effect.orDie)
      return Catalog.make(catalog)
    })
  )
}
