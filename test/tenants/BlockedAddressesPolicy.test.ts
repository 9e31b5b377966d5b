/**
 * A tenant's `blockedAddresses` through the interfaces (operator-interface.md, "Tenant settings": an internal
 * transfer to one answers 403 `BLOCKED_BY_POLICY`, an on-chain withdrawal to one ends `REJECTED`; decisions.md
 * "Withdrawal life cycle": REJECTED returns the frozen funds). Entries are matched as addresses, not text: the
 * operator's EIP-55 or `41…` hex spelling blocks the address the service normalizes to lowercase or base58. Entries
 * that are no address are refused when saved. The matching rule alone: test/tenants/BlockedAddresses.test.ts.
 */
import { assert, describe, layer } from "@effect/vitest"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { createBase58check } from "@scure/base"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { getAddress } from "viem"
import { makeTestAppLayer, opsRequest, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import {
  balance,
  call,
  expectError,
  fund,
  settings,
  signedOf,
  statusEvents,
  waitFor,
  walletOf,
  withdraw
} from "../withdrawals/WithdrawalHelpers.ts"

/** The `41…` hex form of a base58 TRON address, computed apart from the service's own TronAddress.ts. */
const tronHexOf = (base58Address: string) => bytesToHex(createBase58check(sha256).decode(base58Address))

const ops = opsRequest

const transfer = (tenant: TestTenant, body: Record<string, unknown>) => call(tenant, "POST", "/v1/transactions", body)

const transactionCount = (tenant: TestTenant) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM transactions WHERE tenant_id = ${tenant.tenantId}`
    return row!.n
  })

/**
 * A withdrawal to `destination` accepted (202 SUBMITTED), then ended by the tenant's policy: REJECTED /
 * BLOCKED_BY_POLICY, the payer's `funded` all available again, never signed.
 */
const expectWithdrawalBlocked = (
  tenant: TestTenant,
  payer: { readonly walletId: string },
  assetId: string,
  destination: string,
  amount: bigint,
  funded: bigint
) =>
  Effect.gen(function*() {
    const response = yield* withdraw(tenant, payer.walletId, assetId, destination, amount, `blocked-${assetId}`)
    assert.strictEqual(response.status, 202, response.text)
    assert.strictEqual(response.json.status, "SUBMITTED")
    const id = response.json.transactionId as string
    yield* waitFor(tenant, id, "REJECTED", "BLOCKED_BY_POLICY")
    assert.deepStrictEqual(yield* balance(tenant, payer.walletId, assetId), { available: funded.toString(), frozen: "0" })
    assert.deepStrictEqual(yield* statusEvents(tenant, id), ["CREATED:SUBMITTED/", "UPDATED:REJECTED/BLOCKED_BY_POLICY"])
    assert.isUndefined((yield* signedOf(id)).signed_raw ?? undefined)
  })

const eth = "ETH_SEPOLIA_ETH"
const trx = "TRON_NILE_TRX"
// An external EVM address as the service stores it (lowercase), and an external TRON one (base58).
const ethTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
const tronTo = "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"

layer(makeTestAppLayer(), { excludeTestServices: true })("blockedAddresses match addresses, not text", (it) => {
  describe("on-chain withdrawals end REJECTED / BLOCKED_BY_POLICY, funds released", () => {
    it.effect("EVM: an EIP-55 entry blocks the lowercase destination", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const entry = getAddress(ethTo)
        assert.notStrictEqual(entry, ethTo)
        yield* settings(tenant, { blockedAddresses: [entry] })
        const payer = yield* walletOf(tenant, "ann", "ETH_SEPOLIA")
        yield* fund(tenant, payer.walletId, eth, 10n ** 18n)
        yield* expectWithdrawalBlocked(tenant, payer, eth, ethTo, 10n ** 16n, 10n ** 18n)
      }))

    it.effect("TRON: a 41-hex entry blocks the base58 destination", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const entry = tronHexOf(tronTo)
        assert.match(entry, /^41[0-9a-f]{40}$/)
        yield* settings(tenant, { blockedAddresses: [entry] })
        const payer = yield* walletOf(tenant, "ben", "TRON_NILE")
        yield* fund(tenant, payer.walletId, trx, 10n ** 9n)
        yield* expectWithdrawalBlocked(tenant, payer, trx, tronTo, 20_000_000n, 10n ** 9n)
      }))
  })

  describe("internal transfers answer 403 BLOCKED_BY_POLICY, nothing moves", () => {
    it.effect("EVM: an EIP-55 entry blocks the recipient wallet's lowercase address, by WALLET and by ONE_TIME_ADDRESS", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "cat", "ETH_SEPOLIA")
        const payee = yield* walletOf(tenant, "dan", "ETH_SEPOLIA")
        assert.strictEqual(payee.address, payee.address.toLowerCase())
        yield* fund(tenant, payer.walletId, eth, 1_000n)
        yield* settings(tenant, { blockedAddresses: [getAddress(payee.address)] })
        const base = { assetId: eth, source: { type: "WALLET", id: payer.walletId }, amountRaw: "100" }
        expectError(
          yield* transfer(tenant, { ...base, destination: { type: "WALLET", id: payee.walletId }, externalTxId: "t-1" }),
          403,
          "BLOCKED_BY_POLICY"
        )
        expectError(
          yield* transfer(tenant, {
            ...base,
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: getAddress(payee.address) } },
            externalTxId: "t-2"
          }),
          403,
          "BLOCKED_BY_POLICY"
        )
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), { available: "1000", frozen: "0" })
        assert.deepStrictEqual(yield* balance(tenant, payee.walletId, eth), { available: "0", frozen: "0" })
        assert.strictEqual(yield* transactionCount(tenant), 0)
      }))

    it.effect("TRON: a 41-hex entry blocks the recipient wallet's base58 address", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "eve", "TRON_NILE")
        const payee = yield* walletOf(tenant, "fox", "TRON_NILE")
        assert.match(payee.address, /^T/)
        yield* fund(tenant, payer.walletId, trx, 1_000n)
        yield* settings(tenant, { blockedAddresses: [tronHexOf(payee.address).toUpperCase()] })
        expectError(
          yield* transfer(tenant, {
            assetId: trx,
            source: { type: "WALLET", id: payer.walletId },
            destination: { type: "WALLET", id: payee.walletId },
            amountRaw: "100",
            externalTxId: "t-3"
          }),
          403,
          "BLOCKED_BY_POLICY"
        )
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, trx), { available: "1000", frozen: "0" })
        assert.strictEqual(yield* transactionCount(tenant), 0)
      }))
  })

  describe("saving: PATCH /ops/tenants/{tenantId} settings.blockedAddresses", () => {
    it.effect("an entry that is no EVM, TRON, BTC or SOL address is 422 BAD_REQUEST naming it; nothing is stored", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const path = `/ops/tenants/${tenant.tenantId}`
        const kept = { blockedAddresses: [getAddress(ethTo)] }
        const saved = yield* ops("PATCH", path, { settings: kept })
        assert.strictEqual(saved.status, 200, saved.text)
        // Stored as written (docs/decisions.md, "Tenant settings").
        assert.deepStrictEqual(saved.json.settings, kept)
        const refused: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
          [[tronTo, "not-an-address"], "blockedAddresses[1] \"not-an-address\""],
          // A mixed-case EVM address whose EIP-55 checksum is wrong is a typo, not an address.
          [["0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed"], "blockedAddresses[0] \"0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed\""],
          [[` ${ethTo}`], `blockedAddresses[0] " ${ethTo}"`]
        ]
        for (const [entries, named] of refused) {
          expectError(
            yield* ops("PATCH", path, { settings: { blockedAddresses: entries, walletsPerFamily: 2 } }),
            422,
            "BAD_REQUEST",
            `invalid settings: ${named} is not a valid EVM, TRON, BTC or SOL address`
          )
        }
        const after = yield* ops("GET", path)
        assert.deepStrictEqual(after.json.settings, kept)
      }))

    it.effect("a list saved before the check still lets the operator change other settings, and its entries still block", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const legacy = ["legacy note, not an address", getAddress(ethTo)]
        yield* sql`UPDATE tenants SET settings = ${JSON.stringify({ blockedAddresses: legacy })}::jsonb
          WHERE id = ${tenant.tenantId}`
        const patched = yield* ops("PATCH", `/ops/tenants/${tenant.tenantId}`, { settings: { walletsPerFamily: 3 } })
        assert.strictEqual(patched.status, 200, patched.text)
        assert.deepStrictEqual(patched.json.settings, { blockedAddresses: legacy, walletsPerFamily: 3 })
        const payer = yield* walletOf(tenant, "gus", "ETH_SEPOLIA")
        yield* fund(tenant, payer.walletId, eth, 10n ** 18n)
        yield* expectWithdrawalBlocked(tenant, payer, eth, ethTo, 10n ** 16n, 10n ** 18n)
      }))
  })
})
