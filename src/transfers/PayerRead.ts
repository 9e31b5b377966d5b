/**
 * The payer's read of `POST /v1/transactions` (Transfers.ts `submit`): the paying wallet, its user and the day's
 * total, and in the same statement what the checks after it would read about the destination (a WALLET's recipient;
 * for a one-time address the tenant's wallet there and the parts an on-chain quote reads: db/ReadPart.ts). One round
 * trip instead of up to five; the checks still run in the spec's order on what was read (docs/transfers.md, Reads).
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Catalog, type CatalogAsset } from "../catalog/Catalog.ts"
import { PriceFeed } from "../catalog/PriceFeed.ts"
import { Switches } from "../catalog/Switches.ts"
import { validateAddress } from "../chains/AddressValidation.ts"
import { decodeFirstRow, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { uuidPattern } from "../domain/Ids.ts"
import { PayerTotp } from "../users/TwoFactor.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import {
  RecipientWalletRow,
  recipientFromRow,
  recipientWalletColumns,
  type Wallet,
  walletColumns,
  walletFromRow,
  WalletRow
} from "../wallets/WalletRepository.ts"
import { utcDay } from "./DailyLimit.ts"
import type { ReadByAddress } from "./TransferQuotes.ts"
import type { Destination } from "./Transfers.ts"

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const PayerRow = Schema.Struct({ ...WalletRow.fields, user_status: Text, ...PayerTotp.fields, spent_today: Numeric })
const payerRow = decodeFirstRow(PayerRow, "PayerRead.payer")
const payerWithRecipientRow = decodeFirstRow(
  Schema.Struct({ ...PayerRow.fields, ...RecipientWalletRow.fields, r_network_address: Nullable(Text) }),
  "PayerRead.payerAndRecipient"
)
/** The recipient a WALLET destination names, read with the payer; `wallet` undefined when there is none. */
export interface PrefetchedRecipient {
  readonly wallet: Wallet | undefined
  readonly address: string | undefined
}
/** What `readPayer` reads: the paying wallet, its user's columns, and what was read with them when asked. */
export interface PayerRead {
  readonly wallet: Wallet
  readonly user: typeof PayerRow.Type
  readonly recipient: PrefetchedRecipient | undefined
  readonly byAddress: ReadByAddress | undefined
}

/**
 * `(tenantId, walletId, assetId, nowMillis, destination, asset) => the payer's read`, undefined when the tenant has no
 * such wallet; built once in the layer of its user (Transfers.ts).
 */
