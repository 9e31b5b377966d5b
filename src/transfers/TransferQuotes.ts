/**
 * What sending funds out of a wallet would cost, and whether it is allowed (spec 4.4 `estimate_fee`, section 2 "Fee
 * computation rules", section 8 limits, decisions.md "Single limit", "Daily limit", "Which transfers limits apply
 * to"). The same rules decide the settlement and the fee of `POST /v1/transactions` (a later stage), which re-runs
 * them at submission: a quote freezes nothing and creates nothing.
 *
 * Order of checks: amount, payer wallet, asset, asset and wallet family, network of the tenant, destination address,
 * platform address, then per settlement: the same wallet (off-chain) or, on-chain, what the node holds at a SOL
 * address, the asset's withdrawal switches and minimum, then the single and daily limits.
 *
 * SOL recipients must be wallet addresses (spec 4.1; chains/sol/SolWalletAddress.ts): the static part is checked with
 * the address, the node's part only for on-chain withdrawals (an internal transfer never waits on a node). A node
 * that cannot answer is 503 `PROVIDER_UNAVAILABLE` (retryable): unlike the fee, which falls back to the last known
 * cost when the node is down (FeeFloors.ts), a recipient that was not checked must not pass (decisions.md).
 */
import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog, type CatalogAsset } from "../catalog/Catalog.ts"
import { FeeFloors } from "../catalog/FeeFloors.ts"
import { effectiveWithdrawFee } from "../catalog/Fees.ts"
import type { PriceView } from "../catalog/PriceFeed.ts"
import { Switches, type SwitchView } from "../catalog/Switches.ts"
import { tenantNetwork } from "../catalog/TenantCatalog.ts"
import { validateAddress } from "../chains/AddressValidation.ts"
import { ChainClients } from "../chains/ChainClient.ts"
import { isSolanaWalletAddress, solNonWalletAddresses } from "../chains/sol/SolWalletAddress.ts"
import {
  AssetDisabled,
  AssetMismatch,
  AssetNotSupported,
  BadRequest,
  BelowMinWithdrawal,
  InternalDestinationNotAllowed,
  InvalidAddress,
  LimitExceeded,
  NetworkDisabled,
  NotFound,
  ProviderUnavailable,
  SameWalletTransfer
} from "../domain/ApiError.ts"
import type { Tenant } from "../tenants/Tenants.ts"
import type { TenantSettings } from "../tenants/TenantSettings.ts"
import { type Wallet, WalletRepository } from "../wallets/WalletRepository.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { dailyLimitExceededMessage, spentToday } from "./DailyLimit.ts"

const nodeCannotCheckMessage = "the chain node cannot check the destination address; retry later"

/** How long a quote is good for (section 8: "about 2 minutes"). */
export const quoteValidityMillis = 120_000

export interface QuoteRequest {
  readonly assetId: string
  readonly sourceWalletId: string
  readonly amount: bigint
  readonly destination: string
  /**
   * What a submission has already read (Transfers.ts): the payer's wallet, and the recipient wallet a WALLET or
   * END_USER destination named with its address on the asset's network. The quote then neither reads them again
   * nor validates an address the service itself stored; wallet_addresses is unique per (network, address), so the
   * recipient is the wallet `findByAddress` would find.
   */
  readonly known?: {
    readonly source: Wallet
    readonly recipient?: { readonly wallet: Wallet; readonly networkKey: string; readonly address: string } | undefined
    /**
     * What counts against the payer's daily limit of the asset today (DailyLimit.ts `spentToday`), read with the
     * payer: the quote's check is the early one, the binding one is the hold's.
     */
    readonly spentToday?: bigint | undefined
    /**
     * For a destination given as an address, what the quote would read about it, read with the payer in one
     * statement (transfers/PayerRead.ts). Used only when its network and address are the quote's own.
     */
    readonly byAddress?: ReadByAddress | undefined
  } | undefined
}

/**
 * What a quote reads about a destination given as an address, read by the caller (db/ReadPart.ts): the tenant's wallet
 * at `address` on `networkKey` (none: undefined), the tenants' count for the GAS wallets, the switches and the prices.
 */
