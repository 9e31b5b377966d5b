/**
 * The metrics the service updates where things happen (docs/operations.md, "Metrics"): authentication failures by
 * reason, webhook delivery attempts by outcome, and the operating wallets' balances as last read from the chain
 * against their recommended minimum. Gauges of what PostgreSQL holds are not here: they are computed on each scrape
 * (ScrapeGauges.ts).
 */
import { type Context, Effect, Metric } from "effect"

export const authenticationFailuresTotal = Metric.counter("coffer_auth_failures_total", {
  description: "Requests refused by authentication, by listener (tenant, ops) and reason",
  incremental: true
})

/** Why a /v1 request was refused, one value per check of spec section 5 (docs/operations.md lists them). */
export const tenantAuthFailureReasons = [
  "missing_credentials",
  "body_too_large",
  "unknown_key",
  "tenant_suspended",
  "ip_not_allowed",
  "malformed_token",
  "bad_signature",
  "claims_mismatch",
  "subscription_expired",
  "nonce_reused",
  "key_revoked",
  "rate_limited"
] as const
export type AuthFailureReason = (typeof tenantAuthFailureReasons)[number] | "ops_token"

const failureSeries = new Map<string, Metric.Metric<number, unknown>>()

const failureSeriesFor = (reason: AuthFailureReason, listener: "tenant" | "ops") => {
  const key = `${listener} ${reason}`
  let series = failureSeries.get(key)
  if (series === undefined) {
    series = Metric.withAttributes(authenticationFailuresTotal, { listener, reason })
    failureSeries.set(key, series)
  }
  return series
}

/** Counts one refusal and fails with `error`: `return yield* refused("bad_signature", new Unauthorized(...))`. */
export const refused = <E>(reason: AuthFailureReason, error: E, listener: "tenant" | "ops" = "tenant") =>
  Effect.andThen(Metric.update(failureSeriesFor(reason, listener), 1), Effect.fail(error))

export const webhookDeliveriesTotal = Metric.counter("coffer_webhook_deliveries_total", {
  description: "Webhook delivery attempts by outcome: delivered (2xx), retry (failed, another attempt scheduled), dead (the sixth failure)",
  incremental: true
})

export type DeliveryOutcome = "delivered" | "retry" | "dead"

const outcomeSeries: Record<DeliveryOutcome, Metric.Metric<number, unknown>> = {
  delivered: Metric.withAttributes(webhookDeliveriesTotal, { outcome: "delivered" }),
  retry: Metric.withAttributes(webhookDeliveriesTotal, { outcome: "retry" }),
  dead: Metric.withAttributes(webhookDeliveriesTotal, { outcome: "dead" })
}

/** Counts one attempt's outcome from a plain callback (an attempt ends outside any fiber), with its round's context. */
export const countDeliveryUnsafe = (outcome: DeliveryOutcome, context: Context.Context<never>) =>
  outcomeSeries[outcome].updateUnsafe(1, context)

export const operatingWalletBalance = Metric.gauge("coffer_operating_wallet_balance_raw", {
  description: "An operating wallet's balance in the asset's smallest unit, as last read from its node (HOT: by the sweeps; GAS: by the gas check)"
})
export const operatingWalletMinimum = Metric.gauge("coffer_operating_wallet_minimum_raw", {
  description: "What the operating wallet should hold at least, in the smallest unit (HOT: the asset's hot target; GAS: recommendedMinRaw)"
})
export const operatingWalletBelowMinimum = Metric.gauge("coffer_operating_wallet_below_minimum", {
  description: "1 while the operating wallet's last read balance is below its minimum (compared exactly, in bigint), else 0"
})

/**
 * Records an operating wallet's balance as just read. Prometheus values are doubles: the raw figures lose digits past
 * 2^53, so the below-minimum flag is computed here in bigint.
 */
export const observeOperatingWallet = (wallet: {
  readonly role: "HOT" | "GAS"
  readonly networkKey: string
  readonly assetId: string
  readonly tenantId?: string | undefined
  readonly balanceRaw: bigint
  readonly minimumRaw: bigint
}) => {
  const attributes = {
    role: wallet.role,
    network: wallet.networkKey,
    asset: wallet.assetId,
    tenant: wallet.tenantId ?? ""
  }
  return Effect.all([
    Metric.update(Metric.withAttributes(operatingWalletBalance, attributes), Number(wallet.balanceRaw)),
    Metric.update(Metric.withAttributes(operatingWalletMinimum, attributes), Number(wallet.minimumRaw)),
    Metric.update(
      Metric.withAttributes(operatingWalletBelowMinimum, attributes),
      wallet.balanceRaw < wallet.minimumRaw ? 1 : 0
    )
  ], { discard: true })
}

/**
 * Every counter series that can appear, at 0 (MetricsHandlers.ts, once): a series that first appears at 1 hides
 * its first increase from `rate()` and `increase()`, so an alert on the first DEAD delivery would never fire.
 */
export const initializeCounters = Effect.all([
  ...tenantAuthFailureReasons.map((reason) => Metric.update(failureSeriesFor(reason, "tenant"), 0)),
  Metric.update(failureSeriesFor("ops_token", "ops"), 0),
  ...Object.values(outcomeSeries).map((series) => Metric.update(series, 0))
], { discard: true })