export const makePayerRead = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const catalog = yield* Catalog
  const platformAddresses = yield* PlatformAddresses
  const switches = yield* Switches
  const prices = yield* PriceFeed

  /**
   * The paying wallet of this tenant with its user's status and TOTP columns (for the two-step check that
   * follows) and what counts against the user's daily limit of `assetId` today (for the quote's early check), in
   * one statement: the wallet as `WalletRepository.find` reads it. The same statement also reads what the checks
   * after it would read, each exactly as its own query would (read a moment earlier, checked in the same order):
   * one round trip instead of up to five per transfer.
   * - `recipient` (a WALLET destination): that wallet of this tenant and its address on `networkKey`, as
   *   `recipientWallet` would.
   * - `byAddress` (a ONE_TIME_ADDRESS, normalized for the asset's network): the tenant's wallet at that address
   *   (`WalletRepository.findByAddress`), and the parts an on-chain quote reads (db/ReadPart.ts): the tenants'
   *   count for the GAS wallets, the switches and the prices.
   */
  const walletSelect = walletColumns(sql)
  const recipientSelect = recipientWalletColumns(sql)
  const byAddressParts = sql`${platformAddresses.tenantCount.columns}, ${switches.part.columns}, ${prices.part.columns}`
  const readPayer = (
    tenantId: string,
    walletId: string,
    assetId: string,
    nowMillis: number,
    other?:
      | { readonly recipient: { readonly walletId: string; readonly networkKey: string } }
      | { readonly byAddress: { readonly networkKey: string; readonly address: string } }
  ) => {
    const recipient = other !== undefined && "recipient" in other ? other.recipient : undefined
    const byAddress = other !== undefined && "byAddress" in other ? other.byAddress : undefined
    const statement = sql`
      SELECT ${walletSelect}, u.status AS user_status, u.totp_secret, u.cooldown_until,
        daily_spent(u.id, ${assetId}, ${utcDay(nowMillis)}::date)::text AS spent_today
        ${
      recipient !== undefined
        ? sql`, ${recipientSelect},
        (SELECT a.address FROM wallet_addresses a WHERE a.wallet_id = rw.id AND a.network_key = ${recipient.networkKey})
          AS r_network_address`
        : byAddress !== undefined
        ? sql`, ${recipientSelect}, ra.address AS r_network_address, ${byAddressParts}`
        : sql``
    }
      FROM wallets w JOIN users u ON u.id = w.user_id
        ${
      recipient !== undefined
        ? sql`LEFT JOIN (wallets rw JOIN users ru ON ru.id = rw.user_id)
          ON rw.tenant_id = ${tenantId} AND rw.id = ${recipient.walletId}`
        : byAddress !== undefined
        ? sql`LEFT JOIN (wallet_addresses ra JOIN wallets rw ON rw.id = ra.wallet_id JOIN users ru ON ru.id = rw.user_id)
          ON ra.tenant_id = ${tenantId} AND ra.network_key = ${byAddress.networkKey} AND ra.address = ${byAddress.address}`
        : sql``
    }
      WHERE w.tenant_id = ${tenantId} AND w.id = ${walletId}`
    const read: Effect.Effect<PayerRead | undefined, SqlError.SqlError> = Effect.gen(function*() {
      const rows = yield* statement
      if (other === undefined) {
        const row = yield* payerRow(rows)
        return row === undefined ? undefined : { wallet: walletFromRow(row), user: row, recipient: undefined, byAddress: undefined }
      }
      const row = yield* payerWithRecipientRow(rows)
      if (row === undefined) return undefined
      const found = { wallet: recipientFromRow(row), address: row.r_network_address ?? undefined }
      if (byAddress === undefined) return { wallet: walletFromRow(row), user: row, recipient: found, byAddress: undefined }
      return {
        wallet: walletFromRow(row),
        user: row,
        recipient: undefined,
        byAddress: {
          ...byAddress,
          wallet: found.wallet,
          // Each part decodes its own columns of the row as read (the decoded `row` has the payer's only).
          tenantCount: yield* platformAddresses.tenantCount.decode(rows[0]),
          switches: yield* switches.part.decode(rows[0]),
          prices: yield* prices.part.decode(rows[0])
        }
      }
    })
    return Effect.orDie(read)
  }

  /**
   * What `readPayer` reads besides the payer for this destination: a WALLET's recipient on the asset's network, or
   * a one-time address normalized as the quote will normalize it (an address that does not validate is the
   * quote's to refuse, and nothing is read for it).
   */
  const readWithPayer = (destination: Destination, asset: CatalogAsset | undefined) => {
    if (asset === undefined) return undefined
    if (destination.type === "WALLET") {
      return uuidPattern.test(destination.id)
        ? { recipient: { walletId: destination.id, networkKey: asset.networkKey } }
        : undefined
    }
    if (destination.type !== "ONE_TIME_ADDRESS") return undefined
    const network = catalog.network(asset.networkKey)!
    const checked = validateAddress({
      family: network.chainFamily,
      btcNetwork: network.btcNetwork ?? undefined,
      address: destination.address
    })
    return checked.isValid ? { byAddress: { networkKey: network.networkKey, address: checked.normalized } } : undefined
  }

  return (
    tenantId: string,
    walletId: string,
    assetId: string,
    nowMillis: number,
    destination: Destination,
    asset: CatalogAsset | undefined
  ) => readPayer(tenantId, walletId, assetId, nowMillis, readWithPayer(destination, asset))
})
