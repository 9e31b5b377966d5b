/**
 * The per-tenant user quota (issue 36; docs/operations.md, "Per-tenant quotas"): `tenants.users_max`, default
 * 10,000,000, lowered here as an operator would change it for one tenant. Past it a new customerRefId is 422
 * LIMIT_EXCEEDED on every route that creates a user; an existing one is still answered (POST /v1/users is idempotent
 * by customerRefId). The count and the insert are one transaction under the tenant row lock, so bursts cannot pass.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { userQuotaMessage } from "../../src/users/Users.ts"
import { assertError } from "../support/Signing.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const post = (tenant: TestTenant, target: string, body: unknown, headers: Record<string, string> = {}) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target, tenant, body: JSON.stringify(body), headers })

const createUser = (tenant: TestTenant, customerRefId: string, extra: Record<string, unknown> = {}) =>
  post(tenant, "/v1/users", { customerRefId, ...extra })

const setQuota = (tenant: TestTenant, usersMax: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE tenants SET users_max = ${usersMax} WHERE id = ${tenant.tenantId}`)

const userCount = (tenant: TestTenant) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ users: number }>`SELECT count(*)::int AS users FROM users WHERE tenant_id = ${tenant.tenantId}`,
      ([row]) => row!.users
    ))

layer(makeTestAppLayer(), { excludeTestServices: true })("per-tenant user quota", (it) => {
  it.effect("default 10,000,000; at the quota a new user is 422 LIMIT_EXCEEDED, an existing one is still 200", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ quota: number }>`SELECT users_max AS quota FROM tenants WHERE id = ${tenant.tenantId}`
      assert.strictEqual(row!.quota, 10_000_000)
      yield* setQuota(tenant, 3)
      for (const ref of ["u-1", "u-2", "u-3"]) assert.strictEqual((yield* createUser(tenant, ref)).status, 200)
      assertError(yield* createUser(tenant, "u-4"), 422, "LIMIT_EXCEEDED", userQuotaMessage)
      // No password hash is spent on a refused user, and no email is taken by it.
      assertError(
        yield* createUser(tenant, "u-5", { email: "five@example.com", password: "correct horse 42" }),
        422,
        "LIMIT_EXCEEDED",
        userQuotaMessage
      )
      const again = yield* createUser(tenant, "u-2")
      assert.strictEqual(again.status, 200, again.text)
      assert.strictEqual(again.json.customerRefId, "u-2")
      assert.strictEqual(yield* userCount(tenant), 3)
      // The routes that create a user on the way refuse a new customerRefId too, with nothing created.
      assertError(
        yield* post(tenant, "/v1/wallets", { customerRefId: "u-6", chainFamily: "EVM" }, { "idempotency-key": "q-1" }),
        422,
        "LIMIT_EXCEEDED",
        userQuotaMessage
      )
      assertError(
        yield* post(tenant, "/v1/users/u-7/deposit_address", { networkKey: "ETH_SEPOLIA" }),
        422,
        "LIMIT_EXCEEDED",
        userQuotaMessage
      )
      assert.strictEqual(yield* userCount(tenant), 3)
      // Raised by the operator: creation resumes. Another tenant was never affected.
      yield* setQuota(tenant, 4)
      assert.strictEqual((yield* createUser(tenant, "u-4")).status, 200)
      const other = yield* provisionTenant()
      assert.strictEqual((yield* createUser(other, "u-1")).status, 200)
    }))

  it.effect("the quota holds under 20 concurrent creations of distinct users", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant({ rateLimitPerSecond: 1000 })
      yield* setQuota(tenant, 5)
      const responses = yield* Effect.all(
        Array.from({ length: 20 }, (_, index) => createUser(tenant, `burst-${index}`)),
        { concurrency: "unbounded" }
      )
      const statuses = responses.map((response) => response.status)
      assert.strictEqual(statuses.filter((status) => status === 200).length, 5, JSON.stringify(statuses))
      for (const response of responses.filter((candidate) => candidate.status !== 200)) {
        assertError(response, 422, "LIMIT_EXCEEDED", userQuotaMessage)
      }
      assert.strictEqual(yield* userCount(tenant), 5)
    }))

  it.effect("at the quota, concurrent requests for the last user all get that user", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant({ rateLimitPerSecond: 1000 })
      yield* setQuota(tenant, 1)
      const responses = yield* Effect.all(
        Array.from({ length: 10 }, () => createUser(tenant, "only")),
        { concurrency: "unbounded" }
      )
      for (const response of responses) assert.strictEqual(response.status, 200, response.text)
      assert.strictEqual(new Set(responses.map((response) => response.json.id)).size, 1)
      assert.strictEqual(yield* userCount(tenant), 1)
    }))
})
