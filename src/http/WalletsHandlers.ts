/** Handlers of the wallets group (spec 4.3). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { pageLimitDefault } from "../api/Common.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { FeeFloors } from "../catalog/FeeFloors.ts"
import { effectiveDepositFee } from "../catalog/Fees.ts"
import { Switches } from "../catalog/Switches.ts"
import { listedAssets, tenantNetworks } from "../catalog/TenantCatalog.ts"
import { NotFound } from "../domain/ApiError.ts"
import { checkIdempotencyKey } from "../idempotency/Idempotency.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { WatchHealth } from "../deposits/WatchHealth.ts"
import { addressItem } from "../wallets/AddressVisibility.ts"
import { WalletRepository } from "../wallets/WalletRepository.ts"
import { Wallets } from "../wallets/Wallets.ts"
import { currentTenant } from "./CurrentTenant.ts"
import { idempotentResponse } from "./IdempotentResponse.ts"
import { walletListItem, walletObject } from "./WalletViews.ts"

export const createWalletEndpoint = "POST /v1/wallets"

export const WalletsHandlers = HttpApiBuilder.group(Api, "wallets", (handlers) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    const repository = yield* WalletRepository
    const catalog = yield* Catalog
    const ledger = yield* Ledger
    const switches = yield* Switches
    const feeFloors = yield* FeeFloors
    const watchHealth = yield* WatchHealth

    const existing = (tenantId: string, walletId: string) =>
      Effect.flatMap(repository.find(tenantId, walletId), (wallet) =>
        wallet === undefined ? Effect.fail(new NotFound({ message: "wallet not found" })) : Effect.succeed(wallet))

    return handlers
      .handle("create", ({ headers, payload }) =>
        Effect.gen(function*() {
          const key = yield* checkIdempotencyKey(headers["idempotency-key"])
          // The answer is stored in the wallet's own transaction (Wallets.create's `recordWallet`).
          return yield* idempotentResponse(
            { endpoint: createWalletEndpoint, key, status: 202, body: walletObject },
            (tenant, record) => wallets.create(tenant, payload, record)
          )
        }), { uninterruptible: true })
      .handle("list", ({ query }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const page = yield* repository.list(tenant.id, {
            customerRefId: query.customerRefId,
            limit: query.limit ?? pageLimitDefault,
            before: query.before
          })
          return { items: page.items.map(walletListItem), nextBefore: page.nextBefore }
        }))
      .handle("get", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          return walletObject(yield* existing(tenant.id, params.id))
        }))
      .handle("assets", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const wallet = yield* existing(tenant.id, params.id)
          const balances = yield* ledger.walletBalances(wallet.id)
          return balances.map((balance) => ({
            assetId: balance.assetId,
            available: balance.available.toString(),
            frozen: balance.frozen.toString(),
            ...(balance.overdrawn > 0n ? { overdrawn: balance.overdrawn.toString() } : {})
          }))
        }))
      .handle("addresses", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const wallet = yield* existing(tenant.id, params.id)
          const registered = yield* repository.addresses(wallet.id)
          const assets = listedAssets(catalog, tenant)
          // Operator switches as stored now: deposits off (or unwatched) hides the network, a FROZEN watch shows;
          // the watcher's health makes a lagging one DEGRADED (deposits/WatchHealth.ts).
          const view = yield* switches.view
          // Fee rule 2 with the current dynamic floor, as /v1/supported_assets shows it and crediting deducts it.
          const floors = yield* feeFloors.floors(
            assets.filter((asset) => catalog.network(asset.networkKey)!.chainFamily === wallet.chainFamily)
          )
          const health = yield* watchHealth.view
          return tenantNetworks(catalog, tenant)
            .filter((network) => network.chainFamily === wallet.chainFamily && view.network(network).depositEnabled)
            .map((network) => {
              const item = addressItem(
                wallet,
                registered.find((candidate) => candidate.networkKey === network.networkKey),
                { ...view.network(network), health: health(network.networkKey) }
              )
              return {
                walletId: wallet.id,
                networkKey: network.networkKey,
                networkName: network.displayName,
                address: item.address,
                watchStatus: item.watchStatus,
                confirmations: network.confirmations,
                supportedAssets: assets.filter((asset) => asset.networkKey === network.networkKey).map((asset) => ({
                  assetId: asset.assetId,
                  symbol: asset.symbol,
                  name: asset.name,
                  decimals: asset.decimals,
                  minDepositRaw: asset.minDeposit.toString(),
                  depositFeeRaw: effectiveDepositFee(asset, tenant.settings, floors(asset).deposit).toString(),
                  depositPaused: view.asset(asset).status === "DEPOSIT_PAUSED",
                  iconUrl: asset.iconUrl
                }))
              }
            })
        }))
  }))
