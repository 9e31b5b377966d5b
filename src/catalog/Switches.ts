/**
 * The operator's switches over networks and assets (operator-interface.md, "Switches"; docs/operations.md), and
 * what a network or an asset allows once catalog, chain client and switch are combined.
 *
 * A switch only narrows: a network takes deposits when the catalog says so, a chain client watches it and its
 * switch is on; it sends withdrawals when the catalog says so, its client can send and its switch is on
 * (decisions.md, "Sending on real networks": no client that can send, no withdrawals). An asset is DEPOSIT_PAUSED
 * when the catalog or the switch says so.
 *
 * Switches are stored in `networks`/`assets` (sql/0010_switches.sql) and read from there on every use (`view`, one
 * query, or `part` inside the caller's own statement), never cached: a change holds in every process from the moment
 * its transaction commits, with no notification that could arrive late or be lost.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { ChainClients } from "../chains/ChainClient.ts"
import { type ReadPart, readAlone } from "../db/ReadPart.ts"
import { decodeRow, decodeSingleRow, Nullable, Text } from "../db/RowSchemas.ts"
import { InvalidState, NotFound } from "../domain/ApiError.ts"
import { Catalog, type CatalogAsset, type CatalogNetwork } from "./Catalog.ts"

export const Watch = ["ACTIVE", "FROZEN"] as const
export type Watch = (typeof Watch)[number]
export const AssetSwitchStatus = ["ENABLED", "DEPOSIT_PAUSED"] as const
export type AssetSwitchStatus = (typeof AssetSwitchStatus)[number]

/** What the operator set on a network (defaults: everything on). */
export interface NetworkSwitch {
  readonly depositEnabled: boolean
  readonly withdrawEnabled: boolean
  readonly watch: Watch
}

/** What the operator set on an asset (defaults: ENABLED, withdrawals on). */
export interface AssetSwitch {
  readonly status: AssetSwitchStatus
  readonly withdrawEnabled: boolean
}

/** A network as it behaves now: catalog, chain client and switch together. */
export interface NetworkState {
  readonly depositEnabled: boolean
  readonly withdrawEnabled: boolean
  readonly watch: Watch
}

/** An asset as it behaves now (its own switches only; `withdrawable` adds the network's). */
export interface AssetState {
  readonly status: CatalogAsset["status"]
  readonly withdrawEnabled: boolean
}

export interface SwitchView {
  readonly network: (network: CatalogNetwork) => NetworkState
  readonly asset: (asset: CatalogAsset) => AssetState
  /**
   * Whether an on-chain withdrawal of the asset may be submitted (spec 4.4 `ASSET_DISABLED`: `status = ENABLED`,
   * `withdrawEnabled` and `networkWithdrawEnabled`).
   */
  readonly withdrawable: (asset: CatalogAsset, network: CatalogNetwork) => boolean
}

/** What a chain client can do for a network: follow it for deposits, send withdrawals on it. */
export interface ClientCapability {
  readonly watches: boolean
  readonly sends: boolean
}

// The stored switches, decoded at this edge (db/RowSchemas.ts); compiled once, a mismatch a defect naming the query.
const NetworkSwitchRow = Schema.Struct({
  depositEnabled: Schema.Boolean,
  withdrawEnabled: Schema.Boolean,
  watch: Schema.Literals(Watch)
})
const AssetSwitchRow = Schema.Struct({ status: Schema.Literals(AssetSwitchStatus), withdrawEnabled: Schema.Boolean })
const switchesRow = decodeRow(
  Schema.Struct({
    switch_networks: Nullable(Schema.Array(Schema.Struct({ key: Text, ...NetworkSwitchRow.fields }))),
    switch_assets: Nullable(Schema.Array(Schema.Struct({ key: Text, ...AssetSwitchRow.fields })))
  }),
  "Switches.view"
)
const lockedNetworkRow = decodeSingleRow(NetworkSwitchRow, "Switches.setNetwork (lock)")
const lockedAssetRow = decodeSingleRow(AssetSwitchRow, "Switches.setAsset (lock)")

