/** Handlers of the reference group (spec 4.1). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { assetObject, listedAssets, networkObject, tenantNetworks } from "../catalog/TenantCatalog.ts"
import { currentTenant } from "./CurrentTenant.ts"

/** Until the chain watchers record on-chain costs, the dynamic fee floor is zero (spec fee rule 3). */
const noDynamicFloor = { withdraw: 0n, deposit: 0n }

export const ReferenceHandlers = HttpApiBuilder.group(Api, "reference", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    return handlers
      .handle("networks", () => Effect.map(currentTenant, (tenant) => tenantNetworks(catalog, tenant).map(networkObject)))
      .handle("supportedAssets", () =>
        Effect.map(currentTenant, (tenant) =>
          listedAssets(catalog, tenant).map((asset) => assetObject(catalog, tenant, asset, noDynamicFloor))))
  }))
