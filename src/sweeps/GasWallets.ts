/**
 * The tenants' GAS wallets (docs/sweeps.md "Gas wallets and VAULT_GAS_LOW"): what each holds against the recommended
 * minimum (the cost of 20 token sweeps at the current fee, or of the tenant's sweeps waiting for gas if more), and
 * VAULT_GAS_LOW when it is below, at most once per 6 hours per tenant and network. On the sweeping networks, and on
 * every network of the simulated chain, which has no sweeps but shows the same figures and alert in development.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { ChainClients } from "../chains/ChainClient.ts"
import { SimulatedChain } from "../chains/simulated/SimulatedChain.ts"
import { decodeFirstRow, decodeRows, Int4, Text } from "../db/RowSchemas.ts"
import { NotFound } from "../domain/ApiError.ts"
import { observeOperatingWallet } from "../observability/ServiceMetrics.ts"
import { Outbox } from "../outbox/Outbox.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { recommendedTokenSweeps } from "./SweepAmounts.ts"
import { type SweepNetwork, sweepNetworks, tokenSweepCost } from "./SweepNetworks.ts"

/** VAULT_GAS_LOW is recorded at most this often per tenant and network (spec section 8). */
export const gasAlertIntervalMillis = 6 * 60 * 60_000

export interface GasFigures {
  readonly networkKey: string
  readonly address: string
  readonly assetId: string
  readonly balanceRaw: bigint
  readonly recommendedMinRaw: bigint
}

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const tenantRows = decodeRows(Schema.Struct({ id: Text }), "GasWallets.checkGas (tenants)")
const countRow = decodeFirstRow(Schema.Struct({ count: Int4 }), "GasWallets.figures (waiting)")

/**
 * The networks whose GAS wallets are shown and checked, in catalog order: the sweeping ones (their node's balances),
 * and every network of the simulated chain (its transfers' balances: an operator funds a GAS wallet there with
 * POST /ops/devnet/{networkKey}/transfers). A real BTC node has neither sweeps nor a balance reading: its GAS wallets
 * (unused, decisions.md) are listed by /ops/platform/addresses only.
 */
const gasNetworks = (
  clients: ChainClients["Service"],
  catalog: Catalog["Service"],
  simulated: SimulatedChain["Service"]
): ReadonlyMap<string, SweepNetwork> => {
  const sweeping = sweepNetworks(clients, catalog)
  const networks = new Map<string, SweepNetwork>()
  for (const networkKey of clients.networkKeys) {
    const real = sweeping.get(networkKey)
    if (real !== undefined) networks.set(networkKey, real)
    if (!clients.isSimulated(networkKey)) continue
    const client = clients.get(networkKey)
    const network = catalog.network(networkKey)
    const chain = client?.withdrawals
    if (client === undefined || network === undefined || chain === undefined) continue
    networks.set(networkKey, {
      network,
      client,
      chain,
      balance: (address, assetId) => simulated.balance(networkKey, address, assetId)
    })
  }
  return networks
}

