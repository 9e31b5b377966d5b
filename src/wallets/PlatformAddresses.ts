/**
 * The platform's operating addresses (decisions.md "Operating wallets, sweeps, gas and fee floors"): per network a
 * platform HOT and SWEEP, and per tenant and network a GAS wallet (chains/Derivation.ts: T = 0, U = 2, W = the
 * tenant's index). Tenants can never send to any of them (422 INTERNAL_DESTINATION_NOT_ALLOWED). With the signer
 * disabled there are none to derive.
 *
 * Tenants are created while the service runs (in any process), so the GAS wallets cannot be a start-up list: each
 * question first derives the wallets of tenants created since the last one (one indexed query, usually empty).
 * Derivations never change, so what was derived is kept for the life of the process (a few entries per tenant).
 */
import { Context, Effect, Layer, Schema, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import type { BtcNetwork } from "../chains/ChainFamily.ts"
import type { PlatformRole } from "../chains/Derivation.ts"
import { Catalog, type CatalogNetwork } from "../catalog/Catalog.ts"
import { decodeRows, Int4, Text } from "../db/RowSchemas.ts"
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

const key = (networkKey: string, address: string) => `${networkKey}\u0000${address}`

export class PlatformAddresses extends Context.Service<PlatformAddresses, {
  /** HOT and SWEEP of every network, then every tenant's GAS wallets (tenants in creation order). */
  readonly list: Effect.Effect<ReadonlyArray<PlatformAddress>>
  /** `address` in its normalized form (as address validation returns it). */
  readonly isPlatformAddress: (networkKey: string, address: string) => Effect.Effect<boolean>
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

      // GAS wallets of the tenants seen so far, in tenant order; `seenSeq` is the highest tenant index derived.
      const gasWallets: Array<GasWallet> = []
      const gasByTenant = new Map<string, Map<string, GasWallet>>()
      const gasIndex = new Set<string>()
      let seenSeq = 0
      const refreshLock = yield* Semaphore.make(1)
      /** Derives the GAS wallets of tenants after `seenSeq`, in order; under the lock, so each is derived once. */
      const deriveNew = (fresh: ReadonlyArray<{ readonly id: string; readonly seq: number }>) =>
        refreshLock.withPermit(Effect.gen(function*() {
          for (const tenant of fresh) {
            // Another caller's refresh may have derived it while this one waited for the lock.
            if (tenant.seq <= seenSeq) continue
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
            seenSeq = tenant.seq
          }
        }))
      /**
       * The query runs outside the lock: it is almost always empty, and behind one lock every withdrawal's quote
       * waited for the others' queries in turn (16 withdrawals in flight: 370 ms a quote, measured 2026-11-26).
       * Each caller still sees every tenant committed before its own query.
       */
      const refreshGas = Effect.gen(function*() {
        if ((yield* signer.status()) !== "ACTIVE") return
        const fresh = yield* sql`SELECT id, seq FROM tenants WHERE seq > ${seenSeq} ORDER BY seq`
          .pipe(Effect.orDie, Effect.flatMap(newTenantRows))
        if (fresh.length > 0) yield* deriveNew(fresh)
      })

      return PlatformAddresses.of({
        list: Effect.gen(function*() {
          const { list } = yield* derived
          yield* refreshGas
          return [
            ...list,
            ...gasWallets.map((wallet): PlatformAddress => ({
              networkKey: wallet.networkKey,
              address: wallet.address,
              role: "GAS",
              tenantId: wallet.tenantId
            }))
          ]
        }),
        isPlatformAddress: (networkKey, address) =>
          Effect.gen(function*() {
            const { index } = yield* derived
            if (index.has(key(networkKey, address))) return true
            yield* refreshGas
            return gasIndex.has(key(networkKey, address))
          }),
        operating: (networkKey, role) =>
          Effect.map(derived, ({ list }) =>
            list.find((entry) => entry.networkKey === networkKey && entry.role === role)?.address),
        gasWallet: (tenantId, networkKey) =>
          Effect.gen(function*() {
            if (!gasByTenant.has(tenantId)) yield* refreshGas
            return gasByTenant.get(tenantId)?.get(networkKey)
          })
      })
    })
  )
}