const switchOn: NetworkSwitch = { depositEnabled: true, withdrawEnabled: true, watch: "ACTIVE" }
const assetOn: AssetSwitch = { status: "ENABLED", withdrawEnabled: true }

export const makeSwitchView = (input: {
  readonly networks: ReadonlyMap<string, NetworkSwitch>
  readonly assets: ReadonlyMap<string, AssetSwitch>
  readonly capability: (networkKey: string) => ClientCapability
}): SwitchView => {
  const network = (catalogNetwork: CatalogNetwork): NetworkState => {
    const switched = input.networks.get(catalogNetwork.networkKey) ?? switchOn
    const client = input.capability(catalogNetwork.networkKey)
    return {
      depositEnabled: catalogNetwork.depositEnabled && client.watches && switched.depositEnabled,
      withdrawEnabled: catalogNetwork.withdrawEnabled && client.sends && switched.withdrawEnabled,
      watch: switched.watch
    }
  }
  const asset = (catalogAsset: CatalogAsset): AssetState => {
    const switched = input.assets.get(catalogAsset.assetId) ?? assetOn
    return {
      status: catalogAsset.status === "ENABLED" && switched.status === "DEPOSIT_PAUSED" ? "DEPOSIT_PAUSED" : catalogAsset.status,
      withdrawEnabled: catalogAsset.withdrawEnabled && switched.withdrawEnabled
    }
  }
  return {
    network,
    asset,
    withdrawable: (catalogAsset, catalogNetwork) => {
      const state = asset(catalogAsset)
      return state.status === "ENABLED" && state.withdrawEnabled && network(catalogNetwork).withdrawEnabled
    }
  }
}

/** The catalog alone: no switch set, every network watched and able to send (for pure functions and their tests). */
export const catalogOnlyView: SwitchView = makeSwitchView({
  networks: new Map(),
  assets: new Map(),
  capability: () => ({ watches: true, sends: true })
})

export interface NetworkSwitchPatch {
  readonly depositEnabled?: boolean | undefined
  readonly withdrawEnabled?: boolean | undefined
  readonly watch?: Watch | undefined
}

export interface AssetSwitchPatch {
  readonly status?: AssetSwitchStatus | undefined
  readonly withdrawEnabled?: boolean | undefined
}

/** The fields of `patch` that differ from `current`: what a request actually changes, and all the history keeps. */
const changedFields = <T extends object>(current: T, patch: { readonly [K in keyof T]?: T[K] | undefined }): Partial<T> =>
  Object.fromEntries(
    Object.entries(patch).filter(([field, value]) => value !== undefined && value !== current[field as keyof T])
  ) as Partial<T>

