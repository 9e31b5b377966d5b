/**
 * The one way a `transactions` row is created, for every kind (a withdrawal or an internal transfer submitted, a
 * deposit seen on chain): the caller says what the transaction is, this module names the columns. Call it inside
 * the database transaction that books the rest of the change (its ledger entry, its event).
 *
 * Any number of rows travel as one JSON parameter (a block may carry thousands of deposits), inserted in id order
 * so that concurrent inserts take their index locks in one order. A deposit is keyed by (network, txHash, output)
 * (decisions.md, Deposits): `onConflict: "depositSeenAgain"` makes seeing it again move the existing row to the
 * block it is in now, unless it already failed or was reversed, instead of a second record; every other kind has no
 * conflict to expect, so a duplicate there is a database error.
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { decodeRows, Text } from "../db/RowSchemas.ts"
import {
  type SubStatus,
  type Transaction,
  type TransactionKind,
  type TransactionStatus
} from "./Transaction.ts"

export interface NewParty {
  readonly walletId?: string | null | undefined
  readonly address?: string | null | undefined
  readonly userId?: string | null | undefined
}

export interface NewTransaction {
  readonly id: string
  readonly tenantId: string
  readonly kind: TransactionKind
  readonly settlement: "ON_CHAIN" | "OFF_CHAIN"
  readonly status: TransactionStatus
  readonly subStatus?: SubStatus | null | undefined
  readonly assetId: string
  readonly networkKey: string
  readonly amount: bigint
  /** Withdrawals and transfers: charged on top of the amount. Deposits: none until crediting decides it. */
  readonly fee?: bigint | null | undefined
  readonly source: NewParty
  readonly destination: NewParty
  readonly txHash?: string | null | undefined
  readonly outputIndex?: number | null | undefined
  readonly blockHeight?: bigint | null | undefined
  readonly blockHash?: string | null | undefined
  readonly externalTxId?: string | null | undefined
  readonly note?: string | null | undefined
  /** created_at and updated_at. */
  readonly at: Date
}

export const InsertedTransaction = Schema.Struct({
  id: Text,
  /** False when a deposit was seen again: the existing row was kept (and moved to its new block). */
  inserted: Schema.Boolean
})
export type InsertedTransaction = typeof InsertedTransaction.Type

// Compiled once (db/RowSchemas.ts): the inserted rows decoded at this edge, a mismatch a defect naming the query.
const insertedRows = decodeRows(InsertedTransaction, "NewTransaction.insertTransactions")

const column = (record: NewTransaction) => ({
  id: record.id,
  tenant_id: record.tenantId,
  kind: record.kind,
  settlement: record.settlement,
  status: record.status,
  sub_status: record.subStatus ?? null,
  asset_id: record.assetId,
  network_key: record.networkKey,
  amount: record.amount.toString(),
  fee: record.fee === undefined || record.fee === null ? null : record.fee.toString(),
  source_wallet_id: record.source.walletId ?? null,
  source_address: record.source.address ?? null,
  source_user_id: record.source.userId ?? null,
  destination_wallet_id: record.destination.walletId ?? null,
  destination_address: record.destination.address ?? null,
  destination_user_id: record.destination.userId ?? null,
  tx_hash: record.txHash ?? null,
  output_index: record.outputIndex ?? null,
  block_height: record.blockHeight === undefined || record.blockHeight === null ? null : record.blockHeight.toString(),
  block_hash: record.blockHash ?? null,
  external_tx_id: record.externalTxId ?? null,
  note: record.note ?? null,
  created_at: record.at.toISOString(),
  updated_at: record.at.toISOString()
})

/** A column left out of the JSON is NULL to jsonb_to_recordset: a block's worth of deposits travels smaller. */
const withoutNulls = (record: NewTransaction) =>
  Object.fromEntries(Object.entries(column(record)).filter(([, value]) => value !== null))

/** Inserts the rows; answers each row's id and whether it is new, in no particular order. */
export const insertTransactions = (
  records: ReadonlyArray<NewTransaction>,
  options: { readonly onConflict?: "depositSeenAgain" | undefined } = {}
): Effect.Effect<ReadonlyArray<InsertedTransaction>, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    if (records.length === 0) return []
    const sql = yield* SqlClient.SqlClient
    return yield* sql`${insertStatement(sql, records, options)}
      RETURNING id, (xmax = 0) AS inserted`.pipe(Effect.flatMap(insertedRows))
  })