export interface ReadByAddress {
  readonly networkKey: string
  readonly address: string
  readonly wallet: Wallet | undefined
  readonly tenantCount: number
  readonly switches: SwitchView
  readonly prices: PriceView
}

export interface Quote {
  readonly asset: CatalogAsset
  readonly source: Wallet
  readonly amount: bigint
  readonly fee: bigint
  /** The normalized destination address. */
  readonly destination: string
  /** The tenant's wallet that owns `destination` on the asset's network, when there is one (off-chain). */
  readonly recipient: Wallet | undefined
  /**
   * The daily limit this movement counts against (decisions.md "Daily limit"), or undefined when none applies (no
   * limit, or a transfer between one user's own wallets). The submission checks it again, atomically (DailyLimit.ts).
   */
  readonly dailyLimit: bigint | undefined
  readonly settlement: "ON_CHAIN" | "OFF_CHAIN"
  readonly validUntil: Date
}

export type QuoteError =
  | BadRequest
  | NotFound
  | AssetNotSupported
  | AssetMismatch
  | NetworkDisabled
  | InvalidAddress
  | InternalDestinationNotAllowed
  | SameWalletTransfer
  | AssetDisabled
  | BelowMinWithdrawal
  | LimitExceeded
  | ProviderUnavailable

/** The tenant's limits for an asset: its own when it set any (explicit null = unlimited), else the platform's. */
export const limitsFor = (asset: CatalogAsset, settings: TenantSettings) => {
  const own = settings.limits?.[asset.assetId]
  return own === undefined ? { single: asset.singleLimitCap, daily: asset.dailyLimitCap } : own
}

