/**
 * Prices in USD per whole unit of each asset (decisions.md "Operating wallets, sweeps, gas and fee floors", Prices):
 * the catalog's `priceUsd` by default, overridden at run time by the operator (PUT /ops/prices, stored in
 * `asset_prices` with who set it and when, each change kept in `price_changes`: sql/0013_prices.sql). Fee rule 3
 * converts a network's cost in its native coin to a token with two of them.
 *
 * Like the switches (Switches.ts), the stored prices are read on every use (one query over a few dozen rows, or
 * `part` inside the caller's own statement), never cached: a change holds in every process from the moment its
 * transaction commits.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { type ReadPart, readAlone } from "../db/ReadPart.ts"
import { decodeFirstRow, decodeRow, Nullable, Text } from "../db/RowSchemas.ts"
import { AssetNotSupported, BadRequest } from "../domain/ApiError.ts"
import { decimalPattern, type Ratio, ratioOfDecimal } from "../domain/Ratio.ts"
import { Catalog } from "./Catalog.ts"

/** An operator's price: positive, at most 30 whole digits and 18 fraction digits (the catalog's own form). */
export const operatorPricePattern = /^(0|[1-9][0-9]{0,29})(\.[0-9]{1,18})?$/

/** The longest `setBy` stored; a longer name is cut (it is a label for the audit trail, not an identity). */
export const setByLengthMax = 100

export interface AssetPrice {
  readonly assetId: string
  /** USD per whole unit, as a decimal string; null: the asset has no price (its static fee floors alone apply). */
  readonly priceUsd: string | null
  readonly source: "CATALOG" | "OPERATOR"
  /** When and by whom the operator set it; null for a catalog price. */
  readonly setAt: Date | null
  readonly setBy: string | null
}

export interface PriceView {
  /** Every catalog asset's price in force, in catalog order. */
  readonly entries: ReadonlyArray<AssetPrice>
  /** The exact price of an asset, or undefined when it has none (or a zero price, which converts nothing). */
  readonly priceUsd: (assetId: string) => Ratio | undefined
}

// The stored prices as one JSON column, so the read can be a part of another statement (db/ReadPart.ts); `set_at` as
// epoch milliseconds, what a timestamptz column gives JavaScript anyway.
const storedPricesRow = decodeRow(
  Schema.Struct({
    stored_prices: Nullable(Schema.Array(Schema.Struct({
      asset_id: Text,
      price_usd: Text,
      set_by: Text,
      set_at: Schema.DateFromMillis
    })))
  }),
  "PriceFeed.current"
)
const lockedPriceRow = decodeFirstRow(Schema.Struct({ price_usd: Nullable(Text) }), "PriceFeed.set (lock)")

