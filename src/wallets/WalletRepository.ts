/** Reading wallets and their addresses. Writes live with the rules that make them (Wallets, WalletProvisioner). */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { ChainFamily } from "../chains/ChainFamily.ts"

export type WalletStatus = "PROVISIONING" | "ACTIVE" | "HIDDEN" | "FROZEN" | "CLOSED"

export interface Wallet {
  readonly id: string
  readonly tenantId: string
  readonly userId: string
  readonly customerRefId: string
  readonly chainFamily: ChainFamily
  readonly seq: number
  readonly name: string
  readonly isDefault: boolean
  readonly status: WalletStatus
  readonly address: string | null
  readonly createdAt: Date
}

export interface WalletAddress {
  readonly walletId: string
  readonly networkKey: string
  readonly address: string
  readonly watchStatus: "ALLOCATED" | "REGISTERING" | "ACTIVE" | "DEGRADED" | "FROZEN"
}

export interface WalletRow {
  readonly id: string
  readonly tenant_id: string
  readonly user_id: string
  readonly customer_ref_id: string
  readonly chain_family: ChainFamily
  readonly seq: number
  readonly name: string
  readonly is_default: boolean
  readonly status: WalletStatus
  readonly address: string | null
  readonly created_at: Date
}

export const walletFromRow = (row: WalletRow): Wallet => ({
  id: row.id,
  tenantId: row.tenant_id,
  userId: row.user_id,
  customerRefId: row.customer_ref_id,
  chainFamily: row.chain_family,
  seq: row.seq,
  name: row.name,
  isDefault: row.is_default,
  status: row.status,
  address: row.address,
  createdAt: row.created_at
})

/** Select list for `wallets w JOIN users u`. */
export const walletColumns = (sql: SqlClient.SqlClient) =>
  sql`w.id, w.tenant_id, w.user_id, u.customer_ref_id, w.chain_family, w.seq, w.name, w.is_default, w.status,
    w.address, w.created_at`

export class WalletRepository extends Context.Service<WalletRepository, {
  /** A wallet of this tenant, or undefined (another tenant's wallet is as missing as a deleted one). */
  readonly find: (tenantId: string, walletId: string) => Effect.Effect<Wallet | undefined>
  readonly listByUser: (tenantId: string, userId: string) => Effect.Effect<ReadonlyArray<Wallet>>
  readonly list: (
    tenantId: string,
    options: { readonly customerRefId?: string | undefined; readonly limit: number; readonly before?: string | undefined }
  ) => Effect.Effect<{ readonly items: ReadonlyArray<Wallet>; readonly nextBefore: string | null }>
  readonly addresses: (walletId: string) => Effect.Effect<ReadonlyArray<WalletAddress>>
  /** The wallet of this tenant that receives on `address` on this network, if any. */
  readonly findByAddress: (tenantId: string, networkKey: string, address: string) => Effect.Effect<Wallet | undefined>
}>()("coffer/WalletRepository") {
  static readonly layer = Layer.effect(
    WalletRepository,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = walletColumns(sql)

      const find = Effect.fn("WalletRepository.find")(function*(tenantId: string, walletId: string) {
        const rows = yield* sql<WalletRow>`
          SELECT ${columns} FROM wallets w JOIN users u ON u.id = w.user_id
          WHERE w.tenant_id = ${tenantId} AND w.id = ${walletId}`.pipe(Effect.orDie)
        return rows[0] === undefined ? undefined : walletFromRow(rows[0])
      })

      const listByUser = Effect.fn("WalletRepository.listByUser")(function*(tenantId: string, userId: string) {
        const rows = yield* sql<WalletRow>`
          SELECT ${columns} FROM wallets w JOIN users u ON u.id = w.user_id
          WHERE w.tenant_id = ${tenantId} AND w.user_id = ${userId}
          ORDER BY w.chain_family, w.seq`.pipe(Effect.orDie)
        return rows.map(walletFromRow)
      })

      const list = Effect.fn("WalletRepository.list")(function*(
        tenantId: string,
        options: { customerRefId?: string | undefined; limit: number; before?: string | undefined }
      ) {
        const rows = yield* sql<WalletRow>`
          SELECT ${columns} FROM wallets w JOIN users u ON u.id = w.user_id
          WHERE w.tenant_id = ${tenantId}
            ${options.customerRefId === undefined ? sql`` : sql`AND u.customer_ref_id = ${options.customerRefId}`}
            ${options.before === undefined ? sql`` : sql`AND w.id < ${options.before}`}
          ORDER BY w.id DESC
          LIMIT ${options.limit}`.pipe(Effect.orDie)
        const items = rows.map(walletFromRow)
        return { items, nextBefore: items.length === options.limit ? items[items.length - 1]!.id : null }
      })

      const addresses = Effect.fn("WalletRepository.addresses")(function*(walletId: string) {
        const rows = yield* sql<{ wallet_id: string; network_key: string; address: string; watch_status: WalletAddress["watchStatus"] }>`
          SELECT wallet_id, network_key, address, watch_status FROM wallet_addresses WHERE wallet_id = ${walletId}`
          .pipe(Effect.orDie)
        return rows.map((row) => ({
          walletId: row.wallet_id,
          networkKey: row.network_key,
          address: row.address,
          watchStatus: row.watch_status
        }))
      })

      const findByAddress = Effect.fn("WalletRepository.findByAddress")(function*(
        tenantId: string,
        networkKey: string,
        address: string
      ) {
        const rows = yield* sql<WalletRow>`
          SELECT ${columns} FROM wallet_addresses a
            JOIN wallets w ON w.id = a.wallet_id JOIN users u ON u.id = w.user_id
          WHERE a.tenant_id = ${tenantId} AND a.network_key = ${networkKey} AND a.address = ${address}`
          .pipe(Effect.orDie)
        return rows[0] === undefined ? undefined : walletFromRow(rows[0])
      })

      return WalletRepository.of({ find, listByUser, list, addresses, findByAddress })
    })
  )
}
