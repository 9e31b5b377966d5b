/**
 * Arrange and assert steps shared by the tests of money movements (transfers, withdrawals): funding a wallet through
 * the ledger, tenant settings through the operator interface, and the spec's error envelope.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { opsClient, type RawResponse, rawRequest, type TestTenant } from "./TestApp.ts"

/** Funds a wallet as a credited deposit would (CHAIN to WALLET), through the ledger's one door. */
export const fund = (tenant: TestTenant, walletId: string, assetId: string, amount: bigint) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger
    yield* ledger.post({
      tenantId: tenant.tenantId,
      kind: "DEPOSIT_CREDIT",
      referenceId: yield* uuidV7,
      postings: [
        { account: { kind: "CHAIN" }, assetId, bucket: "AVAILABLE", amount: -amount },
        { account: { kind: "WALLET", walletId }, assetId, bucket: "AVAILABLE", amount }
      ]
    })
  })

export const settings = (tenant: TestTenant, value: Record<string, unknown>) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    yield* ops.tenants.update({ params: { tenantId: tenant.tenantId }, payload: { settings: value } })
  }).pipe(Effect.orDie)

export const expectError = (response: RawResponse, status: number, code: string, message?: string) => {
  assert.strictEqual(response.status, status, response.text)
  assert.strictEqual(response.json.error.code, code, response.text)
  if (message !== undefined) assert.strictEqual(response.json.error.message, message)
}

/** A signed request of the tenant, the body as JSON. */
export const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  rawRequest({ baseUrl: tenant.baseUrl, method, target, tenant, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })

/** The user's ETH_SEPOLIA wallet (made by deposit_address), READY. */
export const ethWalletOf = (tenant: TestTenant, customerRefId: string) =>
  Effect.gen(function*() {
    const response = yield* call(tenant, "POST", `/v1/users/${customerRefId}/deposit_address`, { networkKey: "ETH_SEPOLIA" })
    assert.strictEqual(response.json.status, "READY", response.text)
    return response.json.walletId as string
  })
