/** Handlers of the operator's switches (operator-interface.md, "Switches"; docs/operations.md). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Catalog } from "../catalog/Catalog.ts"
import { FeeFloors } from "../catalog/FeeFloors.ts"
import { Switches } from "../catalog/Switches.ts"
import { assetObject } from "../catalog/TenantCatalog.ts"
import { BadRequest } from "../domain/ApiError.ts"
import { walletObject } from "../http/WalletViews.ts"
import { Tenants } from "../tenants/Tenants.ts"
import { switchableWalletStatuses, WalletSwitch } from "../wallets/WalletSwitch.ts"
import { queuedWithdrawalsRelease } from "../withdrawals/WithdrawalSupervisor.ts"
import { auditOrigin } from "./AuditOrigin.ts"
import { OperatorAudit } from "./OperatorAudit.ts"
import { OpsApi } from "./OpsApi.ts"

const isSwitchableWalletStatus = (status: string): status is (typeof switchableWalletStatuses)[number] =>
  (switchableWalletStatuses as ReadonlyArray<string>).includes(status)

export const OpsSwitchHandlers = HttpApiBuilder.group(OpsApi, "switches", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* Catalog
    const switches = yield* Switches
    const walletSwitch = yield* WalletSwitch
    const tenants = yield* Tenants
    const feeFloors = yield* FeeFloors
    const audit = yield* OperatorAudit
    // Withdrawals held QUEUED while a switch was off (WithdrawalProcessor) go on now rather than at the next sweep.
    const releaseQueued = yield* queuedWithdrawalsRelease
    return handlers
      .handle("network", ({ params, payload }) =>
        Effect.gen(function*() {
          const state = yield* audit.audited(yield* auditOrigin, switches.setNetwork(params.networkKey, payload), () => ({
            action: "NETWORK_SWITCHED",
            target: { type: "NETWORK", id: params.networkKey },
            tenantId: null,
            change: payload
          }))
          if (payload.withdrawEnabled === true) yield* releaseQueued({ networkKey: params.networkKey })
          return {
            networkKey: params.networkKey,
            depositEnabled: state.depositEnabled,
            withdrawEnabled: state.withdrawEnabled,
            watch: state.watch
          }
        }))
      .handle("asset", ({ params, payload }) =>
        Effect.gen(function*() {
          yield* audit.audited(yield* auditOrigin, switches.setAsset(params.assetId, payload), () => ({
            action: "ASSET_SWITCHED",
            target: { type: "ASSET", id: params.assetId },
            tenantId: null,
            change: payload
          }))
          if (payload.withdrawEnabled === true || payload.status === "ENABLED") {
            yield* releaseQueued({ networkKey: catalog.asset(params.assetId)!.networkKey })
          }
          // As /v1 shows it, with the platform's default fees: the operator is no tenant.
          const asset = catalog.asset(params.assetId)!
          return assetObject(catalog, { settings: {} }, asset, yield* feeFloors.floor(asset), yield* switches.view)
        }))
      .handle("wallet", ({ params, payload }) =>
        Effect.gen(function*() {
          if (!isSwitchableWalletStatus(payload.status)) {
            return yield* new BadRequest({ message: "status must be ACTIVE, HIDDEN or FROZEN" })
          }
          const tenant = yield* tenants.require(params.tenantId)
          const wallet = yield* audit.audited(
            yield* auditOrigin,
            walletSwitch.set(tenant.id, params.walletId, payload.status),
            () => ({
              action: "WALLET_SWITCHED",
              target: { type: "WALLET", id: params.walletId },
              tenantId: tenant.id,
              change: { status: payload.status }
            })
          )
          // Withdrawals the freeze held QUEUED (WithdrawalProcessor) go on now rather than at the next sweep.
          if (payload.status === "ACTIVE") yield* releaseQueued({ walletId: wallet.id })
          return walletObject(wallet)
        }))
  }))
