/**
 * The simulated networks' settings (sql/0008_withdrawals.sql), set by the operator through
 * PATCH /ops/devnet/{networkKey}: whether broadcasts fail, the network fee, and the platform hot wallet's balance per
 * asset (`hotWalletBalanceDefault` until one is set).
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../catalog/Catalog.ts"
import { decodeFirstRow, decodeRows, decodeSingleRow, Int4, Nullable, Numeric, Text } from "../../db/RowSchemas.ts"
import type { DevnetBlocks } from "./DevnetBlocks.ts"
import { hotWalletBalanceDefault, networkFeeDefault } from "./DevnetParameters.ts"

export interface SimulatedChainState {
  readonly networkKey: string
  readonly height: bigint
  readonly hash: string
  readonly finalizedHeight: bigint
  readonly pendingTransfers: number
  readonly broadcastFails: boolean
  readonly networkFee: bigint
  /** Every catalog asset of the network. */
  readonly hotWalletBalance: Readonly<Record<string, bigint>>
}

export interface SimulatedChainSettings {
  readonly broadcastFails?: boolean | undefined
  readonly networkFee?: bigint | undefined
  /** Replaces the balance of the named assets; others keep theirs. */
  readonly hotWalletBalance?: Readonly<Record<string, bigint>> | undefined
}

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const pendingRow = decodeSingleRow(Schema.Struct({ count: Int4 }), "SimulatedChain.state (pending)")
const settingsRow = decodeFirstRow(
  Schema.Struct({ broadcast_fails: Schema.Boolean, network_fee: Nullable(Numeric) }),
  "SimulatedChain.networkSettings"
)
const balanceRows = decodeRows(Schema.Struct({ asset_id: Text, balance: Numeric }), "SimulatedChain.hotWalletBalances")

export const makeDevnetSettings = ({ familyOf, head, lockNetwork }: DevnetBlocks) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const catalog = yield* Catalog

    const state = Effect.fn("SimulatedChain.state")(function*(networkKey: string) {
      const current = yield* head(networkKey)
      const pending = yield* sql`
        SELECT count(*)::int AS count FROM devnet_transfers WHERE network_key = ${networkKey} AND block_height IS NULL`
        .pipe(Effect.orDie, Effect.flatMap(pendingRow))
      const settings = yield* networkSettings(networkKey)
      return {
        networkKey,
        height: current.height,
        hash: current.hash,
        finalizedHeight: current.finalizedHeight,
        pendingTransfers: pending.count,
        broadcastFails: settings.broadcastFails,
        networkFee: settings.networkFee,
        hotWalletBalance: yield* hotWalletBalances(networkKey)
      }
    })

    const networkSettings = (networkKey: string) =>
      Effect.map(
        sql`
          SELECT broadcast_fails, network_fee::text AS network_fee FROM devnet_networks WHERE network_key = ${networkKey}`
          .pipe(Effect.flatMap(settingsRow)),
        (row) => ({
          broadcastFails: row?.broadcast_fails ?? false,
          networkFee: row?.network_fee == null ? networkFeeDefault[familyOf(networkKey)] : row.network_fee
        })
      ).pipe(Effect.orDie)

    const hotWalletBalances = (networkKey: string) =>
      Effect.gen(function*() {
        const rows = yield* sql`
          SELECT asset_id, balance::text AS balance FROM devnet_hot_wallet_balances WHERE network_key = ${networkKey}`
          .pipe(Effect.orDie, Effect.flatMap(balanceRows))
        const set = new Map(rows.map((row) => [row.asset_id, row.balance]))
        const balances: Record<string, bigint> = {}
        for (const asset of catalog.assets) {
          if (asset.networkKey === networkKey) balances[asset.assetId] = set.get(asset.assetId) ?? hotWalletBalanceDefault
        }
        return balances
      })

    const configure = Effect.fn("SimulatedChain.configure")(function*(
      networkKey: string,
      settings: SimulatedChainSettings
    ) {
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* lockNetwork(networkKey)
        yield* sql`INSERT INTO devnet_networks (network_key) VALUES (${networkKey}) ON CONFLICT DO NOTHING`
        if (settings.broadcastFails !== undefined) {
          yield* sql`UPDATE devnet_networks SET broadcast_fails = ${settings.broadcastFails} WHERE network_key = ${networkKey}`
        }
        if (settings.networkFee !== undefined) {
          yield* sql`UPDATE devnet_networks SET network_fee = ${settings.networkFee.toString()} WHERE network_key = ${networkKey}`
        }
        for (const [assetId, balance] of Object.entries(settings.hotWalletBalance ?? {})) {
          yield* sql`
            INSERT INTO devnet_hot_wallet_balances (network_key, asset_id, balance)
            VALUES (${networkKey}, ${assetId}, ${balance.toString()})
            ON CONFLICT (network_key, asset_id) DO UPDATE SET balance = EXCLUDED.balance`
        }
      })).pipe(Effect.orDie)
      return yield* state(networkKey)
    })

    return { networkSettings, hotWalletBalances, state, configure }
  })

export type DevnetSettings = Effect.Success<ReturnType<typeof makeDevnetSettings>>
