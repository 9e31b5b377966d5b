/**
 * Provisioning a wallet: derive its address on every network of its family from the signer, register the
 * addresses with the watch registry (`wallet_addresses`, which the chain watchers read), and activate the wallet
 * with its WALLET_CREATED event, all in one transaction. For a wallet already provisioned it registers only the
 * networks added to the catalog since. Idempotent: inserts skip registered rows and the activation is a
 * conditional UPDATE, so a second concurrent run changes nothing.
 */
import { Clock, Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { type BtcNetwork, ChainFamily } from "../chains/ChainFamily.ts"
import { Catalog, type CatalogNetwork } from "../catalog/Catalog.ts"
import { decodeFirstRow, decodeRows, Int4, Text } from "../db/RowSchemas.ts"
import type { SignerUnavailable } from "../domain/ApiError.ts"
import { Outbox } from "../outbox/Outbox.ts"
import { Signer } from "../signer/Signer.ts"

/** Signer retries back off exponentially from this and stay at `signerRetryDelayMaxMillis`. */
export const signerRetryDelayMinMillis = 200
export const signerRetryDelayMaxMillis = 30_000

/** The derivation key of a network: all EVM networks share one address, BTC differs by address network. */
const targetKey = (network: CatalogNetwork) => `${network.chainFamily}:${network.btcNetwork ?? ""}`

/** Networks a wallet of `family` receives on: every enabled catalog network of the family. */
export const familyNetworks = (catalog: Catalog["Service"], family: string) =>
  catalog.networks.filter((network) => network.chainFamily === family && network.enabled)

/** REGISTERED: a provisioned wallet got the addresses of networks added to the catalog since. */
export type ProvisionOutcome = "ACTIVATED" | "REGISTERED" | "ALREADY_PROVISIONED" | "MISSING"

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const walletToProvision = decodeFirstRow(
  Schema.Struct({ tenant_id: Text, chain_family: ChainFamily, seq: Int4, status: Text, tenant_seq: Int4, user_seq: Int4 }),
  "WalletProvisioner.provisionOnce (wallet)"
)
const registeredNetworks = decodeRows(Schema.Struct({ network_key: Text }), "WalletProvisioner.provisionOnce (registered)")

export class WalletProvisioner extends Context.Service<WalletProvisioner, {
  /** Runs until the wallet is provisioned, retrying an unavailable signer with backoff. */
  readonly provision: (walletId: string) => Effect.Effect<ProvisionOutcome>
  /** One attempt: fails with SignerUnavailable instead of retrying. */
  readonly provisionOnce: (walletId: string) => Effect.Effect<ProvisionOutcome, SignerUnavailable>
}>()("coffer/WalletProvisioner") {
  static readonly layer = Layer.effect(
    WalletProvisioner,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const signer = yield* Signer
      const catalog = yield* Catalog
      const outbox = yield* Outbox

      const provisionOnce = Effect.fn("WalletProvisioner.provisionOnce")(function*(walletId: string) {
        const wallet = yield* sql`
          SELECT w.tenant_id, w.chain_family, w.seq, w.status, t.seq AS tenant_seq, u.seq AS user_seq
          FROM wallets w JOIN tenants t ON t.id = w.tenant_id JOIN users u ON u.id = w.user_id
          WHERE w.id = ${walletId}`.pipe(Effect.orDie, Effect.flatMap(walletToProvision))
        if (wallet === undefined) return "MISSING" as const
        // Closed wallets receive nothing; every other state keeps its addresses registered.
        if (wallet.status === "CLOSED") return "ALREADY_PROVISIONED" as const

        const networks = familyNetworks(catalog, wallet.chain_family)
        if (networks.length === 0) {
          return yield* Effect.die(new Error(`no enabled network for family ${wallet.chain_family}`))
        }
        const registered = new Set(
          (yield* sql`
            SELECT network_key FROM wallet_addresses WHERE wallet_id = ${walletId}`.pipe(
            Effect.orDie,
            Effect.flatMap(registeredNetworks)
          ))
            .map((row) => row.network_key)
        )
        // A provisioned wallet only needs the networks added to the catalog after it was provisioned.
        const needed = wallet.status === "PROVISIONING"
          ? networks
          : networks.filter((network) => !registered.has(network.networkKey))
        if (wallet.status !== "PROVISIONING" && needed.length === 0) return "ALREADY_PROVISIONED" as const

        const derived = new Map<string, { address: string; path: string }>()
        for (const network of [networks[0]!, ...needed]) {
          const key = targetKey(network)
          if (derived.has(key)) continue
          derived.set(key, yield* signer.deriveAddress({
            family: wallet.chain_family,
            btcNetwork: (network.btcNetwork ?? undefined) as BtcNetwork | undefined,
            tenantIndex: wallet.tenant_seq,
            userIndex: wallet.user_seq,
            walletIndex: wallet.seq - 1
          }))
        }
        // The wallet's own address is that of its family's first network in catalog order.
        const primary = derived.get(targetKey(networks[0]!))!
        const now = new Date(yield* Clock.currentTimeMillis)

        return yield* sql.withTransaction(Effect.gen(function*() {
          for (const network of needed) {
            const { address } = derived.get(targetKey(network))!
            yield* sql`
              INSERT INTO wallet_addresses (wallet_id, tenant_id, network_key, address, watch_status, created_at)
              VALUES (${walletId}, ${wallet.tenant_id}, ${network.networkKey}, ${address}, 'ACTIVE', ${now})
              ON CONFLICT (wallet_id, network_key) DO NOTHING`
          }
          const activated = yield* sql`
            UPDATE wallets SET status = 'ACTIVE', address = ${primary.address}, derivation_path = ${primary.path},
              updated_at = ${now}
            WHERE id = ${walletId} AND status = 'PROVISIONING'
            RETURNING id`
          if (activated.length === 0) return wallet.status === "PROVISIONING" ? "ALREADY_PROVISIONED" as const : "REGISTERED" as const
          yield* outbox.record({
            tenantId: wallet.tenant_id,
            type: "WALLET_CREATED",
            subjectId: walletId,
            dedupeKey: "created",
            data: { walletId, chainFamily: wallet.chain_family, address: primary.address }
          })
          return "ACTIVATED" as const
        })).pipe(
          Effect.orDie
        )
      })

      const retrySchedule = Schedule.exponential(signerRetryDelayMinMillis).pipe(
        Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.millis(signerRetryDelayMaxMillis))))
      )

      const provision = Effect.fn("WalletProvisioner.provision")(function*(walletId: string) {
        return yield* provisionOnce(walletId).pipe(
          Effect.tapError(() => Effect.logWarning(`signer unavailable while provisioning wallet ${walletId}; retrying`)),
          Effect.retry(retrySchedule),
          Effect.orDie
        )
      })

      return WalletProvisioner.of({ provision, provisionOnce })
    })
  )
}
