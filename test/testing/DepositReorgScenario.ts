/**
 * Worked scenario 3 (docs/scenarios.md) as a program over the kit, shared by its test and the determinism test: a
 * deposit on BSC_TESTNET is credited after 15 blocks, then a 15-block reorganization removes it.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { Scenario } from "../../src/testing/index.ts"

export const depositReorgScenario = Effect.gen(function*() {
  const scenario = yield* Scenario
  const tenant = yield* scenario.newTenant()
  const receiver = yield* scenario.webhookReceiver
  yield* tenant.request("POST", "/v1/webhooks", { url: receiver.url })
  const address = yield* tenant.request("POST", "/v1/users/erin/deposit_address", { networkKey: "BSC_TESTNET" })
  assert.strictEqual(address.json?.status, "READY", address.text)
  const walletId: string = address.json.walletId
  const amount = 10n ** 17n
  yield* scenario.chain.transfer("BSC_TESTNET", { to: address.json.address, assetId: "BSC_TESTNET_BNB", amountRaw: amount })
  yield* scenario.chain.mine("BSC_TESTNET", 15)
  yield* scenario.advance("1 minute")
  const credited = (yield* tenant.request("GET", "/v1/transactions?kind=DEPOSIT")).json.items[0]
  assert.strictEqual(credited.status, "COMPLETED")
  const creditedBalance = yield* scenario.checks.balances(tenant.tenantId)
  assert.deepStrictEqual(creditedBalance.map((row) => [row.walletId, row.assetId, row.available, row.frozen]), [
    [walletId, "BSC_TESTNET_BNB", BigInt(credited.netAmountRaw), 0n]
  ])

  yield* scenario.chain.reorg("BSC_TESTNET", 15)
  yield* scenario.advance("1 minute")
  const reversed = (yield* tenant.request("GET", "/v1/transactions?kind=DEPOSIT")).json.items[0]
  assert.strictEqual(reversed.id, credited.id)
  assert.strictEqual(reversed.status, "REVERSED")
  const after = yield* scenario.checks.balances(tenant.tenantId)
  assert.deepStrictEqual(after.map((row) => [row.assetId, row.available, row.frozen]), [["BSC_TESTNET_BNB", 0n, 0n]])
  yield* scenario.checks.ledgerAudit
  yield* scenario.checks.eventInvariants
  return { tenant, receiver, depositId: credited.id as string, walletId }
})
