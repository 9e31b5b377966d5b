/**
 * The platform's operating addresses (decisions.md "Operating wallets, sweeps, gas and fee floors"): per network a
 * platform HOT and SWEEP, and per tenant and network a GAS wallet (chains/Derivation.ts: T = 0, U = 2, W = the
 * tenant's index). Tenants can never send to any of them (422 INTERNAL_DESTINATION_NOT_ALLOWED). With the signer
 * disabled there are none to derive.
 *
 * Tenants are created while the service runs (in any process), so the GAS wallets cannot be a start-up list: each
 * question first derives the wallets of tenants created since the last one (one count of the tenants, usually
 * unchanged). Derivations never change, so what was derived is kept for the life of the process (a few entries per
 * tenant).
 */
import { Context, Effect, Layer, Schema, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import type { BtcNetwork } from "../chains/ChainFamily.ts"
import type { PlatformRole } from "../chains/Derivation.ts"
import { Catalog, type CatalogNetwork } from "../catalog/Catalog.ts"
import { type ReadPart, readAlone } from "../db/ReadPart.ts"
import { decodeRow, decodeRows, Int4, Text } from "../db/RowSchemas.ts"
import { Signer } from "../signer/Signer.ts"

export interface PlatformAddress {
  readonly networkKey: string
  readonly address: string
  readonly role: PlatformRole
  /** The tenant whose GAS wallet it is; null for HOT and SWEEP. */
  readonly tenantId: string | null
}

export interface GasWallet {
  readonly tenantId: string
  /** tenants.seq: the W of the GAS key (signer/TransactionRequest.ts `gasKey`). */
  readonly tenantIndex: number
  readonly networkKey: string
  readonly address: string
}

// Compiled once (db/RowSchemas.ts): rows decoded at this edge, a mismatch a defect naming it.
const newTenantRows = decodeRows(Schema.Struct({ id: Text, seq: Int4 }), "PlatformAddresses.newTenants")
const tenantCountRow = decodeRow(Schema.Struct({ tenant_count: Int4 }), "PlatformAddresses.tenantCount")

const key = (networkKey: string, address: string) => `${networkKey}\u0000${address}`

export class PlatformAddresses extends Context.Service<PlatformAddresses, {
  /** HOT and SWEEP of every network, then every tenant's GAS wallets (tenants in creation order). */
  readonly list: Effect.Effect<ReadonlyArray<PlatformAddress>>
  /**
   * `address` in its normalized form (as address validation returns it). `tenantCount`: the tenants counted by the
   * caller's own statement (`tenantCount` as a part of it), which then saves the count's query.
   */
  readonly isPlatformAddress: (networkKey: string, address: string, tenantCount?: number) => Effect.Effect<boolean>
  /** The count of the tenants, as a part of another statement (db/ReadPart.ts), for `isPlatformAddress`. */
  readonly tenantCount: ReadPart<number>
  /** The network's HOT or SWEEP address; undefined with the signer disabled. */
  readonly operating: (networkKey: string, role: "HOT" | "SWEEP") => Effect.Effect<string | undefined>
  /** The tenant's GAS wallet on the network; undefined for an unknown tenant or with the signer disabled. */
  readonly gasWallet: (tenantId: string, networkKey: string) => Effect.Effect<GasWallet | undefined>
}>()("coffer/PlatformAddresses") {
  /**
   * HOT and SWEEP are derived once, in the background from start (a few hundred ms of key derivation must not delay
   * readiness), and awaited by the first caller that needs them before they are ready.
   */
  static readonly layer = Layer.effect(
    PlatformAddresses,
    Effect.gen(function*() {
      const signer = yield* Signer
      const catalog = yield* Catalog
      const sql = yield* SqlClient.SqlClient
      const target = (network: CatalogNetwork) => ({
        family: network.chainFamily,
        btcNetwork: (network.btcNetwork ?? undefined) as BtcNetwork | undefined
      })
      const derive = Effect.gen(function*() {
        const list: Array<PlatformAddress> = []
        if ((yield* signer.status()) === "ACTIVE") {
          for (const network of catalog.networks) {
            for (const role of ["HOT", "SWEEP"] as const) {
              const derived = yield* signer.platformAddress({ ...target(network), role }).pipe(Effect.orDie)
              list.push({ networkKey: network.networkKey, address: derived.address, role, tenantId: null })
            }
          }
        }
        const index = new Set(list.map((entry) => key(entry.networkKey, entry.address)))
        return { list, index }
      })
      const derived = yield* Effect.cached(derive)
      yield* Effect.forkScoped(derived)

      // GAS wallets of the tenants derived so far (in the order derived), by tenant, and as a set of addresses.
      const gasWallets: Array<GasWallet> = []
      const gasByTenant = new Map<string, Map<string, GasWallet>>()
      const gasIndex = new Set<string>()
      const refreshLock = yield* Semaphore.make(1)
      /** Derives the GAS wallets of these tenants; under the lock, so each tenant is derived once. */
      const deriveNew = (fresh: ReadonlyArray<{ readonly id: string; readonly seq: number }>) =>
        refreshLock.withPermit(Effect.gen(function*() {
          for (const tenant of fresh) {
            // Another caller's refresh may have derived it while this one waited for the lock.
            if (gasByTenant.has(tenant.id)) continue
            const wallets = new Map<string, GasWallet>()
            for (const network of catalog.networks) {
              const gas = yield* signer.platformAddress({ ...target(network), role: "GAS", tenantIndex: tenant.seq })
                .pipe(Effect.orDie)
              const wallet = {
                tenantId: tenant.id,
                tenantIndex: tenant.seq,
                networkKey: network.networkKey,
                address: gas.address
              }
              wallets.set(network.networkKey, wallet)
              gasWallets.push(wallet)
              gasIndex.add(key(network.networkKey, gas.address))
            }
            gasByTenant.set(tenant.id, wallets)
          }
        }))
      /**
       * Tenants are never deleted, so a count equal to the tenants derived means none is new: one cheap query (or
       * the count the caller read in its own statement, `tenantCount`), almost always the whole refresh. Only then are the tenants read and the new ones derived. New ones are found by
       * id, not as "above the highest index derived": two tenants created at once may commit in the other order than
       * their indices, and the one with the lower index would never have been derived.
       *
       * The queries run outside the lock: behind one lock every withdrawal's quote waited for the others' queries in
       * turn (16 withdrawals in flight: 370 ms a quote, measured 2026-11-26). Each caller still sees every tenant
       * committed before its own query.
       */
      const tenantCount: ReadPart<number> = {
        columns: sql`(SELECT count(*)::int FROM tenants) AS tenant_count`,
        decode: (row) => Effect.map(tenantCountRow(row), (counted) => counted.tenant_count)
      }
      const refreshGas = (counted?: number) => Effect.gen(function*() {
        if ((yield* signer.status()) !== "ACTIVE") return
        const count = counted ?? (yield* readAlone(sql, tenantCount))
        if (count === gasByTenant.size) return
        const tenants = yield* sql`SELECT id, seq FROM tenants ORDER BY seq`
          .pipe(Effect.orDie, Effect.flatMap(newTenantRows))
        const fresh = tenants.filter((tenant) => !gasByTenant.has(tenant.id))
        if (fresh.length > 0) yield* deriveNew(fresh)
      })

      return PlatformAddresses.of({
        list: Effect.gen(function*() {
          const { list } = yield* derived
          yield* refreshGas()
          return [
            ...list,
            // In tenant order (as derived, they may not be), each tenant's networks in catalog order.
            ...gasWallets.toSorted((a, b) => a.tenantIndex - b.tenantIndex).map((wallet): PlatformAddress => ({
              networkKey: wallet.networkKey,
              address: wallet.address,
              role: "GAS",
              tenantId: wallet.tenantId
            }))
          ]
        }),
        isPlatformAddress: (networkKey, address, counted) =>
          Effect.gen(function*() {
            const { index } = yield* derived
            if (index.has(key(networkKey, address))) return true
            yield* refreshGas(counted)
            return gasIndex.has(key(networkKey, address))
          }),
        tenantCount,
        operating: (networkKey, role) =>
          Effect.map(derived, ({ list }) =>
            list.find((entry) => entry.networkKey === networkKey && entry.role === role)?.address),
        gasWallet: (tenantId, networkKey) =>
          Effect.gen(function*() {
            if (!gasByTenant.has(tenantId)) yield* refreshGas()
            return gasByTenant.get(tenantId)?.get(networkKey)
          })
      })
    })
  )
}
