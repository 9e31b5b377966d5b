/**
 * Sweeps and GAS top-ups on TRON (docs/sweeps.md, docs/tron.md; decisions.md "Operating wallets, sweeps, gas and fee
 * floors"): the whole service with TRON_NILE on the java-tron HTTP API stand-in (test/support/TronNode.ts), the
 * catalog's USDT hosted at its Nile address. Blocks are made by the test; deposits are scanned and sweeps passed
 * explicitly (the background loops may run too: passes of a network never overlap, and every step is idempotent).
 *
 * TRON's fee is known only once a transaction is included (the free bandwidth may pay it, the energy burned is
 * what the call used): a TRX sweep keeps back the most it can burn, and a token sweep's top-up is the most the sweep
 * can burn (fee_limit + bandwidth) minus what the address holds; what is not burned stays at the address.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { afterAll } from "vitest"
import { Sweeps } from "../../src/sweeps/Sweeps.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import { startTronNode, tronParameters } from "../support/TronNode.ts"
import { networkCalls } from "../support/NetworkCalls.ts"

const networkKey = "TRON_NILE"
const { scan, pass, depositAddress, sweepsOf, operating, tenantView } = networkCalls(networkKey)
const trx = "TRON_NILE_TRX"
const usdt = "TRON_NILE_USDT"
const usdtContract = "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
const node = await startTronNode({ tokens: [{ contract: usdtContract, supply: 10n ** 15n }] })
afterAll(() => node.stop())

/** The block that includes what the last pass sent, 19 more until it is solidified, and a pass that sees it final. */
const solidifyAndPass = Effect.gen(function*() {
  node.mine(1)
  node.mine(19)
  yield* pass
})

/** Pays TRX or USDT to `to` and credits it: its block solidified (19 blocks on top), scanned. */
const depositAndCredit = (to: string, assetId: string, amount: bigint) =>
  Effect.gen(function*() {
    yield* Effect.promise(() => node.fund(to, amount, assetId === usdt ? usdtContract : undefined))
    yield* scan
    node.mine(19)
    yield* scan
  })

const feeOf = (txHash: string) => (node.transactionInfo(txHash).fee as bigint | undefined) ?? 0n

