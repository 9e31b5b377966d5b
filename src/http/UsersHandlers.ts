/** Handlers of the users group (spec 4.2). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { pageLimitDefault } from "../api/Common.ts"
import type { UserObject } from "../api/UsersApi.ts"
import { BadRequest } from "../domain/ApiError.ts"
import { toRfc3339 } from "../domain/Time.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { customerRefIdMessage, isCustomerRefIdLength } from "../users/UserRules.ts"
import { type User, Users } from "../users/Users.ts"
import { WalletRepository } from "../wallets/WalletRepository.ts"
import { Wallets } from "../wallets/Wallets.ts"
import { currentTenant } from "./CurrentTenant.ts"
import { walletObject } from "./WalletViews.ts"

export const userObject = (user: User): UserObject => ({
  id: user.id,
  tenantId: user.tenantId,
  uid: user.uid,
  email: user.email,
  nickname: user.nickname,
  totpEnabled: user.totpEnabled,
  source: user.source,
  customerRefId: user.customerRefId,
  status: user.status,
  cooldownUntil: user.cooldownUntil === null ? null : toRfc3339(user.cooldownUntil)
})

/**
 * A `customerRefId` naming a user in a path: spec sections 4.2 and 8 give its length rule a 422 with their message
 * (not a 400 parse failure: the value parses, it is just too long to name anyone).
 */
export const requireCustomerRefId = (customerRefId: string): Effect.Effect<string, BadRequest> =>
  isCustomerRefIdLength(customerRefId)
    ? Effect.succeed(customerRefId)
    : Effect.fail(new BadRequest({ message: customerRefIdMessage }))

export const UsersHandlers = HttpApiBuilder.group(Api, "users", (handlers) =>
  Effect.gen(function*() {
    const users = yield* Users
    const wallets = yield* Wallets
    const walletRepository = yield* WalletRepository
    const ledger = yield* Ledger
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          return userObject(yield* users.create(tenant.id, payload))
        }))
      .handle("list", ({ query }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const page = yield* users.list(tenant.id, {
            limit: query.limit ?? pageLimitDefault,
            cursor: query.cursor,
            status: query.status
          })
          return {
            items: page.items.map((user) => ({
              uid: user.uid,
              customerRefId: user.customerRefId,
              email: user.email,
              status: user.status,
              createdAt: toRfc3339(user.createdAt)
            })),
            nextCursor: page.nextCursor
          }
        }))
      .handle("get", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const user = yield* users.get(tenant.id, yield* requireCustomerRefId(params.customerRefId))
          const userWallets = yield* walletRepository.listByUser(tenant.id, user.id)
          return { user: userObject(user), wallets: userWallets.map(walletObject) }
        }))
      .handle("update", ({ params, payload }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          return userObject(yield* users.update(tenant.id, yield* requireCustomerRefId(params.customerRefId), payload))
        }))
      .handle("balances", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const user = yield* users.get(tenant.id, yield* requireCustomerRefId(params.customerRefId))
          const balances = yield* ledger.userBalances(user.id)
          return {
            customerRefId: user.customerRefId,
            items: balances.map((balance) => ({
              assetId: balance.assetId,
              availableRaw: balance.available.toString(),
              frozenRaw: balance.frozen.toString(),
              ...(balance.overdrawn > 0n ? { overdrawnRaw: balance.overdrawn.toString() } : {})
            }))
          }
        }))
      .handle("depositAddress", ({ params, payload }) =>
        Effect.gen(function*() {
          const tenant = yield* currentTenant
          const result = yield* wallets.depositAddress(tenant, {
            customerRefId: params.customerRefId,
            networkKey: payload.networkKey,
            email: payload.email
          })
          return {
            customerRefId: result.user.customerRefId,
            uid: result.user.uid,
            walletId: result.wallet.id,
            networkKey: result.network.networkKey,
            chainFamily: result.wallet.chainFamily,
            address: result.address,
            status: result.address === null ? "PROVISIONING" as const : "READY" as const
          }
        }), { uninterruptible: true })
  }))
