/** Event types, signature scheme and retry schedule of webhook deliveries (spec section 6). */

export const eventTypes = [
  "TRANSACTION_CREATED",
  "TRANSACTION_STATUS_UPDATED",
  "WALLET_CREATED",
  "DEPOSIT_REVERSED",
  "MANUAL_DEPOSIT_CREDITED",
  "VAULT_GAS_LOW",
  "WEBHOOK_TEST"
] as const
export type EventType = (typeof eventTypes)[number]

export const webhookKeyId = "v1"

/**
 * The spec writes the headers with `Service` where the deployed interface carries the product word; the product is
 * Coffer, so `X-Service-Event-Id` is `X-Coffer-Event-Id` here (docs/decisions.md).
 */
export const webhookHeaders = {
  eventId: "X-Coffer-Event-Id",
  eventType: "X-Coffer-Event-Type",
  timestamp: "X-Coffer-Timestamp",
  signature: "X-Coffer-Signature"
} as const

export const signedMessageDescription = `the ${webhookHeaders.timestamp} value, a period, then the raw body bytes`
export const signatureHeaderFormat = "keyId=v1,sig=<hex>"

/** Delays after a failed attempt; 1 + 5 retries = 6 attempts, then DEAD. */
export const retryScheduleSeconds = [60, 300, 1800, 7200, 43200] as const
export const retryScheduleLabels = ["1m", "5m", "30m", "2h", "12h"] as const
