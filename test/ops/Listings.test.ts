/**
 * The operator's listings and documents (operator-interface.md, "Listing, audit and documents"): GET /ops/tenants
 * (newest first, status, limit, cursor), GET /ops/approvals (what waits for an operator across tenants, oldest
 * first, tenantId, kind, limit, cursor) and the operator interface's OpenAPI document and reference page.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { HttpApi } from "effect/http-api"
import { OpsApi } from "../../src/ops/OpsApi.ts"
import { expectError, fund, settings } from "../support/Funds.ts"
import { makeTestAppLayer, opsClient, opsRequest, provisionTenant, type RawResponse, type TestTenant } from "../support/TestApp.ts"
import { call, walletOf } from "../withdrawals/WithdrawalHelpers.ts"

const btc = "BTC_TESTNET_BTC"
const btcTo = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx"

const ok = (response: RawResponse) => {
  assert.strictEqual(response.status, 200, response.text)
  return response.json
}

const createTenant = (name: string) =>
  Effect.map(opsRequest("POST", "/ops/tenants", { name }), (response) => {
    assert.strictEqual(response.status, 201, response.text)
    return response.json.id as string
  })

const transfer = (tenant: TestTenant, from: string, to: string, externalTxId: string) =>
  Effect.map(
    call(tenant, "POST", "/v1/transactions", {
      assetId: btc,
      source: { type: "WALLET", id: from },
      destination: { type: "WALLET", id: to },
      amountRaw: "5000",
      externalTxId
    }),
    (response) => {
      assert.strictEqual(response.status, 202, response.text)
      return response.json.transactionId as string
    }
  )

/** The ids of every page of `path` (which has a query already), `limit` at a time, following nextCursor to the end. */
const allPages = (path: string, limit: number) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    let cursor: string | null = null
    for (let page = 0; page < 100; page++) {
      const body: any = ok(yield* opsRequest("GET", `${path}&limit=${limit}${cursor === null ? "" : `&cursor=${cursor}`}`))
      assert.isAtMost(body.items.length, limit)
      ids.push(...body.items.map((item: any) => item.id ?? item.transaction.id))
      cursor = body.nextCursor
      if (cursor === null) return ids
    }
    return assert.fail("paging did not end")
  })