export class Switches extends Context.Service<Switches, {
  /** The switches as stored now, combined with catalog and chain clients. One query; never cached. */
  readonly view: Effect.Effect<SwitchView>
  /** `view` as a part of another statement (db/ReadPart.ts). */
  readonly part: ReadPart<SwitchView>
  /** Sets a network's switches; answers the network as it behaves afterwards. */
  readonly setNetwork: (networkKey: string, patch: NetworkSwitchPatch) => Effect.Effect<NetworkState, NotFound | InvalidState>
  /** Sets an asset's switches; answers the asset as it behaves afterwards. */
  readonly setAsset: (assetId: string, patch: AssetSwitchPatch) => Effect.Effect<AssetState, NotFound | InvalidState>
}>()("coffer/Switches") {
  static readonly layer = Layer.effect(
    Switches,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients

      const capability = (networkKey: string): ClientCapability => {
        const client = clients.get(networkKey)
        return { watches: client !== undefined, sends: client?.withdrawals !== undefined }
      }

      // Both tables in one round trip: a few dozen rows, read on each use instead of cached (module comment); as a
      // part, also inside another statement (db/ReadPart.ts).
      const part: ReadPart<SwitchView> = {
        columns: sql`
          (SELECT json_agg(json_build_object('key', network_key, 'depositEnabled', switch_deposit_enabled,
            'withdrawEnabled', switch_withdraw_enabled, 'watch', switch_watch)) FROM networks) AS switch_networks,
          (SELECT json_agg(json_build_object('key', asset_id, 'status', switch_status,
            'withdrawEnabled', switch_withdraw_enabled)) FROM assets) AS switch_assets`,
        decode: (row) =>
          Effect.map(switchesRow(row), (switches) =>
            makeSwitchView({
              networks: new Map((switches.switch_networks ?? []).map((entry) => [entry.key, entry])),
              assets: new Map((switches.switch_assets ?? []).map((entry) => [entry.key, entry])),
              capability
            }))
      }
      const view = readAlone(sql, part).pipe(Effect.withSpan("Switches.view"))

      const recordChange = (target: "NETWORK" | "ASSET", targetId: string, change: object, at: Date) =>
        sql`INSERT INTO switch_changes (target, target_id, change, changed_at)
          VALUES (${target}, ${targetId}, ${JSON.stringify(change)}::jsonb, ${at})`

      const setNetwork = Effect.fn("Switches.setNetwork")(function*(networkKey: string, patch: NetworkSwitchPatch) {
        const network = catalog.network(networkKey)
        if (network === undefined) return yield* new NotFound({ message: "network not found" })
        if (!network.enabled) {
          return yield* new InvalidState({ message: `network ${networkKey} is disabled in the catalog; a switch cannot enable it` })
        }
        const at = new Date(yield* Clock.currentTimeMillis)
        // The row lock orders concurrent changes, so each one's history entry names what it really changed.
        yield* sql.withTransaction(Effect.gen(function*() {
          const current: NetworkSwitch = yield* sql`
            SELECT switch_deposit_enabled AS "depositEnabled", switch_withdraw_enabled AS "withdrawEnabled",
              switch_watch AS watch
            FROM networks WHERE network_key = ${networkKey} FOR UPDATE`.pipe(Effect.flatMap(lockedNetworkRow))
          const change = changedFields(current, patch)
          if (Object.keys(change).length === 0) return
          const next = { ...current, ...change }
          yield* sql`UPDATE networks SET switch_deposit_enabled = ${next.depositEnabled},
              switch_withdraw_enabled = ${next.withdrawEnabled}, switch_watch = ${next.watch}, switched_at = ${at}
            WHERE network_key = ${networkKey}`
          yield* recordChange("NETWORK", networkKey, change, at)
        })).pipe(Effect.orDie)
        return (yield* view).network(network)
      })

      const setAsset = Effect.fn("Switches.setAsset")(function*(assetId: string, patch: AssetSwitchPatch) {
        const asset = catalog.asset(assetId)
        if (asset === undefined) return yield* new NotFound({ message: "asset not found" })
        if (asset.status === "DISABLED") {
          return yield* new InvalidState({ message: `asset ${assetId} is disabled in the catalog; a switch cannot enable it` })
        }
        const at = new Date(yield* Clock.currentTimeMillis)
        yield* sql.withTransaction(Effect.gen(function*() {
          const current: AssetSwitch = yield* sql`
            SELECT switch_status AS status, switch_withdraw_enabled AS "withdrawEnabled"
            FROM assets WHERE asset_id = ${assetId} FOR UPDATE`.pipe(Effect.flatMap(lockedAssetRow))
          const change = changedFields(current, patch)
          if (Object.keys(change).length === 0) return
          const next = { ...current, ...change }
          yield* sql`UPDATE assets SET switch_status = ${next.status}, switch_withdraw_enabled = ${next.withdrawEnabled},
              switched_at = ${at}
            WHERE asset_id = ${assetId}`
          yield* recordChange("ASSET", assetId, change, at)
        })).pipe(Effect.orDie)
        return (yield* view).asset(asset)
      })

      return Switches.of({ view, part, setNetwork, setAsset })
    })
  )
}
