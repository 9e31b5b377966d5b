/**
 * The platform's operating addresses (HOT, SWEEP, GAS per network), derived from the signer at start. Tenants can
 * never send to them (422 INTERNAL_DESTINATION_NOT_ALLOWED). With the signer disabled there are none to derive.
 */
import { Context, Effect, Layer } from "effect"
import type { BtcNetwork } from "../chains/ChainFamily.ts"
import { PlatformRole } from "../chains/Derivation.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { Signer } from "../signer/Signer.ts"

export interface PlatformAddress {
  readonly networkKey: string
  readonly address: string
  readonly role: PlatformRole
}

export class PlatformAddresses extends Context.Service<PlatformAddresses, {
  readonly list: Effect.Effect<ReadonlyArray<PlatformAddress>>
  /** `address` in its normalized form (as address validation returns it). */
  readonly isPlatformAddress: (networkKey: string, address: string) => Effect.Effect<boolean>
}>()("coffer/PlatformAddresses") {
  /**
   * Derived once, in the background from start (a few hundred ms of key derivation must not delay readiness), and
   * awaited by the first caller that needs them before they are ready.
   */
  static readonly layer = Layer.effect(
    PlatformAddresses,
    Effect.gen(function*() {
      const signer = yield* Signer
      const catalog = yield* Catalog
      const derive = Effect.gen(function*() {
        const list: Array<PlatformAddress> = []
        if ((yield* signer.status()) === "ACTIVE") {
          for (const network of catalog.networks) {
            for (const role of PlatformRole) {
              const derived = yield* signer.platformAddress({
                family: network.chainFamily,
                btcNetwork: (network.btcNetwork ?? undefined) as BtcNetwork | undefined,
                role
              }).pipe(Effect.orDie)
              list.push({ networkKey: network.networkKey, address: derived.address, role })
            }
          }
        }
        const index = new Set(list.map((entry) => `${entry.networkKey}\u0000${entry.address}`))
        return { list, index }
      })
      const derived = yield* Effect.cached(derive)
      yield* Effect.forkScoped(derived)
      return PlatformAddresses.of({
        list: Effect.map(derived, ({ list }) => list),
        isPlatformAddress: (networkKey, address) =>
          Effect.map(derived, ({ index }) => index.has(`${networkKey}\u0000${address}`))
      })
    })
  )
}
