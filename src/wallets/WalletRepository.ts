/** Reading wallets and their addresses. Writes live with the rules that make them (Wallets, WalletProvisioner). */
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { ChainFamily } from "../chains/ChainFamily.ts"
import { decodeFirstRow, decodeRows, Int4, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"

export const WalletStatus = ["PROVISIONING", "ACTIVE", "HIDDEN", "FROZEN", "CLOSED"] as const
export type WalletStatus = (typeof WalletStatus)[number]

export interface Wallet {
  readonly id: string
  readonly tenantId: string
  readonly userId: string
  readonly customerRefId: string
  /** The owner's `uid`, as a transaction object names the parties. */
  readonly uid: string
  readonly chainFamily: ChainFamily
  readonly seq: number
  readonly name: string
  readonly isDefault: boolean
  readonly status: WalletStatus
  readonly address: string | null
  readonly createdAt: Date
}

export const WatchStatus = ["ALLOCATED", "REGISTERING", "ACTIVE", "DEGRADED", "FROZEN"] as const

export interface WalletAddress {
  readonly walletId: string
  readonly networkKey: string
  readonly address: string
  readonly watchStatus: (typeof WatchStatus)[number]
}

/** The columns of `walletColumns`, decoded (db/RowSchemas.ts). */
export const WalletRow = Schema.Struct({
  id: Text,
  tenant_id: Text,
  user_id: Text,
  customer_ref_id: Text,
  uid: Text,
  chain_family: ChainFamily,
  seq: Int4,
  name: Text,
  is_default: Schema.Boolean,
  status: Schema.Literals(WalletStatus),
  address: Nullable(Text),
  created_at: Timestamp
})
export type WalletRow = typeof WalletRow.Type

const AddressRow = Schema.Struct({
  wallet_id: Text,
  network_key: Text,
  address: Text,
  watch_status: Schema.Literals(WatchStatus)
})

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const foundRow = decodeFirstRow(WalletRow, "WalletRepository.find")
const userRows = decodeRows(WalletRow, "WalletRepository.listByUser")
const listedRows = decodeRows(WalletRow, "WalletRepository.list")
const addressRows = decodeRows(AddressRow, "WalletRepository.addresses")
const byAddressRow = decodeFirstRow(WalletRow, "WalletRepository.findByAddress")
const withAddressRow = decodeFirstRow(
  Schema.Struct({ ...WalletRow.fields, network_address: Nullable(Text) }),
  "WalletRepository.findWithAddressOn"
)

export const walletFromRow = (row: WalletRow): Wallet => ({
  id: row.id,
  tenantId: row.tenant_id,
  userId: row.user_id,
  customerRefId: row.customer_ref_id,
  uid: row.uid,
  chainFamily: row.chain_family,
  seq: row.seq,
  name: row.name,
  isDefault: row.is_default,
  status: row.status,
  address: row.address,
  createdAt: row.created_at
})

/** The columns of `WalletRow`, each with the table it comes from: the wallet (`w`) or its user (`u`). */
const walletColumnSources: ReadonlyArray<readonly [keyof typeof WalletRow.fields, "w" | "u"]> = [
  ["id", "w"],
  ["tenant_id", "w"],
  ["user_id", "w"],
  ["customer_ref_id", "u"],
  ["uid", "u"],
  ["chain_family", "w"],
  ["seq", "w"],
  ["name", "w"],
  ["is_default", "w"],
  ["status", "w"],
  ["address", "w"],
  ["created_at", "w"]
]

/** Select list for `wallets w JOIN users u`. */
export const walletColumns = (sql: SqlClient.SqlClient) =>
  sql.literal(walletColumnSources.map(([column, table]) => `${table}.${column}`).join(", "))

/**
 * A second wallet in the same statement: select list for `wallets rw JOIN users ru` (a LEFT JOIN), each column
 * named `r_<column>`; `RecipientWalletRow` decodes it and `recipientFromRow` makes it a wallet, or undefined when the
 * join found none.
 */
export const recipientWalletColumns = (sql: SqlClient.SqlClient) =>
  sql.literal(walletColumnSources.map(([column, table]) => `r${table}.${column} AS r_${column}`).join(", "))

/** `WalletRow`'s fields as `recipientWalletColumns` names them, each null when the LEFT JOIN found no wallet. */
type RecipientFields = {
  readonly [K in keyof typeof WalletRow.fields as `r_${K}`]: Schema.NullOr<(typeof WalletRow.fields)[K]>
}
export const RecipientWalletRow = Schema.Struct(
  Object.fromEntries(
    Object.entries(WalletRow.fields).map(([column, schema]) => [`r_${column}`, Nullable(schema)])
  ) as RecipientFields
)

export const recipientFromRow = (row: typeof RecipientWalletRow.Type): Wallet | undefined =>
  row.r_id === null
    ? undefined
    : walletFromRow(
      Object.fromEntries(Object.keys(WalletRow.fields).map((column) => [column, row[`r_${column}` as keyof typeof row]])) as WalletRow
    )

export class WalletRepository extends Context.Service<WalletRepository, {
  /** A wallet of this tenant, or undefined (another tenant's wallet is as missing as a deleted one). */
  readonly find: (tenantId: string, walletId: string) => Effect.Effect<Wallet | undefined>
  readonly listByUser: (tenantId: string, userId: string) => Effect.Effect<ReadonlyArray<Wallet>>
  readonly list: (
    tenantId: string,
    options: { readonly customerRefId?: string | undefined; readonly limit: number; readonly before?: string | undefined }
  ) => Effect.Effect<{ readonly items: ReadonlyArray<Wallet>; readonly nextBefore: string | null }>
  readonly addresses: (walletId: string) => Effect.Effect<ReadonlyArray<WalletAddress>>
  /** `find` and the wallet's address on `networkKey` (undefined when it has none there), in one statement. */
  readonly findWithAddressOn: (
    tenantId: string,
    walletId: string,
    networkKey: string
  ) => Effect.Effect<{ readonly wallet: Wallet; readonly address: string | undefined } | undefined>
  /** The wallet of this tenant that receives on `address` on this network, if any. */
  readonly findByAddress: (tenantId: string, networkKey: string, address: string) => Effect.Effect<Wallet | undefined>
}>()("coffer/WalletRepository") {
  static readonly layer = Layer.effect(
    WalletRepository,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = walletColumns(sql)

      const find = Effect.fn("WalletRepository.find")(function*(tenantId: string, walletId: string) {
        const row = yield* sql`
          SELECT ${columns} FROM wallets w JOIN users u ON u.id = w.user_id
          WHERE w.tenant_id = ${tenantId} AND w.id = ${walletId}`.pipe(Effect.orDie, Effect.flatMap(foundRow))
        return row === undefined ? undefined : walletFromRow(row)
      })

      const listByUser = Effect.fn("WalletRepository.listByUser")(function*(tenantId: string, userId: string) {
        const rows = yield* sql`
          SELECT ${columns} FROM wallets w JOIN users u ON u.id = w.user_id
          WHERE w.tenant_id = ${tenantId} AND w.user_id = ${userId}
          ORDER BY w.chain_family, w.seq`.pipe(Effect.orDie, Effect.flatMap(userRows))
        return rows.map(walletFromRow)
      })

      const list = Effect.fn("WalletRepository.list")(function*(
        tenantId: string,
        options: { customerRefId?: string | undefined; limit: number; before?: string | undefined }
      ) {
        const rows = yield* sql`
          SELECT ${columns} FROM wallets w JOIN users u ON u.id = w.user_id
          WHERE w.tenant_id = ${tenantId}
            ${options.customerRefId === undefined ? sql`` : sql`AND u.customer_ref_id = ${options.customerRefId}`}
            ${options.before === undefined ? sql`` : sql`AND w.id < ${options.before}`}
          ORDER BY w.id DESC
          LIMIT ${options.limit}`.pipe(Effect.orDie, Effect.flatMap(listedRows))
        const items = rows.map(walletFromRow)
        return { items, nextBefore: items.length === options.limit ? items[items.length - 1]!.id : null }
      })

      const addresses = Effect.fn("WalletRepository.addresses")(function*(walletId: string) {
        const rows = yield* sql`
          SELECT wallet_id, network_key, address, watch_status FROM wallet_addresses WHERE wallet_id = ${walletId}`
          .pipe(Effect.orDie, Effect.flatMap(addressRows))
        return rows.map((row) => ({
          walletId: row.wallet_id,
          networkKey: row.network_key,
          address: row.address,
          watchStatus: row.watch_status
        }))
      })

      const findWithAddressOn = Effect.fn("WalletRepository.findWithAddressOn")(function*(
        tenantId: string,
        walletId: string,
        networkKey: string
      ) {
        const row = yield* sql`
          SELECT ${columns}, (SELECT a.address FROM wallet_addresses a WHERE a.wallet_id = w.id AND a.network_key = ${networkKey})
            AS network_address
          FROM wallets w JOIN users u ON u.id = w.user_id
          WHERE w.tenant_id = ${tenantId} AND w.id = ${walletId}`.pipe(Effect.orDie, Effect.flatMap(withAddressRow))
        return row === undefined ? undefined : { wallet: walletFromRow(row), address: row.network_address ?? undefined }
      })

      const findByAddress = Effect.fn("WalletRepository.findByAddress")(function*(
        tenantId: string,
        networkKey: string,
        address: string
      ) {
        const row = yield* sql`
          SELECT ${columns} FROM wallet_addresses a
            JOIN wallets w ON w.id = a.wallet_id JOIN users u ON u.id = w.user_id
          WHERE a.tenant_id = ${tenantId} AND a.network_key = ${networkKey} AND a.address = ${address}`
          .pipe(Effect.orDie, Effect.flatMap(byAddressRow))
        return row === undefined ? undefined : walletFromRow(row)
      })

      return WalletRepository.of({ find, listByUser, list, addresses, findWithAddressOn, findByAddress })
    })
  )
}