layer(makeTestAppLayer(), { excludeTestServices: true, timeout: 120_000 })("operator listings and documents", (it) => {
  it.effect("GET /ops/tenants: newest first, the tenant object; status filter; limit and cursor page through; bad values 400", () =>
    Effect.gen(function*() {
      const first = yield* createTenant("list one")
      const second = yield* createTenant("list two")
      const third = yield* createTenant("list three")
      ok(yield* opsRequest("PATCH", `/ops/tenants/${second}`, { status: "SUSPENDED" }))

      const newest = ok(yield* opsRequest("GET", "/ops/tenants?limit=3"))
      assert.deepStrictEqual(newest.items.map((tenant: any) => tenant.id), [third, second, first])
      assert.strictEqual(newest.nextCursor, first)
      assert.deepStrictEqual(newest.items[0], ok(yield* opsRequest("GET", `/ops/tenants/${third}`)))

      // Every tenant once, newest first, whatever the page size.
      const everyone = yield* allPages("/ops/tenants?", 2)
      assert.deepStrictEqual(everyone.slice(0, 3), [third, second, first])
      assert.strictEqual(new Set(everyone).size, everyone.length)
      assert.deepStrictEqual(yield* allPages("/ops/tenants?", 200), everyone)

      const suspended = ok(yield* opsRequest("GET", "/ops/tenants?status=SUSPENDED"))
      assert.deepStrictEqual(suspended.items.map((tenant: any) => tenant.id), [second])
      assert.isNull(suspended.nextCursor)
      const active = yield* allPages("/ops/tenants?status=ACTIVE", 1)
      assert.include(active, first)
      assert.notInclude(active, second)

      const afterThird = ok(yield* opsRequest("GET", `/ops/tenants?limit=1&cursor=${third}`))
      assert.deepStrictEqual(afterThird.items.map((tenant: any) => tenant.id), [second])
      const unknownCursor = ok(yield* opsRequest("GET", "/ops/tenants?cursor=00000000-0000-7000-8000-000000000000"))
      assert.deepStrictEqual([unknownCursor.items, unknownCursor.nextCursor], [[], null])

      for (const query of ["limit=0", "limit=201", "limit=x", "status=CLOSED", "cursor=nope"]) {
        expectError(yield* opsRequest("GET", `/ops/tenants?${query}`), 400, "BAD_REQUEST")
      }
      expectError(yield* opsRequest("GET", "/ops/tenants", undefined, { authorization: "Bearer wrong" }), 401, "UNAUTHORIZED")
    }))

  it.effect("GET /ops/approvals: pending transfers and withdrawals and held deposits of every tenant, oldest first, with kind; filters; paging; a decided one leaves the list", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const other = yield* provisionTenant()
      const payer = yield* walletOf(tenant, "pia", "BTC_TESTNET")
      const payee = yield* walletOf(tenant, "pete", "BTC_TESTNET")
      const otherPayer = yield* walletOf(other, "olga", "BTC_TESTNET")
      const otherPayee = yield* walletOf(other, "otto", "BTC_TESTNET")
      yield* fund(tenant, payer.walletId, btc, 10_000_000n)
      yield* fund(other, otherPayer.walletId, btc, 10_000_000n)
      for (const each of [tenant, other]) {
        yield* settings(each, { transferApprovalAbove: { [btc]: "1" }, withdrawalApprovalAbove: { [btc]: "1" } })
      }

      const firstTransfer = yield* transfer(tenant, payer.walletId, payee.walletId, "approvals-1")
      const otherTransfer = yield* transfer(other, otherPayer.walletId, otherPayee.walletId, "approvals-2")
      const withdrawal = yield* call(tenant, "POST", "/v1/transactions", {
        assetId: btc,
        source: { type: "WALLET", id: payer.walletId },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: btcTo } },
        amountRaw: "60000",
        externalTxId: "approvals-3"
      })
      assert.strictEqual(withdrawal.status, 202, withdrawal.text)
      const withdrawalId = withdrawal.json.transactionId as string
      // The withdrawal's entity takes it from SUBMITTED to PENDING_AUTHORIZATION in the background.
      for (let attempt = 0; attempt < 100; attempt++) {
        const listed = ok(yield* opsRequest("GET", `/ops/approvals?kind=WITHDRAWAL&tenantId=${tenant.tenantId}`))
        if (listed.items.length > 0) break
        yield* Effect.sleep("100 millis")
      }

      // A deposit to a FROZEN wallet is held for manual handling.
      ok(yield* opsRequest("PATCH", `/ops/tenants/${other.tenantId}/wallets/${otherPayee.walletId}`, { status: "FROZEN" }))
      const client = yield* opsClient
      yield* client.devnet.transfer({ params: { networkKey: "BTC_TESTNET" }, payload: { to: otherPayee.address, assetId: btc, amountRaw: 70_000n } })
        .pipe(Effect.orDie)
      yield* client.devnet.mine({ params: { networkKey: "BTC_TESTNET" }, payload: { count: 2 } }).pipe(Effect.orDie)
      const held = (yield* call(other, "GET", "/v1/transactions?kind=DEPOSIT")).json.items[0]
      assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])

      const all = ok(yield* opsRequest("GET", "/ops/approvals"))
      assert.deepStrictEqual(
        all.items.map((item: any) => [item.tenantId, item.kind, item.transaction.id]),
        [
          [tenant.tenantId, "INTERNAL_TRANSFER", firstTransfer],
          [other.tenantId, "INTERNAL_TRANSFER", otherTransfer],
          [tenant.tenantId, "WITHDRAWAL", withdrawalId],
          [other.tenantId, "DEPOSIT", held.id]
        ]
      )
      assert.isNull(all.nextCursor)
      // The transaction as the tenant sees it on /v1.
      assert.deepStrictEqual(all.items[0].transaction, (yield* call(tenant, "GET", `/v1/transactions/${firstTransfer}`)).json)
      assert.strictEqual(all.items[2].transaction.status, "PENDING_AUTHORIZATION")

      const ofTenant = ok(yield* opsRequest("GET", `/ops/approvals?tenantId=${tenant.tenantId}`))
      assert.deepStrictEqual(ofTenant.items.map((item: any) => item.transaction.id), [firstTransfer, withdrawalId])
      const deposits = ok(yield* opsRequest("GET", "/ops/approvals?kind=DEPOSIT"))
      assert.deepStrictEqual(deposits.items.map((item: any) => item.transaction.id), [held.id])
      assert.deepStrictEqual(
        yield* allPages("/ops/approvals?", 1),
        [firstTransfer, otherTransfer, withdrawalId, held.id]
      )
      const page = ok(yield* opsRequest("GET", "/ops/approvals?limit=2"))
      assert.strictEqual(page.nextCursor, otherTransfer)

      // Decided or credited: no longer waiting.
      ok(yield* opsRequest("POST", `/ops/tenants/${tenant.tenantId}/transactions/${firstTransfer}/approve`))
      ok(yield* opsRequest("POST", `/ops/tenants/${other.tenantId}/deposits/${held.id}/credit`))
      ok(yield* opsRequest("POST", `/ops/tenants/${tenant.tenantId}/transactions/${withdrawalId}/reject`))
      const left = ok(yield* opsRequest("GET", "/ops/approvals"))
      assert.deepStrictEqual(left.items.map((item: any) => item.transaction.id), [otherTransfer])

      for (const query of ["kind=SWEEP", "tenantId=x", "limit=0", "limit=201", "cursor=1"]) {
        expectError(yield* opsRequest("GET", `/ops/approvals?${query}`), 400, "BAD_REQUEST")
      }
    }))

  it.effect("GET /ops/openapi.json: the operator interface as OpenAPI 3.1, every operator route in it; GET /ops/docs: its reference page, offline", () =>
    Effect.gen(function*() {
      // Served without the token, as /v1's documents are: they describe the interface and hold no data.
      const document = yield* opsRequest("GET", "/ops/openapi.json", undefined, { authorization: "" })
      assert.strictEqual(document.status, 200, document.text)
      assert.match(document.json.openapi, /^3\.1\./)
      assert.strictEqual(document.json.info.title, "Coffer operator interface")
      const paths = document.json.paths as Record<string, Record<string, any>>
      const operations: Array<readonly [string, string]> = []
      HttpApi.reflect(OpsApi, {
        onGroup: () => {},
        onEndpoint: ({ endpoint }) => operations.push([endpoint.method.toLowerCase(), endpoint.path])
      })
      assert.isAtLeast(operations.length, 28)
      for (const [method, path] of operations) {
        const openApiPath = path.replace(/:([A-Za-z]+)/g, "{$1}")
        assert.isObject(paths[openApiPath]?.[method], `${method.toUpperCase()} ${openApiPath} documented`)
      }
      for (const [path, method] of [["/ops/tenants", "get"], ["/ops/approvals", "get"], ["/ops/audit", "get"]] as const) {
        assert.isString(paths[path]![method].summary, `${method.toUpperCase()} ${path} summary`)
      }
      // The bearer token, on every operation; errors as the envelope.
      assert.deepInclude(document.json.components.securitySchemes.opsToken, { type: "http", scheme: "bearer" })
      assert.deepStrictEqual(document.json.security, [{ opsToken: [] }])
      assert.strictEqual(
        paths["/ops/audit"]!.get.responses["422"]?.content["application/json"].schema.$ref,
        "#/components/schemas/ErrorEnvelope"
      )
      assert.notInclude(document.text, "\"additionalProperties\":false")
      assert.isUndefined(paths["/v1/networks"], "the tenant interface is not in the operator document")

      const page = yield* opsRequest("GET", "/ops/docs", undefined, { authorization: "" })
      assert.strictEqual(page.status, 200, page.text.slice(0, 200))
      assert.match(page.headers.get("content-type") ?? "", /^text\/html/)
      assert.include(page.text, "<title>Coffer operator interface</title>")
      assert.include(page.text, "\"/ops/audit\"")
      // The Scalar bundle is inline: the page loads nothing from elsewhere.
      assert.notMatch(page.text, /<script[^>]+src=/)
    }))
})