/**
 * One new row (a submitted withdrawal or transfer, which has no conflict to expect) as a query for the caller's own
 * statement (a data-modifying `WITH`), answering its id: a movement created in one statement
 * (transfers/Movements.ts). `transactionAsInserted` is the row it writes, as the repository reads it.
 */
export const insertTransactionStatement = (sql: SqlClient.SqlClient, record: NewTransaction) =>
  sql`${insertStatement(sql, [record], {})} RETURNING id`

/**
 * `insertTransactionStatement` for many new rows: the same text whatever their number (one JSON parameter), answering
 * each row's id; for a statement of fixed text that creates many movements (transfers/Movements.ts).
 */
export const insertTransactionsStatement = (sql: SqlClient.SqlClient, records: ReadonlyArray<NewTransaction>) =>
  sql`${insertStatement(sql, records, {})} RETURNING id`

/** A party's user as the transaction object names it (joined from `users` when a row is read). */
export interface PartyUser {
  readonly customerRefId: string
  readonly uid: string
}

/**
 * The transaction `record` is, as the repository reads it once inserted (`transactionSelectFrom`): for a caller that
 * builds what it reports (the TRANSACTION_CREATED event) before the row is written, in the same statement. `users`
 * are the users of `record.source.userId` and `record.destination.userId`.
 */
export const transactionAsInserted = (
  record: NewTransaction,
  users: { readonly source?: PartyUser | undefined; readonly destination?: PartyUser | undefined }
): Transaction => {
  const party = (side: NewParty, user: PartyUser | undefined, name: string) => {
    const named = side.userId !== undefined && side.userId !== null
    if (named && user === undefined) throw new Error(`transactionAsInserted: the ${name} user is not given`)
    return {
      walletId: side.walletId ?? null,
      address: side.address ?? null,
      customerRefId: named ? user!.customerRefId : null,
      uid: named ? user!.uid : null
    }
  }
  return {
    id: record.id,
    tenantId: record.tenantId,
    kind: record.kind,
    settlement: record.settlement,
    status: record.status,
    subStatus: record.subStatus ?? null,
    assetId: record.assetId,
    networkKey: record.networkKey,
    amount: record.amount,
    fee: record.fee ?? null,
    networkFee: null,
    networkFeeAssetId: null,
    source: party(record.source, users.source, "source"),
    destination: party(record.destination, users.destination, "destination"),
    txHash: record.txHash ?? null,
    outputIndex: record.outputIndex ?? null,
    blockHeight: record.blockHeight ?? null,
    blockHash: record.blockHash ?? null,
    externalTxId: record.externalTxId ?? null,
    note: record.note ?? null,
    createdAt: record.at,
    updatedAt: record.at
  }
}

const insertStatement = (
  sql: SqlClient.SqlClient,
  records: ReadonlyArray<NewTransaction>,
  options: { readonly onConflict?: "depositSeenAgain" | undefined }
) =>
  sql`
      INSERT INTO transactions (id, tenant_id, kind, settlement, status, sub_status, asset_id, network_key, amount, fee,
        source_wallet_id, source_address, source_user_id, destination_wallet_id, destination_address,
        destination_user_id, tx_hash, output_index, block_height, block_hash, external_tx_id, note, created_at,
        updated_at)
      SELECT r.id, r.tenant_id, r.kind, r.settlement, r.status, r.sub_status, r.asset_id, r.network_key, r.amount, r.fee,
        r.source_wallet_id, r.source_address, r.source_user_id, r.destination_wallet_id, r.destination_address,
        r.destination_user_id, r.tx_hash, r.output_index, r.block_height, r.block_hash, r.external_tx_id, r.note,
        r.created_at, r.updated_at
      FROM jsonb_to_recordset(${JSON.stringify(records.map(withoutNulls))}::jsonb) AS r(id uuid, tenant_id uuid, kind text,
        settlement text, status text, sub_status text, asset_id text, network_key text, amount numeric, fee numeric,
        source_wallet_id uuid, source_address text, source_user_id uuid, destination_wallet_id uuid,
        destination_address text, destination_user_id uuid, tx_hash text, output_index integer, block_height bigint,
        block_hash text, external_tx_id text, note text, created_at timestamptz, updated_at timestamptz)
      ORDER BY r.id
      ${
      options.onConflict === "depositSeenAgain"
        ? sql`ON CONFLICT (network_key, tx_hash, output_index) WHERE kind = 'DEPOSIT' DO UPDATE
        SET block_height = EXCLUDED.block_height, block_hash = EXCLUDED.block_hash, updated_at = EXCLUDED.updated_at
        WHERE transactions.status IN ('CONFIRMING', 'COMPLETED')`
        : sql``
    }`
