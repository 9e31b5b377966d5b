/**
 * The read side of transactions (spec 4.4): by id, by externalTxId, and the list with every filter, paging and
 * validation. Rows are arranged with SQL, as the pipelines that write them (deposits, withdrawals, transfers) would.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { fund } from "../support/Funds.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const get = (tenant: TestTenant, target: string) => rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target, tenant })
const post = (tenant: TestTenant, target: string, body: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target, body: JSON.stringify(body), tenant })

const walletFor = (tenant: TestTenant, customerRefId: string, networkKey = "ETH_SEPOLIA") =>
  Effect.gen(function*() {
    const response = yield* post(tenant, `/v1/users/${customerRefId}/deposit_address`, { networkKey })
    assert.strictEqual(response.json.status, "READY", response.text)
    const sql = yield* SqlClient.SqlClient
    const [user] = yield* sql<{ id: string }>`SELECT user_id AS id FROM wallets WHERE id = ${response.json.walletId}`
    return { walletId: response.json.walletId as string, userId: user!.id, address: response.json.address as string }
  })

interface Row {
  readonly kind: "DEPOSIT" | "WITHDRAWAL" | "INTERNAL_TRANSFER"
  readonly status: string
  readonly subStatus?: string
  readonly assetId: string
  readonly amount: bigint
  readonly fee?: bigint
  readonly source?: { walletId: string; userId: string } | undefined
  readonly destination?: { walletId?: string; userId?: string; address?: string } | undefined
  readonly externalTxId?: string
  readonly createdAt: Date
}

const insert = (tenantId: string, row: Row) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* uuidV7
    const deposit = row.kind === "DEPOSIT"
    yield* sql`INSERT INTO transactions ${
      sql.insert({
        id,
        tenant_id: tenantId,
        kind: row.kind,
        settlement: row.kind === "INTERNAL_TRANSFER" ? "OFF_CHAIN" : "ON_CHAIN",
        status: row.status,
        sub_status: row.subStatus ?? null,
        asset_id: row.assetId,
        network_key: row.assetId.startsWith("TRON") ? "TRON_NILE" : "ETH_SEPOLIA",
        amount: row.amount.toString(),
        fee: row.fee === undefined ? null : row.fee.toString(),
        source_wallet_id: row.source?.walletId ?? null,
        source_user_id: row.source?.userId ?? null,
        source_address: deposit ? "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" : null,
        destination_wallet_id: row.destination?.walletId ?? null,
        destination_user_id: row.destination?.userId ?? null,
        destination_address: row.destination?.address ?? null,
        tx_hash: row.kind === "INTERNAL_TRANSFER" ? null : `0x${id.replaceAll("-", "").padEnd(64, "0")}`,
        output_index: deposit ? 0 : null,
        external_tx_id: row.externalTxId ?? null,
        created_at: row.createdAt,
        updated_at: row.createdAt
      })
    }`
    return id
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("transactions read side (spec 4.4)", (it) => {
  describe("GET /v1/transactions/{id} and by externalTxId", () => {
    it.effect("the transaction object with every field; another tenant's is 404", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const alice = yield* walletFor(tenant, "alice")
        const id = yield* insert(tenant.tenantId, {
          kind: "DEPOSIT",
          status: "COMPLETED",
          assetId: "ETH_SEPOLIA_ETH",
          amount: 10n ** 18n,
          fee: 10n ** 15n,
          destination: { ...alice },
          createdAt: new Date("2026-10-05T10:00:00.123Z")
        })
        const response = yield* get(tenant, `/v1/transactions/${id}`)
        assert.strictEqual(response.status, 200, response.text)
        assert.deepStrictEqual(response.json, {
          id,
          kind: "DEPOSIT",
          settlement: "ON_CHAIN",
          status: "COMPLETED",
          subStatus: null,
          assetId: "ETH_SEPOLIA_ETH",
          networkKey: "ETH_SEPOLIA",
          decimals: 18,
          amountRaw: "1000000000000000000",
          feeRaw: "1000000000000000",
          netAmountRaw: "999000000000000000",
          networkFeeRaw: null,
          networkFeeAssetId: null,
          source: { walletId: null, address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", customerRefId: null, uid: null },
          destination: {
            walletId: alice.walletId,
            address: alice.address,
            customerRefId: "alice",
            uid: response.json.destination.uid
          },
          txHash: `0x${id.replaceAll("-", "").padEnd(64, "0")}`,
          externalTxId: null,
          note: null,
          createdAt: "2026-10-05T10:00:00.123Z",
          updatedAt: "2026-10-05T10:00:00.123Z"
        })
        assert.match(response.json.destination.uid, /^[0-9]{8}$/)

        const other = yield* provisionTenant()
        const hidden = yield* get(other, `/v1/transactions/${id}`)
        assert.strictEqual(hidden.status, 404)
        assert.strictEqual(hidden.json.error.code, "NOT_FOUND")
        assert.strictEqual(hidden.json.error.message, "transaction not found")
      }))

    it.effect("any 1-128 char externalTxId the spec allows works end to end: submit, replay, lookup URL-encoded", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* walletFor(tenant, "ext-payer")
        const payee = yield* walletFor(tenant, "ext-payee")
        yield* fund(tenant, payer.walletId, "ETH_SEPOLIA_ETH", 10n ** 18n)
        // Spec sections 1 and 8: "1-128 chars", nothing more. Chars are code points: 128 emoji are 256 UTF-16 units.
        const ids = [
          "order/42",
          "100%",
          "%00",
          "%2F",
          "with spaces and tabs\t",
          " leading and trailing ",
          "a?b#c&d=e+f",
          "заказ-№7",
          "😀".repeat(128),
          "x".repeat(128),
          "Idempotency:style_key.1-2",
          "\\back\\slash\"quote'"
        ]
        for (const externalTxId of ids) {
          const body = {
            assetId: "ETH_SEPOLIA_ETH",
            source: { type: "WALLET", id: payer.walletId },
            destination: { type: "WALLET", id: payee.walletId },
            amountRaw: "1",
            externalTxId,
            note: `note for ${externalTxId}`
          }
          const first = yield* post(tenant, "/v1/transactions", body)
          assert.strictEqual(first.status, 202, `${JSON.stringify(externalTxId)}: ${first.text}`)
          const replay = yield* post(tenant, "/v1/transactions", body)
          assert.strictEqual(replay.status, 202, replay.text)
          assert.strictEqual(replay.text, first.text, "section 7 rule 3: the replay is the first answer")
          const found = yield* get(tenant, `/v1/transactions/external_tx_id/${encodeURIComponent(externalTxId)}`)
          assert.strictEqual(found.status, 200, `${JSON.stringify(externalTxId)}: ${found.text}`)
          assert.strictEqual(found.json.id, first.json.transactionId)
          assert.strictEqual(found.json.externalTxId, externalTxId)
          // Rule 8: the same id with another body is a conflict, not a second transfer.
          const reused = yield* post(tenant, "/v1/transactions", { ...body, amountRaw: "2" })
          assert.strictEqual(reused.status, 409, reused.text)
          assert.strictEqual(reused.json.error.code, "IDEMPOTENCY_CONFLICT")
        }
        // Ids differing only where a naive encoding would merge them stay distinct transactions.
        const distinct = new Set<string>()
        for (const externalTxId of ids) {
          distinct.add((yield* get(tenant, `/v1/transactions/external_tx_id/${encodeURIComponent(externalTxId)}`)).json.id)
        }
        assert.strictEqual(distinct.size, ids.length)
        const balances = yield* get(tenant, `/v1/wallets/${payee.walletId}/assets`)
        const eth = (balances.json as Array<{ assetId: string; available: string }>).find((item) => item.assetId === "ETH_SEPOLIA_ETH")
        assert.strictEqual(eth?.available, String(ids.length), "one transfer per id, none twice")

        for (const externalTxId of ["", "x".repeat(129), "😀".repeat(129)]) {
          const refused = yield* post(tenant, "/v1/transactions", {
            assetId: "ETH_SEPOLIA_ETH",
            source: { type: "WALLET", id: payer.walletId },
            destination: { type: "WALLET", id: payee.walletId },
            amountRaw: "1",
            externalTxId
          })
          assert.strictEqual(refused.status, 422, refused.text)
          assert.strictEqual(refused.json.error.code, "BAD_REQUEST")
          assert.strictEqual(refused.json.error.message, "externalTxId must be 1-128 chars")
        }
      }))

    it.effect("by externalTxId (URL-encoded), scoped to the tenant; a pending deposit has no fee or net amount yet", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const bob = yield* walletFor(tenant, "bob")
        const withdrawal = yield* insert(tenant.tenantId, {
          kind: "WITHDRAWAL",
          status: "SUBMITTED",
          assetId: "ETH_SEPOLIA_USDT",
          amount: 5_000_000n,
          fee: 1_000_000n,
          source: bob,
          destination: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" },
          externalTxId: "order 42/a?b",
          createdAt: new Date()
        })
        const found = yield* get(tenant, `/v1/transactions/external_tx_id/${encodeURIComponent("order 42/a?b")}`)
        assert.strictEqual(found.status, 200, found.text)
        assert.strictEqual(found.json.id, withdrawal)
        assert.strictEqual(found.json.externalTxId, "order 42/a?b")
        assert.isNull(found.json.netAmountRaw, "withdrawals have no net amount")
        assert.deepStrictEqual(found.json.destination, {
          walletId: null,
          address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
          customerRefId: null,
          uid: null
        })
        assert.strictEqual(found.json.source.customerRefId, "bob")
        const other = yield* provisionTenant()
        assert.strictEqual((yield* get(other, `/v1/transactions/external_tx_id/${encodeURIComponent("order 42/a?b")}`)).status, 404)
        assert.strictEqual((yield* get(tenant, "/v1/transactions/external_tx_id/unknown")).status, 404)

        const pending = yield* insert(tenant.tenantId, {
          kind: "DEPOSIT",
          status: "CONFIRMING",
          assetId: "ETH_SEPOLIA_ETH",
          amount: 7n,
          destination: bob,
          createdAt: new Date()
        })
        const deposit = (yield* get(tenant, `/v1/transactions/${pending}`)).json
        assert.isNull(deposit.feeRaw)
        assert.isNull(deposit.netAmountRaw)
      }))
  })

  describe("GET /v1/transactions", () => {
    it.effect("filters combine; newest first; nextBefore exactly when the page is full; time bounds [from, to)", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const carol = yield* walletFor(tenant, "carol")
        const dave = yield* walletFor(tenant, "dave")
        const carolTron = yield* walletFor(tenant, "carol", "TRON_NILE")
        const at = (minute: number) => new Date(Date.UTC(2026, 9, 5, 12, minute))
        const ids = {
          depositCarol: yield* insert(tenant.tenantId, {
            kind: "DEPOSIT",
            status: "COMPLETED",
            assetId: "ETH_SEPOLIA_ETH",
            amount: 1n,
            fee: 0n,
            destination: carol,
            createdAt: at(0)
          }),
          transferCarolToDave: yield* insert(tenant.tenantId, {
            kind: "INTERNAL_TRANSFER",
            status: "COMPLETED",
            assetId: "ETH_SEPOLIA_ETH",
            amount: 2n,
            fee: 0n,
            source: carol,
            destination: dave,
            createdAt: at(1)
          }),
          withdrawalDave: yield* insert(tenant.tenantId, {
            kind: "WITHDRAWAL",
            status: "CONFIRMING",
            assetId: "ETH_SEPOLIA_USDT",
            amount: 3n,
            fee: 1n,
            source: dave,
            destination: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" },
            createdAt: at(2)
          }),
          depositCarolTron: yield* insert(tenant.tenantId, {
            kind: "DEPOSIT",
            status: "CONFIRMING",
            assetId: "TRON_NILE_TRX",
            amount: 4n,
            destination: carolTron,
            createdAt: at(3)
          })
        }
        const other = yield* provisionTenant()
        const otherWallet = yield* walletFor(other, "carol")
        yield* insert(other.tenantId, {
          kind: "DEPOSIT",
          status: "COMPLETED",
          assetId: "ETH_SEPOLIA_ETH",
          amount: 9n,
          fee: 0n,
          destination: otherWallet,
          createdAt: at(1)
        })

        const list = (query: string) =>
          Effect.map(get(tenant, `/v1/transactions${query}`), (response) => {
            assert.strictEqual(response.status, 200, response.text)
            return response.json as { items: Array<{ id: string }>; nextBefore: string | null }
          })
        const idsOf = (page: { items: Array<{ id: string }> }) => page.items.map((item) => item.id)

        assert.deepStrictEqual(idsOf(yield* list("")), [
          ids.depositCarolTron,
          ids.withdrawalDave,
          ids.transferCarolToDave,
          ids.depositCarol
        ])
        assert.deepStrictEqual(idsOf(yield* list(`?walletId=${dave.walletId}`)), [ids.withdrawalDave, ids.transferCarolToDave])
        assert.deepStrictEqual(idsOf(yield* list("?customerRefId=carol")), [
          ids.depositCarolTron,
          ids.transferCarolToDave,
          ids.depositCarol
        ])
        assert.deepStrictEqual(idsOf(yield* list("?kind=DEPOSIT&status=COMPLETED")), [ids.depositCarol])
        assert.deepStrictEqual(idsOf(yield* list("?assetId=ETH_SEPOLIA_USDT")), [ids.withdrawalDave])
        assert.deepStrictEqual(
          idsOf(yield* list(`?createdFrom=${encodeURIComponent("2026-10-05T12:01:00Z")}&createdTo=2026-10-05T12:03:00.000Z`)),
          [ids.withdrawalDave, ids.transferCarolToDave]
        )
        assert.deepStrictEqual(idsOf(yield* list(`?createdFrom=${encodeURIComponent("2026-10-05T14:01:00+02:00")}`)), [
          ids.depositCarolTron,
          ids.withdrawalDave,
          ids.transferCarolToDave
        ])

        const first = yield* list("?limit=2")
        assert.deepStrictEqual(idsOf(first), [ids.depositCarolTron, ids.withdrawalDave])
        assert.strictEqual(first.nextBefore, ids.withdrawalDave)
        const second = yield* list(`?limit=2&before=${first.nextBefore}`)
        assert.deepStrictEqual(idsOf(second), [ids.transferCarolToDave, ids.depositCarol])
        assert.strictEqual(second.nextBefore, ids.depositCarol, "a full page has nextBefore even when nothing follows")
        const third = yield* list(`?limit=2&before=${second.nextBefore}`)
        assert.deepStrictEqual(third, { items: [], nextBefore: null })
        assert.isNull((yield* list("?limit=5")).nextBefore)
      }))

    it.effect("query errors: bad times are 422 with the spec's message; bad enums, limits and UUIDs are 400", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const impossible = ["2026-02-30", "2026-04-31", "2026-11-31", "2025-02-29"].map((day) => `?createdFrom=${day}T00:00:00Z`)
        for (
          const query of [
            "?createdFrom=yesterday",
            "?createdTo=2026-10-05",
            "?createdFrom=2026-10-05T12:00:00",
            ...impossible,
            "?createdTo=2026-11-26T24:00:00Z",
            "?createdTo=2026-11-26T12:00:00%2B24:00"
          ]
        ) {
          const response = yield* get(tenant, `/v1/transactions${query}`)
          assert.strictEqual(response.status, 422, query)
          assert.strictEqual(response.json.error.code, "BAD_REQUEST")
          assert.strictEqual(response.json.error.message, "createdFrom/createdTo must be RFC 3339")
        }
        // Valid RFC 3339: any number of fraction digits, an offset, the 29th of February of a leap year.
        for (const query of ["?createdFrom=2026-11-27T00:00:00.1234567890Z", "?createdTo=2028-02-29T23:59:59%2B05:30"]) {
          assert.strictEqual((yield* get(tenant, `/v1/transactions${query}`)).status, 200, query)
        }
        for (const query of ["?kind=REFUND", "?status=DONE", "?limit=0", "?limit=201", "?before=42", "?walletId=x"]) {
          const response = yield* get(tenant, `/v1/transactions${query}`)
          assert.strictEqual(response.status, 400, query)
          assert.strictEqual(response.json.error.code, "BAD_REQUEST")
        }
        assert.strictEqual((yield* get(tenant, "/v1/transactions/not-a-uuid")).status, 400)
      }))
  })
})