export class PriceFeed extends Context.Service<PriceFeed, {
  /** The prices in force now: the operator's where set, else the catalog's. One query; never cached. */
  readonly current: Effect.Effect<PriceView>
  /** `current` as a part of another statement (db/ReadPart.ts). */
  readonly part: ReadPart<PriceView>
  /**
   * Sets prices (a null price removes the operator's, back to the catalog's) in one transaction, each change
   * recorded with `setBy` and the time; answers the prices in force afterwards. All or nothing: one bad entry
   * rejects the request.
   */
  readonly set: (
    prices: Readonly<Record<string, string | null>>,
    setBy: string
  ) => Effect.Effect<PriceView, BadRequest | AssetNotSupported>
}>()("coffer/PriceFeed") {
  static readonly layer = Layer.effect(
    PriceFeed,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog

      const view = (rows: ReadonlyArray<{ asset_id: string; price_usd: string; set_by: string; set_at: Date }>) =>
        Effect.gen(function*() {
          const stored = new Map(rows.map((row) => [row.asset_id, row]))
          const entries: ReadonlyArray<AssetPrice> = catalog.assets.map((asset) => {
            const row = stored.get(asset.assetId)
            return row === undefined
              ? { assetId: asset.assetId, priceUsd: asset.priceUsd, source: "CATALOG", setAt: null, setBy: null }
              : {
                assetId: asset.assetId,
                priceUsd: row.price_usd,
                source: "OPERATOR",
                setAt: row.set_at,
                setBy: row.set_by
              }
          })
          const ratios = new Map<string, Ratio>()
          for (const entry of entries) {
            // A stored numeric prints as a plain decimal; anything else is a broken invariant, not a price.
            if (entry.priceUsd === null) continue
            if (!decimalPattern.test(entry.priceUsd)) {
              return yield* Effect.die(new Error(`price of ${entry.assetId} is not a decimal: ${entry.priceUsd}`))
            }
            const ratio = ratioOfDecimal(entry.priceUsd)
            if (ratio.numerator > 0n) ratios.set(entry.assetId, ratio)
          }
          return { entries, priceUsd: (assetId: string) => ratios.get(assetId) } satisfies PriceView
        })

      const part: ReadPart<PriceView> = {
        columns: sql`(SELECT json_agg(json_build_object('asset_id', asset_id, 'price_usd', price_usd::text,
          'set_by', set_by, 'set_at', floor(extract(epoch FROM set_at) * 1000)::int8)) FROM asset_prices) AS stored_prices`,
        decode: (row) => Effect.flatMap(storedPricesRow(row), (prices) => view(prices.stored_prices ?? []))
      }
      const current = readAlone(sql, part).pipe(Effect.withSpan("PriceFeed.current"))

      const set = Effect.fn("PriceFeed.set")(function*(prices: Readonly<Record<string, string | null>>, setBy: string) {
        const changes = Object.entries(prices)
        if (changes.length === 0) return yield* new BadRequest({ message: "prices must name at least one assetId" })
        for (const [assetId, price] of changes) {
          if (catalog.asset(assetId) === undefined) {
            return yield* new AssetNotSupported({ message: `unknown assetId ${assetId}` })
          }
          if (price !== null && (!operatorPricePattern.test(price) || ratioOfDecimal(price).numerator === 0n)) {
            return yield* new BadRequest({
              message: `price of ${assetId} must be a positive decimal string with at most 18 fraction digits`
            })
          }
        }
        const at = new Date(yield* Clock.currentTimeMillis)
        const by = setBy.slice(0, setByLengthMax)
        yield* sql.withTransaction(Effect.gen(function*() {
          // In assetId order, so two concurrent requests lock rows in one order and cannot deadlock.
          for (const [assetId, price] of changes.toSorted(([left], [right]) => (left < right ? -1 : 1))) {
            const previous = yield* sql`
              SELECT price_usd::text AS price_usd FROM asset_prices WHERE asset_id = ${assetId} FOR UPDATE`.pipe(
              Effect.flatMap(lockedPriceRow)
            )
            if (price === null) {
              if (previous === undefined) continue
              yield* sql`DELETE FROM asset_prices WHERE asset_id = ${assetId}`
            } else {
              yield* sql`
                INSERT INTO asset_prices (asset_id, price_usd, set_by, set_at)
                VALUES (${assetId}, ${price}::numeric, ${by}, ${at})
                ON CONFLICT (asset_id) DO UPDATE SET price_usd = EXCLUDED.price_usd, set_by = EXCLUDED.set_by,
                  set_at = EXCLUDED.set_at`
            }
            yield* sql`
              INSERT INTO price_changes (asset_id, price_usd, previous_price_usd, set_by, set_at)
              VALUES (${assetId}, ${price}::numeric, ${previous?.price_usd ?? null}::numeric, ${by}, ${at})`
          }
        })).pipe(Effect.orDie)
        yield* Effect.logInfo("prices set").pipe(Effect.annotateLogs({ setBy: by, prices: JSON.stringify(prices) }))
        return yield* current
      })

      return PriceFeed.of({ current, part, set })
    })
  )
}
