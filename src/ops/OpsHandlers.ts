/** Handlers of the operator interface, its bearer-token check and its schema-error mapping. */
import { ClusterHealth } from "../entities/ClusterHealth.ts"
import { WatchHealth } from "../deposits/WatchHealth.ts"
import { Effect, Layer, Option, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder, HttpApiMiddleware } from "effect/http-api"
import { timingSafeEqual } from "node:crypto"
import { Secret, TOTP } from "otpauth"
import { ApiKeyRegistry } from "../auth/ApiKeyRegistry.ts"
import { ApiKeys } from "../auth/ApiKeys.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { BadRequest, NotFound, Unauthorized } from "../domain/ApiError.ts"
import { Entropy } from "../domain/Entropy.ts"
import { parseRfc3339, toRfc3339 } from "../domain/Time.ts"
import { checkParameters } from "../http/RequestParameters.ts"
import { requireUtf8Body } from "../http/Utf8Body.ts"
import { schemaErrorToApiError } from "../http/SchemaErrorsLayer.ts"
import { requireCustomerRefId, userObject } from "../http/UsersHandlers.ts"
import { Signer } from "../signer/Signer.ts"
import { blockedAddressesProblem } from "../tenants/BlockedAddresses.ts"
import { decodeSettings, encodeSettings, mergeEncodedSettings } from "../tenants/TenantSettings.ts"
import { type Tenant, Tenants } from "../tenants/Tenants.ts"
import { Users } from "../users/Users.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { OpsApi, OpsAuth, OpsSchemaErrors, type TenantObject } from "./OpsApi.ts"
import { OpsToken } from "./OpsToken.ts"
import { SqlClient } from "effect/sql"

export const tenantObject = (tenant: Tenant): TenantObject => ({
  id: tenant.id,
  name: tenant.name,
  status: tenant.status,
  subscriptionExpiresAt: tenant.subscriptionExpiresAt === null ? null : toRfc3339(tenant.subscriptionExpiresAt),
  settings: tenant.settingsEncoded,
  networks: tenant.networks,
  createdAt: toRfc3339(tenant.createdAt)
})

export const OpsAuthLayer = Layer.effect(
  OpsAuth,
  Effect.gen(function*() {
    const token = Buffer.from(`Bearer ${Redacted.value(yield* OpsToken)}`)
    return (httpEffect, { endpoint }) =>
      Effect.gen(function*() {
        // A path or query value that fails its type is 400 before the token is looked at, as on /v1.
        yield* checkParameters(endpoint)
        const request = yield* HttpServerRequest.HttpServerRequest
        const given = Buffer.from(request.headers["authorization"] ?? "")
        if (given.length !== token.length || !timingSafeEqual(given, token)) {
          return yield* new Unauthorized({ message: "operator token required" })
        }
        // The body was read under its cap by the router boundary; a body that is not UTF-8 is 422, as on /v1.
        yield* requireUtf8Body(new Uint8Array(yield* Effect.orDie(request.arrayBuffer)))
        return yield* httpEffect
      })
  })
)

export const OpsSchemaErrorsLayer = HttpApiMiddleware.layerSchemaErrorTransform(OpsSchemaErrors, schemaErrorToApiError)

const tenantNotFound = () => new NotFound({ message: "tenant not found" })

