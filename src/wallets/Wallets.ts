/**
 * Opening wallets (spec 4.3) and handing out deposit addresses (4.2 `deposit_address`). Every rule that limits
 * wallet creation is checked under the user's row lock, so concurrent requests for one user see each other: ten
 * parallel deposit_address calls for a new user create one user and one wallet. This service records the wallet and
 * starts its provisioning in this process (ProvisioningRuns.ts: no entity, so a burst of new wallets never fills the
 * runner's resident entities, issue 39).
 */
import { Clock, Context, Effect, Layer, Schema, Scope } from "effect"
import { SqlClient } from "effect/sql"
import type { ChainFamily } from "../chains/ChainFamily.ts"
import { Catalog, type CatalogNetwork } from "../catalog/Catalog.ts"
import { tenantNetwork, tenantNetworks } from "../catalog/TenantCatalog.ts"
import {
  BadRequest,
  EmailTaken,
  Forbidden,
  NetworkDisabled,
  RateLimited,
  SignerUnavailable,
  WalletLimitReached,
  type LimitExceeded
} from "../domain/ApiError.ts"
import { decodeFirstRow, decodeRows, decodeSingleRow, Int4, Text } from "../db/RowSchemas.ts"
import { Ids } from "../domain/Ids.ts"
import { Signer } from "../signer/Signer.ts"
import { walletCreationsPer24hDefault, walletsPerFamilyDefault } from "../tenants/TenantSettings.ts"
import type { Tenant } from "../tenants/Tenants.ts"
import { customerRefIdMessage, normalizeCustomerRefId } from "../users/UserRules.ts"
import { type User, Users } from "../users/Users.ts"
import { Switches } from "../catalog/Switches.ts"
import { WatchHealth } from "../deposits/WatchHealth.ts"
import { addressItem } from "./AddressVisibility.ts"
import { makeProvisioningRuns } from "./ProvisioningRuns.ts"
import { WalletProvisioner } from "./WalletProvisioner.ts"
import { type Wallet, WalletRepository, walletColumns, walletFromRow, WalletRow } from "./WalletRepository.ts"

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const walletCounts = decodeSingleRow(
  Schema.Struct({ family_count: Int4, recent_count: Int4, has_default: Schema.Boolean, max_seq: Int4 }),
  "Wallets.insertWallet (counts)"
)
const lockedUser = decodeFirstRow(Schema.Struct({ status: Text }), "Wallets.lockUser")
const familyWallets = decodeRows(WalletRow, "Wallets.depositWallet (wallets of the family)")

export const chainFamilies: ReadonlyArray<ChainFamily> = ["EVM", "TRON", "BTC", "SOL"]
export const walletNameLengthMax = 40
export const walletCreationWindowMillis = 24 * 60 * 60 * 1000
/** deposit_address waits this long for the address (spec section 8), checking every `depositAddressPollMillis`. */
export const depositAddressWaitMillis = 6_000
export const depositAddressPollMillis = 100

export const chainFamilyMessage = "chainFamily must be one of EVM, TRON, BTC, SOL"
export const userNotActiveMessage = "user is not active"
export const walletRateMessage = "too many wallets created in the last 24 hours"

/** The name as given, cut to 40 characters; `<family> <seq>` when none is given (spec 2, wallet `name`). */
export const walletName = (given: string | null | undefined, family: ChainFamily, seq: number): string => {
  const trimmed = (given ?? "").trim()
  return trimmed.length === 0 ? `${family} ${seq}` : Array.from(trimmed).slice(0, walletNameLengthMax).join("")
}

/** Whether a family has a network this tenant may open new wallets on. */
const familyOpen = (catalog: Catalog["Service"], tenant: Tenant, family: ChainFamily) =>
  tenantNetworks(catalog, tenant).some((network) => network.chainFamily === family && network.newWalletsEnabled)

/** Wallets a deposit address may come from: the default unless frozen or hidden (spec 4.2). */
const usableForDeposits = (wallet: Wallet) => wallet.status === "ACTIVE" || wallet.status === "PROVISIONING"

export interface DepositAddress {
  readonly user: User
  readonly wallet: Wallet
  readonly network: CatalogNetwork
  readonly address: string | null
}