export class TransferQuotes extends Context.Service<TransferQuotes, {
  readonly quote: (tenant: Tenant, request: QuoteRequest) => Effect.Effect<Quote, QuoteError>
}>()("coffer/TransferQuotes") {
  static readonly layer = Layer.effect(
    TransferQuotes,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const wallets = yield* WalletRepository
      const platformAddresses = yield* PlatformAddresses
      const switches = yield* Switches
      const feeFloors = yield* FeeFloors
      const clients = yield* ChainClients
      const solNonWallets = solNonWalletAddresses(catalog)
      /** One message for every refused address: clients branch on the code (section 7), not on which check refused. */
      const invalidAddress = new InvalidAddress({ message: "invalid address" })

      const quote = Effect.fn("TransferQuotes.quote")(function*(tenant: Tenant, request: QuoteRequest) {
        if (request.amount <= 0n) return yield* new BadRequest({ message: "amount must be positive" })
        const source = request.known?.source.id === request.sourceWalletId
          ? request.known.source
          : yield* wallets.find(tenant.id, request.sourceWalletId)
        if (source === undefined) return yield* new NotFound({ message: "wallet not found" })
        const asset = catalog.asset(request.assetId)
        if (asset === undefined) return yield* new AssetNotSupported({ message: `unknown assetId ${request.assetId}` })
        const assetNetwork = catalog.network(asset.networkKey)!
        if (assetNetwork.chainFamily !== source.chainFamily) {
          return yield* new AssetMismatch({ message: "asset is not in the chain family of the wallet" })
        }
        const network = tenantNetwork(catalog, tenant, asset.networkKey)
        if (network === undefined) return yield* new NetworkDisabled({ message: `network ${asset.networkKey} is not enabled` })

        const knownRecipient = request.known?.recipient
        const stored = knownRecipient !== undefined && knownRecipient.networkKey === network.networkKey &&
            knownRecipient.address === request.destination
          ? knownRecipient.wallet
          : undefined
        let destination = request.destination
        if (stored === undefined) {
          const checked = validateAddress({
            family: network.chainFamily,
            btcNetwork: network.btcNetwork ?? undefined,
            address: request.destination
          })
          // Funds sent to a SOL address that is no wallet (a program, a mint, a token account) cannot be moved again.
          const solNonWallet = network.chainFamily === "SOL" && checked.isValid &&
            !isSolanaWalletAddress(checked.normalized, solNonWallets)
          if (!checked.isValid || solNonWallet) {
            return yield* invalidAddress
          }
          destination = checked.normalized
        }
        const read = request.known?.byAddress
        const prefetched = read !== undefined && read.networkKey === network.networkKey && read.address === destination
          ? read
          : undefined
        // A wallet address the service stored is a tenant wallet's, derived under a tenant index of 1 or more, and
        // operating addresses are derived under index 0 (chains/Derivation.ts): only an address from the request can
        // be one. Skipping the check for stored ones saves the tenants query it runs to see new GAS wallets.
        if (
          stored === undefined &&
          (yield* platformAddresses.isPlatformAddress(network.networkKey, destination, prefetched?.tenantCount))
        ) {
          return yield* new InternalDestinationNotAllowed({ message: "destination is a platform operating address" })
        }

        const recipient = stored ??
          (prefetched !== undefined
            ? prefetched.wallet
            : yield* wallets.findByAddress(tenant.id, network.networkKey, destination))
        let fee: bigint
        let limited: boolean
        if (recipient !== undefined) {
          if (recipient.id === source.id) {
            return yield* new SameWalletTransfer({ message: "recipient is the payer wallet" })
          }
          // Fee rule 4: the tenant's internal transfer fee across users; between one user's wallets, free.
          const crossUser = recipient.userId !== source.userId
          fee = crossUser ? tenant.settings.internalTransferFees?.[asset.assetId] ?? 0n : 0n
          limited = crossUser
        } else {
          // Spec 4.1, what only a node can tell (a mint or token account at an ordinary address); SOL node clients
          // alone have it. Here rather than with the address, so an internal transfer never waits on a node.
          const isWalletAddress = clients.get(network.networkKey)?.withdrawals?.isWalletAddress
          if (isWalletAddress !== undefined) {
            const isWallet = yield* isWalletAddress(destination).pipe(
              Effect.catchTag("ChainUnavailable", (error) =>
                Effect.andThen(
                  Effect.logWarning("cannot read the destination account; refusing for now").pipe(
                    Effect.annotateLogs({ networkKey: network.networkKey, reason: error.message })
                  ),
                  Effect.fail(new ProviderUnavailable({ message: nodeCannotCheckMessage }))
                ))
            )
            if (!isWallet) return yield* invalidAddress
          }
          // Catalog, chain client and the operator's switches as stored now (operator-interface.md, "Switches").
          if (!(prefetched?.switches ?? (yield* switches.view)).withdrawable(asset, network)) {
            return yield* new AssetDisabled({ message: `withdrawals of ${asset.assetId} are disabled` })
          }
          if (request.amount < asset.minWithdraw) {
            return yield* new BelowMinWithdrawal({ message: `amount is below the minimum withdrawal ${asset.minWithdraw}` })
          }
          // Fee rules 1 and 3 with the current dynamic floor: what /v1/supported_assets shows as withdrawFeeRaw.
          fee = effectiveWithdrawFee(asset, tenant.settings, (yield* feeFloors.floor(asset, prefetched?.prices)).withdraw)
          limited = true
        }

        const now = yield* Clock.currentTimeMillis
        let dailyLimit: bigint | undefined
        if (limited) {
          const limits = limitsFor(asset, tenant.settings)
          // decisions.md: the single limit is compared with the amount; the fee does not count.
          if (limits.single !== null && request.amount > limits.single) {
            return yield* new LimitExceeded({ message: "single limit exceeded" })
          }
          if (limits.daily !== null) {
            dailyLimit = limits.daily
            const spent = request.known?.spentToday ??
              (yield* spentToday(source.userId, asset.assetId, now).pipe(
                Effect.provideService(SqlClient.SqlClient, sql),
                Effect.orDie
              ))
            const fits = spent + request.amount <= limits.daily
            if (!fits) return yield* new LimitExceeded({ message: dailyLimitExceededMessage })
          }
        }
        return {
          asset,
          source,
          amount: request.amount,
          fee,
          destination,
          recipient,
          dailyLimit,
          settlement: recipient === undefined ? "ON_CHAIN" as const : "OFF_CHAIN" as const,
          validUntil: new Date(now + quoteValidityMillis)
        }
      })

      return TransferQuotes.of({ quote })
    })
  )
}