export class GasWallets extends Context.Service<GasWallets, {
  /** The networks checkGas watches (the sweeping ones and the simulated chain's), for the background loop. */
  readonly networkKeys: ReadonlyArray<string>
  /** VAULT_GAS_LOW for the network's tenants whose GAS wallet is below the recommended minimum. */
  readonly checkGas: (networkKey: string) => Effect.Effect<void>
  /** GET /ops/tenants/{tenantId}/gas: the tenant's GAS wallet on each of those networks. */
  readonly figures: (tenantId: string) => Effect.Effect<ReadonlyArray<GasFigures>, NotFound>
}>()("coffer/GasWallets") {
  static readonly layer = Layer.effect(
    GasWallets,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const platform = yield* PlatformAddresses
      const outbox = yield* Outbox
      const networks = gasNetworks(yield* ChainClients, catalog, yield* SimulatedChain)

      const figuresOn = (context: SweepNetwork, tenantId: string) =>
        Effect.gen(function*() {
          const networkKey = context.network.networkKey
          const wallet = yield* platform.gasWallet(tenantId, networkKey)
          if (wallet === undefined) return undefined
          const balanceRaw = yield* context.balance(wallet.address, context.network.nativeAssetId)
          const perSweep = yield* tokenSweepCost(context, catalog)
          const waiting = yield* sql`
            SELECT count(*)::int AS count FROM sweeps
            WHERE tenant_id = ${tenantId} AND network_key = ${networkKey} AND status = 'WAITING_GAS'`
            .pipe(Effect.orDie, Effect.flatMap(countRow))
          const waitingCount = BigInt(waiting?.count ?? 0)
          const sweepsToCover = waitingCount > recommendedTokenSweeps ? waitingCount : recommendedTokenSweeps
          return {
            networkKey,
            address: wallet.address,
            assetId: context.network.nativeAssetId,
            balanceRaw,
            recommendedMinRaw: sweepsToCover * perSweep
          } satisfies GasFigures
        })

      /** Claims the tenant's 6-hour slot and records the event, in one transaction; whether it was recorded. */
      const alert = (tenantId: string, figures: GasFigures) =>
        Effect.gen(function*() {
          const millis = yield* Clock.currentTimeMillis
          return yield* sql.withTransaction(Effect.gen(function*() {
            const claimed = yield* sql`
              INSERT INTO gas_alerts (tenant_id, network_key, sent_at)
              VALUES (${tenantId}, ${figures.networkKey}, ${new Date(millis)})
              ON CONFLICT (tenant_id, network_key) DO UPDATE SET sent_at = EXCLUDED.sent_at
                WHERE gas_alerts.sent_at <= ${new Date(millis - gasAlertIntervalMillis)}
              RETURNING tenant_id`
            if (claimed.length === 0) return false
            return yield* outbox.record({
              tenantId,
              type: "VAULT_GAS_LOW",
              subjectId: figures.networkKey,
              dedupeKey: String(millis),
              data: {
                networkKey: figures.networkKey,
                address: figures.address,
                assetId: figures.assetId,
                balanceRaw: figures.balanceRaw.toString(),
                recommendedMinRaw: figures.recommendedMinRaw.toString()
              }
            })
          })).pipe(Effect.orDie)
        })

      const checkGasOnce = Effect.fn("GasWallets.checkGas")(function*(networkKey: string) {
        const context = networks.get(networkKey)
        if (context === undefined) return
        // Tenants whose token deposits were swept or wait on this network, or were credited there (the simulated
        // chain never sweeps them; on a real network they are about to be): the ones whose GAS wallet is in use.
        const tenants = yield* sql`
          SELECT tenant_id AS id FROM sweeps
          WHERE network_key = ${networkKey} AND kind = 'SWEEP' AND asset_id <> ${context.network.nativeAssetId}
          UNION
          SELECT tenant_id AS id FROM transactions
          WHERE network_key = ${networkKey} AND kind = 'DEPOSIT' AND status = 'COMPLETED' AND sub_status IS NULL
            AND asset_id <> ${context.network.nativeAssetId}`
          .pipe(Effect.orDie, Effect.flatMap(tenantRows))
        for (const { id: tenantId } of tenants) {
          const figures = yield* figuresOn(context, tenantId)
          if (figures !== undefined) {
            yield* observeOperatingWallet({ role: "GAS", tenantId, minimumRaw: figures.recommendedMinRaw, ...figures })
          }
          if (figures === undefined || figures.balanceRaw >= figures.recommendedMinRaw) continue
          if (yield* alert(tenantId, figures)) {
            yield* Effect.logWarning(
              `tenant ${tenantId}: GAS wallet ${figures.address} on ${networkKey} holds ${figures.balanceRaw}, ` +
                `below ${figures.recommendedMinRaw}`
            )
          }
        }
      })
      const checkGas = (networkKey: string) =>
        checkGasOnce(networkKey).pipe(Effect.catchTag("ChainUnavailable", (error) =>
          Effect.logWarning(`gas check of ${networkKey}: ${error.message}`)))

      const figures = Effect.fn("GasWallets.figures")(function*(tenantId: string) {
        const exists = yield* sql`SELECT id FROM tenants WHERE id = ${tenantId}`.pipe(Effect.orDie)
        if (exists.length === 0) return yield* new NotFound({ message: "tenant not found" })
        const all: Array<GasFigures> = []
        for (const context of networks.values()) {
          // A network whose node does not answer now is left out (and logged), not the whole answer.
          const one = yield* figuresOn(context, tenantId).pipe(
            Effect.catchTag("ChainUnavailable", (error) =>
              Effect.as(Effect.logWarning(`gas figures of ${context.network.networkKey}: ${error.message}`), undefined))
          )
          if (one !== undefined) all.push(one)
        }
        return all as ReadonlyArray<GasFigures>
      })

      return GasWallets.of({ networkKeys: [...networks.keys()], checkGas, figures })
    })
  )
}
