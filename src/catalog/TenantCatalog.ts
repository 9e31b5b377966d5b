/**
 * The catalog as one tenant sees it (spec 4.1): only networks that are enabled and enabled for the tenant; only
 * assets on those networks, not DISABLED and not hidden by the tenant; fees as the tenant's settings make them.
 */
import type { AssetObject, NetworkObject } from "../api/ReferenceApi.ts"
import type { Tenant } from "../tenants/Tenants.ts"
import type { Catalog, CatalogAsset, CatalogNetwork } from "./Catalog.ts"
import { effectiveDepositFee, effectiveWithdrawFee } from "./Fees.ts"
import { catalogOnlyView, type SwitchView } from "./Switches.ts"

export const tenantNetworks = (catalog: Catalog["Service"], tenant: Tenant): ReadonlyArray<CatalogNetwork> => {
  const allowed = new Set(tenant.networks)
  return catalog.networks.filter((network) => network.enabled && allowed.has(network.networkKey))
}

/** The network if the tenant may use it, else undefined (NETWORK_DISABLED at the call site). */
export const tenantNetwork = (catalog: Catalog["Service"], tenant: Tenant, networkKey: string) => {
  const network = catalog.network(networkKey)
  return network !== undefined && network.enabled && tenant.networks.includes(networkKey) ? network : undefined
}

export const networkObject = (network: CatalogNetwork): NetworkObject => ({
  networkKey: network.networkKey,
  chainFamily: network.chainFamily,
  displayName: network.displayName,
  isTestnet: network.isTestnet,
  enabled: true
})

export const listedAssets = (catalog: Catalog["Service"], tenant: Tenant): ReadonlyArray<CatalogAsset> => {
  const networks = new Set(tenantNetworks(catalog, tenant).map((network) => network.networkKey))
  const hidden = new Set(tenant.settings.hiddenAssets ?? [])
  return catalog.assets.filter((asset) =>
    networks.has(asset.networkKey) && asset.status !== "DISABLED" && !hidden.has(asset.assetId)
  )
}

/**
 * The asset as /v1 shows it; status and switches as `switches` says they are now (operator switches, chain client),
 * fees as the tenant's settings make them (the operator interface passes no settings: platform defaults).
 */
export const assetObject = (
  catalog: Catalog["Service"],
  tenant: Pick<Tenant, "settings">,
  asset: CatalogAsset,
  dynamicFloors: { readonly withdraw: bigint; readonly deposit: bigint },
  switches: SwitchView = catalogOnlyView
): AssetObject => {
  const network = catalog.network(asset.networkKey)!
  const assetState = switches.asset(asset)
  const networkState = switches.network(network)
  return {
    assetId: asset.assetId,
    networkKey: asset.networkKey,
    chainFamily: network.chainFamily,
    kind: asset.kind,
    contract: asset.contract,
    tokenProgram: asset.tokenProgram,
    symbol: asset.symbol,
    name: asset.name,
    decimals: asset.decimals,
    status: assetState.status === "DEPOSIT_PAUSED" ? "DEPOSIT_PAUSED" : "ENABLED",
    withdrawEnabled: assetState.withdrawEnabled,
    networkWithdrawEnabled: networkState.withdrawEnabled,
    networkDepositEnabled: networkState.depositEnabled,
    minDeposit: asset.minDeposit.toString(),
    minWithdraw: asset.minWithdraw.toString(),
    withdrawFeeFloor: asset.withdrawFeeFloor.toString(),
    depositFeeFloor: asset.depositFeeFloor.toString(),
    singleLimitCap: asset.singleLimitCap?.toString() ?? null,
    dailyLimitCap: asset.dailyLimitCap?.toString() ?? null,
    iconUrl: asset.iconUrl,
    depositFeeRaw: effectiveDepositFee(asset, tenant.settings, dynamicFloors.deposit).toString(),
    withdrawFeeRaw: effectiveWithdrawFee(asset, tenant.settings, dynamicFloors.withdraw).toString()
  }
}
