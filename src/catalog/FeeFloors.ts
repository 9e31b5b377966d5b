/**
 * Fee rule 3's dynamic floor per asset (spec section 2; decisions.md "Operating wallets, sweeps, gas and fee
 * floors", Dynamic floor), converted by Fees.ts `dynamicFloor`:
 *
 * - withdrawals: the highest `network_fee` of the last 20 COMPLETED withdrawals of the asset on its network (all
 *   tenants);
 * - deposits: the highest cost of the last 20 COMPLETED sweeps of the asset, a sweep's cost being its own network fee
 *   plus the fee of the top-up that paid for it (tokens on EVM and TRON; `sweeps` in sql/0012_outgoing.sql). BTC
 *   has no sweeps, so no dynamic deposit floor (fee rule 3);
 * - with no such history yet, the network's current fee estimate for one such transaction (the chain client's
 *   `networkFee`): one withdrawal of the asset; for a deposit one sweep of it, plus one native transfer (the top-up)
 *   for an EVM or TRON token. A network whose client cannot send has no estimate: static floors only.
 *
 * The cost in the native coin is recomputed at most every `FeeFloorRefreshMillis` (60 s) per network, by the Clock;
 * prices are read on every use (PriceFeed), so a new price holds at once. A token without a price (or whose network's
 * native coin has none) keeps its static floors, with a warning logged at most hourly per asset.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { ChainClients } from "../chains/ChainClient.ts"
import { decodeRows, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { Catalog, type CatalogAsset } from "./Catalog.ts"
import { type DynamicFloors, dynamicFloor } from "./Fees.ts"
import { PriceFeed, type PriceView } from "./PriceFeed.ts"

/** How long a network's recent cost is reused before it is read again (decisions.md: at most every 60 s). */
export const FeeFloorRefreshMillis = Context.Reference<number>("coffer/FeeFloorRefreshMillis", {
  defaultValue: () => 60_000
})

/** The history fee rule 3 looks at: the last 20 similar transactions. */
export const feeHistoryDepth = 20

/** A missing price is logged at most this often per asset (decisions.md: "a warning logged at most hourly"). */
export const missingPriceWarningMillis = 3_600_000

/** A network's recent costs per asset, in the smallest unit of its native coin, before margin and conversion. */
interface NetworkCosts {
  readonly computedAtMillis: number
  readonly costs: ReadonlyMap<string, { readonly withdraw: bigint; readonly deposit: bigint }>
}

const historyRows = decodeRows(
  Schema.Struct({ asset_id: Text, withdraw_cost: Nullable(Numeric), deposit_cost: Nullable(Numeric) }),
  "FeeFloors.history"
)

