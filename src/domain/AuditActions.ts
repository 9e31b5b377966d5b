/**
 * The operator's audit vocabulary (operator-interface.md, "Listing, audit and documents"): what an entry can say
 * was done, and to what kind of thing. Each action names the operator route that does it (docs/operations.md,
 * "Audit trail"); the wire (ops/OpsAuditApi.ts) and the store (ops/OperatorAudit.ts) share these lists.
 */
export const auditActions = [
  "TENANT_CREATED",
  "TENANT_UPDATED",
  "API_KEY_CREATED",
  "API_KEY_REVOKED",
  "USER_TOTP_BOUND",
  "USER_TOTP_UNBOUND",
  "USER_UPDATED",
  "TRANSACTION_APPROVED",
  "TRANSACTION_REJECTED",
  "DEPOSIT_CREDITED",
  "NETWORK_SWITCHED",
  "ASSET_SWITCHED",
  "WALLET_SWITCHED",
  "PRICES_SET",
  "OPENING_BALANCE_RECORDED"
] as const
export type AuditAction = (typeof auditActions)[number]

export const auditTargetTypes = [
  "TENANT",
  "API_KEY",
  "USER",
  "TRANSACTION",
  "NETWORK",
  "ASSET",
  "WALLET",
  "PRICES",
  "ADDRESS"
] as const
export type AuditTargetType = (typeof auditTargetTypes)[number]
