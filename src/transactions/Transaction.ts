/** A transaction as the service holds it (spec section 2, "Transaction object"); amounts are bigint. */
import { Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { Int4, Nullable, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"

export const TransactionKind = ["DEPOSIT", "WITHDRAWAL", "INTERNAL_TRANSFER"] as const
export type TransactionKind = (typeof TransactionKind)[number]

export const TransactionStatus = [
  "SUBMITTED",
  "PENDING_AUTHORIZATION",
  "QUEUED",
  "PENDING_SIGNATURE",
  "CONFIRMING",
  "COMPLETED",
  "FAILED",
  "REJECTED",
  "CANCELLED",
  "REVERSED"
] as const
export type TransactionStatus = (typeof TransactionStatus)[number]

export const SubStatus = [
  "BELOW_MIN_DEPOSIT",
  "MANUAL_REVIEW",
  "DROPPED",
  "INSUFFICIENT_FUNDS_PLATFORM",
  "CANCELLED_BY_USER",
  "BLOCKED_BY_POLICY",
  "REJECTED_BY_OPERATOR",
  "SIGNING_FAILED",
  "BROADCAST_FAILED",
  "REVERTED_ON_CHAIN"
] as const
export type SubStatus = (typeof SubStatus)[number]

export interface Party {
  readonly walletId: string | null
  readonly address: string | null
  readonly customerRefId: string | null
  readonly uid: string | null
}

export interface Transaction {
  readonly id: string
  readonly tenantId: string
  readonly kind: TransactionKind
  readonly settlement: "ON_CHAIN" | "OFF_CHAIN"
  readonly status: TransactionStatus
  readonly subStatus: SubStatus | null
  readonly assetId: string
  readonly networkKey: string
  readonly amount: bigint
  readonly fee: bigint | null
  readonly networkFee: bigint | null
  readonly networkFeeAssetId: string | null
  readonly source: Party
  readonly destination: Party
  readonly txHash: string | null
  readonly outputIndex: number | null
  readonly blockHeight: bigint | null
  readonly blockHash: string | null
  readonly externalTxId: string | null
  readonly note: string | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

/** The columns of `transactionSelect`, decoded (db/RowSchemas.ts): amounts as bigint, times as Date. */
export const TransactionRow = Schema.Struct({
  id: Text,
  tenant_id: Text,
  kind: Schema.Literals(TransactionKind),
  settlement: Schema.Literals(["ON_CHAIN", "OFF_CHAIN"]),
  status: Schema.Literals(TransactionStatus),
  sub_status: Nullable(Schema.Literals(SubStatus)),
  asset_id: Text,
  network_key: Text,
  amount: Numeric,
  fee: Nullable(Numeric),
  network_fee: Nullable(Numeric),
  network_fee_asset_id: Nullable(Text),
  source_wallet_id: Nullable(Text),
  source_address: Nullable(Text),
  source_customer_ref_id: Nullable(Text),
  source_uid: Nullable(Text),
  destination_wallet_id: Nullable(Text),
  destination_address: Nullable(Text),
  destination_customer_ref_id: Nullable(Text),
  destination_uid: Nullable(Text),
  tx_hash: Nullable(Text),
  output_index: Nullable(Int4),
  block_height: Nullable(Numeric),
  block_hash: Nullable(Text),
  external_tx_id: Nullable(Text),
  note: Nullable(Text),
  created_at: Timestamp,
  updated_at: Timestamp
})
export type TransactionRow = typeof TransactionRow.Type

export const transactionFromRow = (row: TransactionRow): Transaction => ({
  id: row.id,
  tenantId: row.tenant_id,
  kind: row.kind,
  settlement: row.settlement,
  status: row.status,
  subStatus: row.sub_status,
  assetId: row.asset_id,
  networkKey: row.network_key,
  amount: row.amount,
  fee: row.fee,
  networkFee: row.network_fee,
  networkFeeAssetId: row.network_fee_asset_id,
  source: {
    walletId: row.source_wallet_id,
    address: row.source_address,
    customerRefId: row.source_customer_ref_id,
    uid: row.source_uid
  },
  destination: {
    walletId: row.destination_wallet_id,
    address: row.destination_address,
    customerRefId: row.destination_customer_ref_id,
    uid: row.destination_uid
  },
  txHash: row.tx_hash,
  outputIndex: row.output_index,
  blockHeight: row.block_height,
  blockHash: row.block_hash,
  externalTxId: row.external_tx_id,
  note: row.note,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

/** `FROM transactions t` with the users of both sides joined: the select list and joins, in one place. */
export const transactionSelect = (sql: SqlClient.SqlClient) => transactionSelectFrom(sql, "transactions")

/** The same select over `relation`: the table, or a CTE of rows an INSERT returned (NewTransaction.ts). */
export const transactionSelectFrom = (
  sql: SqlClient.SqlClient,
  relation: "transactions" | "created" | "changed" | "loaded"
) =>
  sql`SELECT t.id, t.tenant_id, t.kind, t.settlement, t.status, t.sub_status, t.asset_id, t.network_key,
      t.amount::text AS amount, t.fee::text AS fee, t.network_fee::text AS network_fee, t.network_fee_asset_id,
      t.source_wallet_id, t.source_address, su.customer_ref_id AS source_customer_ref_id, su.uid AS source_uid,
      t.destination_wallet_id, t.destination_address, du.customer_ref_id AS destination_customer_ref_id,
      du.uid AS destination_uid, t.tx_hash, t.output_index, t.block_height::text AS block_height, t.block_hash,
      t.external_tx_id, t.note, t.created_at, t.updated_at
    FROM ${sql.literal(relation)} t
    LEFT JOIN users su ON su.id = t.source_user_id
    LEFT JOIN users du ON du.id = t.destination_user_id`