export class FeeFloors extends Context.Service<FeeFloors, {
  /**
   * The dynamic floors of these assets now, as a lookup (one price read for all of them; none with `prices`, the
   * prices the caller read itself, e.g. as a part of its own statement: PriceFeed.ts `part`).
   */
  readonly floors: (
    assets: ReadonlyArray<CatalogAsset>,
    prices?: PriceView
  ) => Effect.Effect<(asset: CatalogAsset) => DynamicFloors>
  /** The dynamic floors of one asset now. */
  readonly floor: (asset: CatalogAsset, prices?: PriceView) => Effect.Effect<DynamicFloors>
}>()("coffer/FeeFloors") {
  static readonly layer = Layer.effect(
    FeeFloors,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      const priceFeed = yield* PriceFeed
      const refreshMillis = yield* FeeFloorRefreshMillis
      const cache = new Map<string, NetworkCosts>()
      const warnedAtMillis = new Map<string, number>()

      /** Recent history per catalog asset of the network: null where there is none yet. One query for the network. */
      const history = (networkKey: string) => {
        const assetIds = catalog.assets.filter((asset) => asset.networkKey === networkKey).map((asset) => asset.assetId)
        return sql`
          SELECT a.asset_id,
            (SELECT max(w.network_fee) FROM (
              SELECT t.network_fee FROM transactions t
              WHERE t.kind = 'WITHDRAWAL' AND t.status = 'COMPLETED' AND t.network_key = ${networkKey}
                AND t.asset_id = a.asset_id AND t.network_fee IS NOT NULL
              ORDER BY t.updated_at DESC LIMIT ${feeHistoryDepth}) w)::text AS withdraw_cost,
            (SELECT max(s.network_fee + coalesce(
                (SELECT sum(u.network_fee) FROM sweeps u WHERE u.kind = 'TOP_UP' AND u.for_sweep_id = s.id), 0))
              FROM (
                SELECT id, network_fee FROM sweeps
                WHERE kind = 'SWEEP' AND status = 'COMPLETED' AND network_key = ${networkKey}
                  AND asset_id = a.asset_id AND network_fee IS NOT NULL
                ORDER BY updated_at DESC LIMIT ${feeHistoryDepth}) s)::text AS deposit_cost
          FROM jsonb_array_elements_text(${JSON.stringify(assetIds)}::jsonb) AS a (asset_id)`.pipe(
          Effect.orDie,
          Effect.flatMap(historyRows)
        )
      }

      const computeCosts = Effect.fn("FeeFloors.computeCosts")(function*(
        networkKey: string,
        previous: NetworkCosts | undefined
      ) {
        const network = catalog.network(networkKey)!
        const sender = clients.get(networkKey)?.withdrawals
        const nativeAssetId = network.nativeAssetId
        /** The client's estimate for one transaction of the asset; on failure the last known cost, else none. */
        const estimate = (assetId: string, fallback: bigint | undefined) =>
          sender === undefined ? Effect.succeed(0n) : sender.networkFee(assetId).pipe(
            Effect.catchTag("ChainUnavailable", (error) =>
              Effect.as(
                Effect.logWarning("fee estimate unavailable; keeping the last known cost").pipe(
                  Effect.annotateLogs({ networkKey, assetId, reason: error.message })
                ),
                fallback ?? 0n
              ))
          )
        const costs = new Map<string, { withdraw: bigint; deposit: bigint }>()
        for (const row of yield* history(networkKey)) {
          const asset = catalog.asset(row.asset_id)
          if (asset === undefined) continue
          const before = previous?.costs.get(asset.assetId)
          const withdraw = row.withdraw_cost ?? (yield* estimate(asset.assetId, before?.withdraw))
          let deposit = 0n
          if (network.chainFamily !== "BTC") {
            if (row.deposit_cost !== null) {
              deposit = row.deposit_cost
            } else {
              const sweep = yield* estimate(asset.assetId, before?.deposit)
              // EVM and TRON tokens are swept after an exact native top-up from the tenant's GAS wallet; on SOL the
              // GAS wallet pays the sweep's fee itself (decisions.md "Operating wallets").
              const topUp = asset.kind === "TOKEN" && (network.chainFamily === "EVM" || network.chainFamily === "TRON")
                ? yield* estimate(nativeAssetId, 0n)
                : 0n
              deposit = sweep + topUp
            }
          }
          costs.set(asset.assetId, { withdraw, deposit })
        }
        return costs
      })

      const networkCosts = (networkKey: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const cached = cache.get(networkKey)
          if (cached !== undefined && now - cached.computedAtMillis < refreshMillis) return cached.costs
          const costs = yield* computeCosts(networkKey, cached)
          cache.set(networkKey, { computedAtMillis: now, costs })
          return costs
        })

      const warnMissingPrice = (asset: CatalogAsset, nativeAssetId: string) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const last = warnedAtMillis.get(asset.assetId)
          if (last !== undefined && now - last < missingPriceWarningMillis) return
          warnedAtMillis.set(asset.assetId, now)
          yield* Effect.logWarning("no price: the asset's static fee floors alone apply").pipe(
            Effect.annotateLogs({ assetId: asset.assetId, nativeAssetId })
          )
        })

      const floors = Effect.fn("FeeFloors.floors")(function*(assets: ReadonlyArray<CatalogAsset>, known?: PriceView) {
        const prices = known ?? (yield* priceFeed.current)
        const result = new Map<string, DynamicFloors>()
        for (const asset of assets) {
          const network = catalog.network(asset.networkKey)!
          const native = catalog.asset(network.nativeAssetId)!
          const cost = (yield* networkCosts(network.networkKey)).get(asset.assetId) ?? { withdraw: 0n, deposit: 0n }
          const convert = (costNative: bigint) =>
            dynamicFloor({
              costNative,
              network,
              native,
              asset,
              nativePriceUsd: prices.priceUsd(native.assetId),
              assetPriceUsd: prices.priceUsd(asset.assetId)
            })
          const withdraw = convert(cost.withdraw)
          const deposit = convert(cost.deposit)
          if (withdraw === undefined || deposit === undefined) yield* warnMissingPrice(asset, native.assetId)
          result.set(asset.assetId, { withdraw: withdraw ?? 0n, deposit: deposit ?? 0n })
        }
        return (asset: CatalogAsset) => result.get(asset.assetId) ?? { withdraw: 0n, deposit: 0n }
      })

      const floor = (asset: CatalogAsset, prices?: PriceView) => Effect.map(floors([asset], prices), (lookup) => lookup(asset))

      return FeeFloors.of({ floors, floor })
    })
  )
}