layer(
  makeTestAppLayer({ chainRpcUrls: { TRON_NILE: Redacted.make(node.url) } }),
  { excludeTestServices: true }
)("sweeps on TRON (java-tron HTTP API stand-in)", (it) => {
  it.effect("setup: TRON_NILE sweeps (a real node that sends)", () =>
    Effect.gen(function*() {
      yield* scan
      const sweeps = yield* Sweeps
      assert.deepStrictEqual(sweeps.networkKeys, [networkKey])
    }))

  it.effect("TRX deposits, once credited, are swept to HOT: the balance less the most the transfer can burn; the fee read from the chain; user view unchanged", () =>
    Effect.gen(function*() {
      const hot = yield* operating("HOT")
      const sweepTrx = (customerRefId: string, deposited: bigint) =>
        Effect.gen(function*() {
          const tenant = yield* provisionTenant()
          const { address, walletId } = yield* depositAddress(tenant, customerRefId)
          yield* depositAndCredit(address, trx, deposited)
          const before = yield* tenantView(tenant, walletId)
          const hotBefore = node.trxBalance(hot)
          yield* pass
          const [signed] = yield* sweepsOf(address)
          assert.deepInclude(signed, { kind: "SWEEP", assetId: trx, from: address, to: hot, status: "CONFIRMING" })
          yield* solidifyAndPass
          const [sweep] = yield* sweepsOf(address)
          assert.strictEqual(sweep!.status, "COMPLETED")
          assert.strictEqual(BigInt(sweep!.networkFeeRaw!), feeOf(sweep!.txHash!))
          assert.strictEqual(node.trxBalance(hot) - hotBefore, BigInt(sweep!.amountRaw))
          assert.deepStrictEqual(yield* tenantView(tenant, walletId), before, "sweeps never touch user balances or /v1/transactions")
          return { address, keptBack: deposited - BigInt(sweep!.amountRaw), fee: BigInt(sweep!.networkFeeRaw!) }
        })

      // HOT has no account yet: the sweep creates it (0.1 TRX instead of bandwidth, and 1 TRX), exactly what was kept.
      const creating = yield* sweepTrx("alice", 50_000_007n)
      const accountFee = tronParameters.createAccountFee + tronParameters.createNewAccountFeeInSystemContract
      assert.strictEqual(creating.keptBack, accountFee)
      assert.strictEqual(creating.fee, accountFee)
      assert.strictEqual(node.trxBalance(creating.address), 0n)

      // HOT exists now: 300 bytes of bandwidth are kept back; the address's free bandwidth paid the bytes, so they
      // stay at the address for its next sweep.
      const plain = yield* sweepTrx("bob", 40_000_000n)
      assert.strictEqual(plain.keptBack, 300n * tronParameters.transactionFee)
      assert.strictEqual(plain.fee, 0n)
      assert.strictEqual(node.trxBalance(plain.address), plain.keptBack)
    }))

  it.effect("a USDT deposit: the tenant's GAS wallet sends the top-up first (creating the address's account), the token sweep follows once it is solidified", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const gas = yield* operating("GAS", tenant.tenantId)
      yield* Effect.promise(() => node.fund(gas, 100_000_000n))
      const { address, walletId } = yield* depositAddress(tenant, "carol")
      // Above the threshold: 10 × (the sweep's most + its top-up's) in USDT at the catalog prices.
      const deposited = 100_000_000n
      yield* depositAndCredit(address, usdt, deposited)
      assert.strictEqual(node.trxBalance(address), 0n, "a USDT-only address has no TRX (no account)")
      const before = yield* tenantView(tenant, walletId)
      const hot = yield* operating("HOT")
      const hotUsdtBefore = node.tokenBalance(usdtContract, hot)
      const gasBefore = node.trxBalance(gas)

      yield* pass
      let rows = yield* sweepsOf(address)
      const topUp = rows.find((row) => row.kind === "TOP_UP")!
      const sweep = rows.find((row) => row.kind === "SWEEP")!
      assert.deepInclude(topUp, { from: gas, to: address, assetId: trx, status: "CONFIRMING" })
      assert.deepInclude(sweep, { from: address, to: hot, assetId: usdt, amountRaw: deposited.toString(), status: "PENDING" })
      assert.isNull(sweep.txHash, "the token sweep is not signed before its top-up is final")

      yield* solidifyAndPass
      rows = yield* sweepsOf(address)
      const toppedUp = rows.find((row) => row.kind === "TOP_UP")!
      assert.strictEqual(toppedUp.status, "COMPLETED")
      // Creating the address's account: 0.1 TRX instead of bandwidth and 1 TRX.
      assert.strictEqual(BigInt(toppedUp.networkFeeRaw!), tronParameters.createAccountFee + tronParameters.createNewAccountFeeInSystemContract)
      assert.strictEqual(gasBefore - node.trxBalance(gas), BigInt(toppedUp.amountRaw) + BigInt(toppedUp.networkFeeRaw!))
      assert.strictEqual(rows.find((row) => row.kind === "SWEEP")!.status, "CONFIRMING")

      yield* solidifyAndPass
      rows = yield* sweepsOf(address)
      const swept = rows.find((row) => row.kind === "SWEEP")!
      assert.strictEqual(swept.status, "COMPLETED")
      assert.strictEqual((node.transactionInfo(swept.txHash!).receipt as { result?: string }).result, "SUCCESS")
      assert.strictEqual(BigInt(swept.networkFeeRaw!), feeOf(swept.txHash!))
      assert.strictEqual(node.tokenBalance(usdtContract, address), 0n)
      assert.strictEqual(node.tokenBalance(usdtContract, hot) - hotUsdtBefore, deposited)
      // What the sweep did not burn of its top-up stays at the address (and lowers its next top-up).
      assert.strictEqual(node.trxBalance(address), BigInt(toppedUp.amountRaw) - BigInt(swept.networkFeeRaw!))
      // The top-up paid TRX to the user's deposit address: the watcher has seen its block, and it is no deposit.
      yield* scan
      assert.deepStrictEqual(yield* tenantView(tenant, walletId), before)
    }))
})