export class Wallets extends Context.Service<Wallets, {
  /**
   * `recordWallet` runs inside the database transaction that creates the wallet, with the wallet the call returns
   * (PROVISIONING, spec 4.3): the idempotency record is settled there (Idempotency.ts `Commit`).
   */
  readonly create: (
    tenant: Tenant,
    input: { readonly customerRefId: string; readonly chainFamily: string; readonly name?: string | null | undefined },
    recordWallet?: (wallet: Wallet) => Effect.Effect<void>
  ) => Effect.Effect<
    Wallet,
    BadRequest | Forbidden | NetworkDisabled | WalletLimitReached | LimitExceeded | RateLimited | SignerUnavailable
  >
  readonly depositAddress: (
    tenant: Tenant,
    input: { readonly customerRefId: string; readonly networkKey: string; readonly email?: string | null | undefined }
  ) => Effect.Effect<
    DepositAddress,
    BadRequest | Forbidden | NetworkDisabled | WalletLimitReached | LimitExceeded | RateLimited | SignerUnavailable | EmailTaken
  >
}>()("coffer/Wallets") {
  static readonly layer = Layer.effect(
    Wallets,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const signer = yield* Signer
      const users = yield* Users
      const repository = yield* WalletRepository
      const switches = yield* Switches
      const watchHealth = yield* WatchHealth
      const ids = yield* Ids
      const provisioning = makeProvisioningRuns(yield* WalletProvisioner, yield* Scope.Scope)
      const columns = walletColumns(sql)

      const requireSigner = Effect.gen(function*() {
        if ((yield* signer.status()) === "DISABLED") {
          return yield* new SignerUnavailable({ message: "signer is disabled in this environment" })
        }
      })

      /** Inside a transaction holding the user's row lock: the limits, then the new wallet row. */
      const insertWallet = (tenant: Tenant, user: User, family: ChainFamily, name: string | null | undefined) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const counts = yield* sql`
            SELECT count(*) FILTER (WHERE chain_family = ${family})::int AS family_count,
                   count(*) FILTER (WHERE created_at > ${new Date(now - walletCreationWindowMillis)})::int AS recent_count,
                   coalesce(bool_or(is_default AND chain_family = ${family}), false) AS has_default,
                   coalesce(max(seq) FILTER (WHERE chain_family = ${family}), 0)::int AS max_seq
            FROM wallets WHERE user_id = ${user.id}`.pipe(Effect.flatMap(walletCounts))
          if (counts.family_count >= (tenant.settings.walletsPerFamily ?? walletsPerFamilyDefault)) {
            return yield* new WalletLimitReached({ message: `wallet limit per chain family reached for ${family}` })
          }
          if (counts.recent_count >= (tenant.settings.walletCreationsPer24h ?? walletCreationsPer24hDefault)) {
            return yield* new RateLimited({ message: walletRateMessage })
          }
          const id = yield* ids.uuidV7For("wallet")
          const seq = counts.max_seq + 1
          yield* sql`
            INSERT INTO wallets (id, tenant_id, user_id, chain_family, seq, name, is_default, status, created_at,
              updated_at)
            VALUES (${id}, ${tenant.id}, ${user.id}, ${family}, ${seq}, ${walletName(name, family, seq)},
              ${!counts.has_default}, 'PROVISIONING', ${new Date(now)}, ${new Date(now)})`
          return id
        })

      const lockUser = (userId: string) =>
        sql`SELECT status FROM users WHERE id = ${userId} FOR UPDATE`.pipe(Effect.flatMap(lockedUser))

      /** Starts provisioning in this process (ProvisioningRuns.ts); returns at once. */
      const requestProvisioning = (walletId: string) => provisioning.start(walletId)

      const loadWallet = (tenantId: string, walletId: string) =>
        Effect.flatMap(repository.find(tenantId, walletId), (wallet) =>
          wallet === undefined ? Effect.die(new Error(`wallet ${walletId} vanished`)) : Effect.succeed(wallet))

      const create = Effect.fn("Wallets.create")(function*(
        tenant: Tenant,
        input: { customerRefId: string; chainFamily: string; name?: string | null | undefined },
        recordWallet?: (wallet: Wallet) => Effect.Effect<void>
      ) {
        const customerRefId = normalizeCustomerRefId(input.customerRefId)
        if (customerRefId === undefined) return yield* new BadRequest({ message: customerRefIdMessage })
        const family = chainFamilies.find((candidate) => candidate === input.chainFamily)
        if (family === undefined) return yield* new BadRequest({ message: chainFamilyMessage })
        yield* requireSigner
        if (!familyOpen(catalog, tenant, family)) {
          return yield* new NetworkDisabled({ message: `no network of chain family ${family} is open for new wallets` })
        }
        // Without an email, creating the user cannot collide on one.
        const user = yield* users.create(tenant.id, { customerRefId }).pipe(Effect.catchTag("EmailTaken", Effect.die))
        // The answer is the wallet as created (spec 4.3: PROVISIONING, no address), read in its own transaction.
        const wallet = yield* sql.withTransaction(Effect.gen(function*() {
          const locked = yield* lockUser(user.id)
          if (locked?.status !== "ACTIVE") return yield* new Forbidden({ message: userNotActiveMessage })
          const created = yield* loadWallet(tenant.id, yield* insertWallet(tenant, user, family, input.name))
          if (recordWallet !== undefined) yield* recordWallet(created)
          return created
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        // A crash before provisioning ends leaves the wallet PROVISIONING; ProvisioningSupervisor asks again.
        yield* requestProvisioning(wallet.id)
        return wallet
      })

      /** The wallet a deposit address comes from, creating it if the user has no usable one in the family. */
      const depositWallet = (tenant: Tenant, user: User, network: CatalogNetwork) =>
        sql.withTransaction(Effect.gen(function*() {
          const locked = yield* lockUser(user.id)
          const rows = yield* sql`
            SELECT ${columns} FROM wallets w JOIN users u ON u.id = w.user_id
            WHERE w.user_id = ${user.id} AND w.chain_family = ${network.chainFamily}
            ORDER BY w.is_default DESC, w.seq`.pipe(Effect.flatMap(familyWallets))
          const usable = rows.map(walletFromRow).find(usableForDeposits)
          if (usable !== undefined) return usable.id
          if (locked?.status !== "ACTIVE") return yield* new Forbidden({ message: userNotActiveMessage })
          if (!familyOpen(catalog, tenant, network.chainFamily)) {
            return yield* new NetworkDisabled({
              message: `chain family ${network.chainFamily} is closed to new wallets`
            })
          }
          return yield* insertWallet(tenant, user, network.chainFamily, undefined)
        })).pipe(Effect.catchTag("SqlError", Effect.die))

      const depositAddress = Effect.fn("Wallets.depositAddress")(function*(
        tenant: Tenant,
        input: { customerRefId: string; networkKey: string; email?: string | null | undefined }
      ) {
        const customerRefId = normalizeCustomerRefId(input.customerRefId)
        if (customerRefId === undefined) return yield* new BadRequest({ message: customerRefIdMessage })
        const network = tenantNetwork(catalog, tenant, input.networkKey)
        if (network === undefined) {
          return yield* new NetworkDisabled({ message: `network ${input.networkKey} is not enabled for this tenant` })
        }
        yield* requireSigner
        const user = yield* users.create(tenant.id, { customerRefId, email: input.email })
        const walletId = yield* depositWallet(tenant, user, network)
        let wallet = yield* loadWallet(tenant.id, walletId)
        const registration = (current: Wallet) =>
          current.status === "ACTIVE"
            ? Effect.map(repository.addresses(walletId), (entries) =>
              entries.find((entry) => entry.networkKey === network.networkKey))
            : Effect.succeed(undefined)
        let entry = yield* registration(wallet)
        if (entry === undefined) {
          // Still provisioning, or provisioned before this network joined the catalog: provision, then wait.
          const now = yield* Clock.currentTimeMillis
          yield* requestProvisioning(walletId)
          const deadline = now + depositAddressWaitMillis
          while (entry === undefined && (yield* Clock.currentTimeMillis) < deadline) {
            yield* Effect.sleep(depositAddressPollMillis)
            wallet = yield* loadWallet(tenant.id, walletId)
            entry = yield* registration(wallet)
          }
        }
        // The same rule as the wallet's address items, with the network as it is now: no address where deposits
        // are off, the watch FROZEN, or nobody watches (docs/wallets.md, "Deposit addresses"); `entry` exists only
        // while `wallet` (read with it) is ACTIVE.
        const state = (yield* switches.view).network(network)
        const health = (yield* watchHealth.view)(network.networkKey)
        return { user, wallet, network, address: addressItem(wallet, entry, { ...state, health }).address }
      })

      return Wallets.of({ create, depositAddress })
    })
  )
}
