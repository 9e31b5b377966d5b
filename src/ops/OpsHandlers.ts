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
import { pageLimitDefault } from "../api/Common.ts"
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
import { refused } from "../observability/ServiceMetrics.ts"
import { SqlClient } from "effect/sql"
import { PgClient } from "@effect/sql-pg"
import { announceConfigChange } from "../auth/ConfigChanges.ts"
import { auditOrigin } from "./AuditOrigin.ts"
import { OperatorAudit } from "./OperatorAudit.ts"
import { reorganizedSendsReport } from "../sending/ReorganizedSends.ts"

export const tenantObject = (tenant: Tenant): TenantObject => ({
  id: tenant.id,
  name: tenant.name,
  status: tenant.status,
  subscriptionExpiresAt: tenant.subscriptionExpiresAt === null ? null : toRfc3339(tenant.subscriptionExpiresAt),
  settings: tenant.settingsEncoded,
  networks: tenant.networks,
  createdAt: toRfc3339(tenant.createdAt)
})

/** The fields a tenant PATCH changed, each `{from, to}` as the tenant object shows them. */
const tenantChange = (before: TenantObject, after: TenantObject): Record<string, { from: unknown; to: unknown }> => {
  const fields = ["status", "subscriptionExpiresAt", "networks", "settings"] as const
  return Object.fromEntries(
    fields
      .filter((field) => JSON.stringify(before[field]) !== JSON.stringify(after[field]))
      .map((field) => [field, { from: before[field], to: after[field] }])
  )
}

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
          return yield* refused("ops_token", new Unauthorized({ message: "operator token required" }), "ops")
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
    const audit = yield* OperatorAudit
    const announce = announceConfigChange.pipe(Effect.provideService(PgClient.PgClient, yield* PgClient.PgClient))
    /**
     * After a tenant or key change has committed with its audit entry: the services cleared their caches and
     * announced the change from inside that transaction, so a reader between then and the commit may have cached
     * the old row again. Cleared and announced once more, now that the change is visible.
     */
    const changeCommitted = Effect.all([tenants.invalidate, apiKeys.invalidate, announce], { discard: true })

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
          const unique = [...new Set(networks)]
          const created = yield* audit.audited(yield* auditOrigin, tenants.create({ name, networks: unique }), (tenant) => ({
            action: "TENANT_CREATED",
            target: { type: "TENANT", id: tenant.id },
            tenantId: tenant.id,
            change: { name, networks: unique }
          }))
          return tenantObject(created)
        }))
      .handle("list", ({ query }) =>
        Effect.map(
          tenants.list({ status: query.status, limit: query.limit ?? pageLimitDefault, cursor: query.cursor }),
          (page) => ({ items: page.items.map(tenantObject), nextCursor: page.nextCursor })
        ))
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
          const update = Effect.flatMap(
            tenants.update(tenant.id, {
              ...(payload.status === undefined ? {} : { status: payload.status }),
              ...(subscriptionExpiresAt === undefined ? {} : { subscriptionExpiresAt }),
              ...(payload.networks === undefined ? {} : { networks: [...new Set(payload.networks)] }),
              ...(settingsEncoded === undefined ? {} : { settingsEncoded })
            }),
            (updated) => updated === undefined ? Effect.fail(tenantNotFound()) : Effect.succeed(updated)
          )
          const updated = yield* audit.audited(yield* auditOrigin, update, (after) => ({
            action: "TENANT_UPDATED",
            target: { type: "TENANT", id: tenant.id },
            tenantId: tenant.id,
            change: tenantChange(tenantObject(tenant), tenantObject(after))
          }))
          yield* changeCommitted
          return tenantObject(updated)
        }))
      .handle("createApiKey", ({ params, payload }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          const key = yield* audit.audited(yield* auditOrigin, registry.create(tenant.id, payload), (key) => ({
            action: "API_KEY_CREATED",
            target: { type: "API_KEY", id: key.keyId },
            tenantId: tenant.id,
            // The public key is public; it tells which key pair the tenant's engineer made.
            change: {
              name: key.name,
              publicKey: payload.publicKey.toLowerCase(),
              allowedIps: key.allowedIps,
              rateLimitPerSecond: key.rateLimitPerSecond
            }
          }))
          yield* changeCommitted
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
          yield* audit.audited(yield* auditOrigin, registry.revoke(tenant.id, params.keyId), () => ({
            action: "API_KEY_REVOKED",
            target: { type: "API_KEY", id: params.keyId },
            tenantId: tenant.id,
            change: { status: "REVOKED" }
          }))
          yield* changeCommitted
        }))
  }))

export const OpsUsersHandlers = HttpApiBuilder.group(OpsApi, "users", (handlers) =>
  Effect.gen(function*() {
    const tenants = yield* Tenants
    const users = yield* Users
    const entropy = yield* Entropy
    const audit = yield* OperatorAudit

    return handlers
      .handle("bindTotp", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          const secret = new Secret({ buffer: (yield* entropy.bytes(20, "user-totp-secret")).buffer as ArrayBuffer })
          const customerRefId = yield* requireCustomerRefId(params.customerRefId)
          // The entry says a secret was bound, never the secret.
          yield* audit.audited(yield* auditOrigin, users.setTotpSecret(tenant.id, customerRefId, secret.base32), () => ({
            action: "USER_TOTP_BOUND",
            target: { type: "USER", id: customerRefId },
            tenantId: tenant.id,
            change: { totpEnabled: true }
          }))
          const totp = new TOTP({ issuer: "Coffer", label: params.customerRefId, secret })
          return { secret: secret.base32, otpauthUrl: totp.toString() }
        }))
      .handle("unbindTotp", ({ params }) =>
        Effect.gen(function*() {
          const tenant = yield* tenants.require(params.tenantId)
          const customerRefId = yield* requireCustomerRefId(params.customerRefId)
          yield* audit.audited(yield* auditOrigin, users.setTotpSecret(tenant.id, customerRefId, null), () => ({
            action: "USER_TOTP_UNBOUND",
            target: { type: "USER", id: customerRefId },
            tenantId: tenant.id,
            change: { totpEnabled: false }
          }))
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
          const customerRefId = yield* requireCustomerRefId(params.customerRefId)
          const update = users.operatorUpdate(tenant.id, customerRefId, { cooldownUntil, status: payload.status })
          const user = yield* audit.audited(yield* auditOrigin, update, (user) => ({
            action: "USER_UPDATED",
            target: { type: "USER", id: customerRefId },
            tenantId: tenant.id,
            // What was asked, as it now stands.
            change: {
              ...(payload.status === undefined ? {} : { status: user.status }),
              ...(cooldownUntil === undefined
                ? {}
                : { cooldownUntil: user.cooldownUntil === null ? null : toRfc3339(user.cooldownUntil) })
            }
          }))
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
        const reorganized = database === "ok"
          ? Option.getOrElse(yield* reorganizedSendsReport(sql).pipe(Effect.timeoutOption("2 seconds")), () => [])
          : []
        return {
          status: database === "ok" ? "ok" as const : "degraded" as const,
          database,
          chains,
          signer: signerStatus,
          cluster,
          reorganizedSends: reorganized.map((send) => ({ ...send, since: toRfc3339(send.since) }))
        }
      }))
  }))
