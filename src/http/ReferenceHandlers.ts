/** Handlers of the reference group (spec 4.1). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { FeeFloors } from "../catalog/FeeFloors.ts"
import { Switches } from "../catalog/Switches.ts"
import { assetObject, listedAssets, networkObject, tenantNetworks } from "../catalog/TenantCatalog.ts"
import { validateAddress } from "../chains/AddressValidation.ts"
import { AssetNotSupported, InternalDestinationNotAllowed } from "../domain/ApiError.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { WalletRepository } from "../wallets/WalletRepository.ts"
import { currentTenant } from "./CurrentTenant.ts"

export const ReferenceHandlers = HttpApiBuilder.group(Api, "reference", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const platformAddresses = yield* PlatformAddresses
    const wallets = yield* WalletRepository
    const switches = yield* Switches
    const feeFloors = yield* FeeFloors
    return handlers
      .handle("networks", () => Effect.map(currentTenant, (tenant) => tenantNetworks(catalog, tenant).map(networkObject)))
      .handle("supportedAssets", () =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          // The operator's switches as stored now (operator-interface.md, "Switches").
          const view = yield* switches.view
          const listed = listedAssets(catalog, tenant)
          // Fee rule 3: the current dynamic floors, the same ones estimate_fee and a withdrawal use.
          const floors = yield* feeFloors.floors(listed)
          return listed.map((asset) => assetObject(catalog, tenant, asset, floors(asset), view))
        }))
      .handle("validateAddress", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const asset = listedAssets(catalog, tenant).find((candidate) => candidate.assetId === params.assetId)
          if (asset === undefined) return yield* new AssetNotSupported({ message: `unknown assetId ${params.assetId}` })
          const network = catalog.network(asset.networkKey)!
          const result = validateAddress({
            family: network.chainFamily,
            btcNetwork: network.btcNetwork ?? undefined,
            address: params.address
          })
          if (!result.isValid) return { isValid: false, isInternal: false }
          if (yield* platformAddresses.isPlatformAddress(network.networkKey, result.normalized)) {
            return yield* new InternalDestinationNotAllowed({ message: "destination is a platform operating address" })
          }
          const owner = yield* wallets.findByAddress(tenant.id, network.networkKey, result.normalized)
          return { isValid: true, normalized: result.normalized, isInternal: owner !== undefined }
        }))
  }))