export const OpsTenantsHandlers = HttpApiBuilder.group(OpsApi, "tenants", (handlers) =>
  Effect.gen(function*() {
    const tenants = yield* Tenants
    const catalog = yield* Catalog
    const registry = yield* ApiKeyRegistry
    const apiKeys = yield* ApiKeys

    const checkNetworks = (networks: ReadonlyArray<string>) => {
      const unknown = networks.find((key) => catalog.network(key) === undefined)
      return unknown === undefined ? Effect.void : Effect.fail(new BadRequest({ message: `unknown network ${unknown}` }))
    }

    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const name = payload.name.trim()
          if (name.length < 1 || name.length > 100) return yield* new BadRequest({ message: "name must be 1-100 chars" })
          const networks = payload.networks ?? catalog.networks.map((network) => network.networkKey)
          yield* checkNetworks(networks)
          return tenantObject(yield* tenants.create({ name, networks: [...new Set(networks)] }))
        }))
      .handle("get", ({ params }) => Effect.map(tenants.require(params.tenantId), tenantObject))
      .handle("update", ({ params, payload }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          if (payload.networks !== undefined) yield* checkNetworks(payload.networks)
          let subscriptionExpiresAt: Date | null | undefined
          if (payload.subscriptionExpiresAt !== undefined) {
            if (payload.subscriptionExpiresAt === null) subscriptionExpiresAt = null
            else {
              const parsed = parseRfc3339(payload.subscriptionExpiresAt)
              if (parsed === undefined) return yield* new BadRequest({ message: "subscriptionExpiresAt must be RFC 3339" })
              subscriptionExpiresAt = parsed
            }
          }
          let settingsEncoded: Record<string, unknown> | undefined
          if (payload.settings !== undefined) {
            // Validate the merged whole; stored is the re-encoded decoded form, so names the service does not know
            // are dropped like any undefined body field (spec section 1), not kept and echoed as if they applied.
            const settings = yield* decodeSettings(mergeEncodedSettings(tenant.settingsEncoded, payload.settings)).pipe(
              Effect.mapError((error) => new BadRequest({ message: `invalid settings: ${error.message}` }))
            )
            // Only a PATCH that sets blockedAddresses checks it (keys replace as a whole, so the merged list is the
            // patch's): a tenant whose list predates the check can still change its other settings.
            if (payload.settings.blockedAddresses !== undefined && settings.blockedAddresses !== undefined) {
              const problem = blockedAddressesProblem(settings.blockedAddresses)
              if (problem !== undefined) return yield* new BadRequest({ message: `invalid settings: ${problem}` })
            }
            settingsEncoded = encodeSettings(settings)
          }
          const updated = yield* tenants.update(tenant.id, {
            ...(payload.status === undefined ? {} : { status: payload.status }),
            ...(subscriptionExpiresAt === undefined ? {} : { subscriptionExpiresAt }),
            ...(payload.networks === undefined ? {} : { networks: [...new Set(payload.networks)] }),
            ...(settingsEncoded === undefined ? {} : { settingsEncoded })
          })
          yield* apiKeys.invalidate
          if (updated === undefined) return yield* tenantNotFound()
          return tenantObject(updated)
        }))
      .handle("createApiKey", ({ params, payload }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          const key = yield* registry.create(tenant.id, payload)
          return {
            keyId: key.keyId,
            name: key.name,
            allowedIps: key.allowedIps,
            rateLimitPerSecond: key.rateLimitPerSecond,
            status: key.status,
            createdAt: toRfc3339(key.createdAt)
          }
        }))
      .handle("revokeApiKey", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          yield* registry.revoke(tenant.id, params.keyId)
        }))
  }))

export const OpsUsersHandlers = HttpApiBuilder.group(OpsApi, "users", (handlers) =>
  Effect.gen(function*() {
    const tenants = yield* Tenants
    const users = yield* Users
    const entropy = yield* Entropy

    return handlers
      .handle("bindTotp", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          const secret = new Secret({ buffer: (yield* entropy.bytes(20)).buffer as ArrayBuffer })
          yield* users.setTotpSecret(tenant.id, yield* requireCustomerRefId(params.customerRefId), secret.base32)
          const totp = new TOTP({ issuer: "Coffer", label: params.customerRefId, secret })
          return { secret: secret.base32, otpauthUrl: totp.toString() }
        }))
      .handle("unbindTotp", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          yield* users.setTotpSecret(tenant.id, yield* requireCustomerRefId(params.customerRefId), null)
        }))
      .handle("update", ({ params, payload }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          let cooldownUntil: Date | null | undefined
          if (payload.cooldownUntil !== undefined) {
            if (payload.cooldownUntil === null) cooldownUntil = null
            else {
              const parsed = parseRfc3339(payload.cooldownUntil)
              if (parsed === undefined) return yield* new BadRequest({ message: "cooldownUntil must be RFC 3339" })
              cooldownUntil = parsed
            }
          }
          const user = yield* users.operatorUpdate(tenant.id, yield* requireCustomerRefId(params.customerRefId), {
            cooldownUntil,
            status: payload.status
          })
          return userObject(user)
        }))
  }))

export const OpsPlatformHandlers = HttpApiBuilder.group(OpsApi, "platform", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const signer = yield* Signer
    const platformAddresses = yield* PlatformAddresses
    const watchHealth = yield* WatchHealth
    const clusterHealth = yield* ClusterHealth
    return handlers
      .handle("addresses", () => platformAddresses.list)
      .handle("health", () =>
      Effect.gen(function*() {
        const database = yield* sql`SELECT 1`.pipe(
          Effect.timeoutOption("2 seconds"),
          Effect.map((result) => Option.isSome(result) ? "ok" as const : "unavailable" as const),
          Effect.orElseSucceed(() => "unavailable" as const)
        )
        const signerStatus = yield* signer.status()
        const watched = database === "ok" ? yield* watchHealth.report : []
        // `lagging` is watchStatus's DEGRADED (deposits/WatchHealth.ts): blocks behind or silent past the network's
        // lag budget, one rule for both.
        const chains = Object.fromEntries(watched.map((network) => [network.networkKey, {
          height: Number(network.headHeight),
          lagBlocks: Number(network.headHeight - network.height),
          status: network.health === "ACTIVE" ? "ok" : "lagging"
        }]))
        const cluster = database === "ok"
          ? Option.getOrNull(yield* clusterHealth.report.pipe(Effect.timeoutOption("2 seconds")))
          : null
        return {
          status: database === "ok" ? "ok" as const : "degraded" as const,
          database,
          chains,
          signer: signerStatus,
          cluster
        }
      }))
  }))
