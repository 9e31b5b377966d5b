/**
 * Helpers of the withdrawal test files: calls to the API, funding and settings (from test/support/Funds.ts), balances, the developer chain, polling a withdrawal, its events and ledger entries.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { expectError, fund, settings } from "../support/Funds.ts"
import { opsClient, rawRequest, type TestTenant } from "../support/TestApp.ts"

export { expectError, fund, settings }

export const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method, target, tenant, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })

export const walletOf = (tenant: TestTenant, customerRefId: string, networkKey: string) =>
  Effect.gen(function*() {
    const response = yield* call(tenant, "POST", `/v1/users/${customerRefId}/deposit_address`, { networkKey })
    assert.strictEqual(response.json.status, "READY", response.text)
    return { walletId: response.json.walletId as string, address: response.json.address as string }
  })

export const balance = (tenant: TestTenant, walletId: string, assetId: string) =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/assets`), (response) => {
    const item = (response.json as Array<any>).find((entry) => entry.assetId === assetId)
    return item === undefined ? { available: "0", frozen: "0" } : { available: item.available, frozen: item.frozen }
  })

/** The tenant's own account of a kind (FEES, NETWORK_FEES) for an asset, available balance. */
export const tenantAccount = (tenant: TestTenant, kind: string, assetId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ available: string }>`
      SELECT available::text AS available FROM ledger_accounts
      WHERE tenant_id = ${tenant.tenantId} AND kind = ${kind} AND asset_id = ${assetId}`
    return row?.available ?? "0"
  })

export const mine = (networkKey: string, count = 1) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    return (yield* ops.devnet.mine({ params: { networkKey }, payload: { count } })).height
  }).pipe(Effect.orDie)

export const devnet = (networkKey: string, payload?: { broadcastFails?: boolean; networkFeeRaw?: bigint; hotWalletBalance?: Record<string, bigint> }) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    return payload === undefined
      ? yield* ops.devnet.state({ params: { networkKey } })
      : yield* ops.devnet.configure({ params: { networkKey }, payload })
  }).pipe(Effect.orDie)

export const hotAddress = (networkKey: string) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    const list = yield* ops.platform.addresses()
    return list.find((entry) => entry.networkKey === networkKey && entry.role === "HOT")!.address
  }).pipe(Effect.orDie)

export const getTransaction = (tenant: TestTenant, id: string) =>
  Effect.map(call(tenant, "GET", `/v1/transactions/${id}`), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json
  })

/** Polls until the withdrawal reaches `status` (and `subStatus` when given); the entity works in the background. */
export const waitFor = (tenant: TestTenant, id: string, status: string, subStatus?: string | null) =>
  Effect.gen(function*() {
    let last: any
    for (let attempt = 0; attempt < 150; attempt++) {
      last = yield* getTransaction(tenant, id)
      if (last.status === status && (subStatus === undefined || last.subStatus === subStatus)) return last
      yield* Effect.sleep("100 millis")
    }
    return assert.fail(`withdrawal ${id} stayed ${last.status}/${last.subStatus}, expected ${status}/${subStatus}`)
  })

export const statusEvents = (tenant: TestTenant, id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ event_type: string; data: any }>`
      SELECT event_type, data FROM outbox_events WHERE tenant_id = ${tenant.tenantId} AND subject_id = ${id}
      ORDER BY created_at, id`
    return rows.map((row) => `${row.event_type === "TRANSACTION_CREATED" ? "CREATED" : "UPDATED"}:${row.data.status}/${row.data.subStatus ?? ""}`)
  })

export const signedOf = (id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // `broadcasts` as the withdrawal counts them, `sendBroadcasts` as its send's versions do (OutgoingSends.reserved),
    // `claimsHeld` its versions whose broadcast claim was not given back (sql/0030).
    const [row] = yield* sql<{ signed_raw: string; signed_tx_hash: string; broadcasts: number; sendBroadcasts: number; claimsHeld: number }>`
      SELECT w.signed_raw, w.signed_tx_hash, w.broadcasts,
        (SELECT coalesce(sum(v.broadcasts), 0)::int FROM outgoing_sends s JOIN outgoing_versions v ON v.send_id = s.id
          WHERE s.owner_id = w.transaction_id AND s.purpose = 'WITHDRAWAL') AS "sendBroadcasts",
        (SELECT count(*)::int FROM outgoing_sends s JOIN outgoing_versions v ON v.send_id = s.id
          WHERE s.owner_id = w.transaction_id AND s.purpose = 'WITHDRAWAL' AND v.broadcast_claimed_at IS NOT NULL) AS "claimsHeld"
      FROM withdrawals w WHERE w.transaction_id = ${id}`
    return row!
  })

export const entryCount = (id: string, kind: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_entries WHERE reference_id = ${id} AND kind = ${kind}`
    return row!.n
  })

export const withdraw = (tenant: TestTenant, walletId: string, assetId: string, to: string, amount: bigint, externalTxId: string) =>
  call(tenant, "POST", "/v1/transactions", {
    assetId,
    source: { type: "WALLET", id: walletId },
    destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: to } },
    amountRaw: amount.toString(),
    externalTxId
  })

/** `withdraw`, accepted (202): the withdrawal's id. */
export const withdrawAccepted = (tenant: TestTenant, walletId: string, assetId: string, to: string, amount: bigint, externalTxId: string) =>
  Effect.map(withdraw(tenant, walletId, assetId, to, amount, externalTxId), (created) => {
    assert.strictEqual(created.status, 202, created.text)
    return created.json.withdrawalId as string
  })

