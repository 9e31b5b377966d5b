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

/**
 * `count` internal transfers of `amountRaw` from `payer` to `payee` submitted at once (externalTxId `<prefix>-<i>`):
 * the responses, in submission order.
 */
export const transfersAtOnce = (
  tenant: TestTenant,
  transfer: { readonly assetId: string; readonly payer: string; readonly payee: string; readonly amountRaw: string },
  count: number,
  externalTxIdPrefix: string
) =>
  Effect.all(
    Array.from({ length: count }, (_, index) =>
      call(tenant, "POST", "/v1/transactions", {
        assetId: transfer.assetId,
        source: { type: "WALLET", id: transfer.payer },
        destination: { type: "WALLET", id: transfer.payee },
        amountRaw: transfer.amountRaw,
        externalTxId: `${externalTxIdPrefix}-${index}`
      })),
    { concurrency: "unbounded" }
  )

/**
 * The fees /v1/supported_assets shows the tenant for an asset now (spec section 2, fee rules 1-3): what a deposit is
 * credited net of and a withdrawal is charged. With the dynamic floor (fee rule 3) these follow the network's cost,
 * so tests of crediting read them rather than assume the catalog's static floors.
 */
export const assetFees = (tenant: TestTenant, assetId: string) =>
  Effect.gen(function*() {
    const response = yield* call(tenant, "GET", "/v1/supported_assets")
    assert.strictEqual(response.status, 200, response.text)
    const asset = (response.json as Array<{ assetId: string; depositFeeRaw: string; withdrawFeeRaw: string }>)
      .find((entry) => entry.assetId === assetId)
    assert.isDefined(asset, `asset ${assetId} is not listed`)
    return { deposit: BigInt(asset!.depositFeeRaw), withdraw: BigInt(asset!.withdrawFeeRaw) }
  })
