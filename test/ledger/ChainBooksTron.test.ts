/**
 * `ledger:check --chain` on a TRON node (docs/ledger.md "Chain books", compared at a quiet head): the whole service
 * with TRON_NILE on the java-tron HTTP API stand-in (test/support/TronNode.ts, the catalog's USDT hosted), blocks
 * made only when the test asks, and the check run as its own process as an operator would.
 *
 * Held here, every line compared and nothing `not compared`: HOT funded from outside and a user's TRX and USDT
 * deposits (chain ok); TRX and USDT withdrawals from HOT, in a block but not solidified (in flight, named), then
 * COMPLETED (the network fee read from the chain, the new recipient's account creation included); sweeps of both,
 * the USDT one after a GAS top-up (what the sweeps did not burn stays at the address, in the books too); a
 * reorganization that removes a receipt's block; a withdrawal the node forgot, signed again once its expiration is
 * provably past (TRON's replacement, decisions.md: re-signed only after expiry): HOT's books and the node agree while
 * it waits, the renewed version is in flight once in a block, then HOT is charged the included version's fee only and
 * the withdrawal's NETWORK_FEE is that fee; TRX sent from HOT with HOT's key directly on the node: HOT's line
 * is unexplained, exit 1.
 */
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TronWeb } from "tronweb"
import { afterAll } from "vitest"
import { Signer } from "../../src/signer/Signer.ts"
import { platformKey } from "../../src/signer/TransactionRequest.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { networkCalls } from "../support/NetworkCalls.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { startTronNode } from "../support/TronNode.ts"
import { waitFor, withdrawAccepted } from "../withdrawals/WithdrawalHelpers.ts"
import { type CheckRun, runLedgerCheck } from "./LedgerCheck.ts"

const networkKey = "TRON_NILE"
const trx = "TRON_NILE_TRX"
const usdt = "TRON_NILE_USDT"
const usdtContract = "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
const node = await startTronNode({ tokens: [{ contract: usdtContract, supply: 10n ** 15n }] })
afterAll(() => node.stop())
const { depositAddress, operating, pass, scan, sweepsOf } = networkCalls(networkKey)

const timeout = { timeout: 240_000 }
/** Makes blocks, then scans: the books stand at the node's head. */
const mine = (count = 1) =>
  Effect.gen(function*() {
    node.mine(count)
    yield* scan
  })
const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm(networkKey)
})
const recipient = () => TronWeb.address.fromPrivateKey(bytesToHex(secp256k1.utils.randomSecretKey())) as string

const check = () =>
  runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL!, CHAIN_RPC_URLS: JSON.stringify({ [networkKey]: node.url }) }, [
    "--chain"
  ])
const lineOf = (run: CheckRun, assetId: string, address: string) => {
  const found = run.stdout.split("\n").find((line) => line.startsWith(`${networkKey}  ${assetId}  ${address}  `))
  return found ?? assert.fail(`no line for ${assetId} ${address} in:\n${run.stdout}${run.stderr}`)
}
/** Exit 0 with `chain ok`, every line compared at the head and none `not compared`. */
const assertChainOk = (run: CheckRun) => {
  assert.strictEqual(run.code, 0, run.stdout + run.stderr)
  assert.notInclude(run.stdout, "not compared")
  assert.include(run.stdout, `chain books of ${networkKey} at block ${node.head().number} (the node's head, balances now)`)
  assert.match(run.lastLine, /^chain ok: \d+ lines, \d+ in flight$/)
  assert.notInclude(run.stdout + run.stderr, node.url)
}

layer(
  // Sweeps are passed by the test (AUTO_SWEEPS=false), so the withdrawals' lines are HOT's alone.
  makeTestAppLayer({ chainRpcUrls: { [networkKey]: Redacted.make(node.url) }, autoSweeps: false }),
  { excludeTestServices: true, timeout: 240_000 }
)("ledger:check --chain on a TRON node (java-tron HTTP API stand-in)", (it) => {
  let tenant: TestTenant
  let hot: string
  let alice: { walletId: string; address: string }

  it.effect("HOT funded from outside, TRX and USDT deposits credited: chain ok, every line equal", () =>
    Effect.gen(function*() {
      // The watcher starts at the head it first sees: what came before is history.
      yield* scan
      hot = yield* operating("HOT")
      yield* Effect.promise(() => node.fund(hot, 2_000_000_000n))
      yield* Effect.promise(() => node.fund(hot, 1_000_000_000n, usdtContract))
      tenant = yield* provisionTenant()
      alice = yield* depositAddress(tenant, "alice")
      yield* Effect.promise(() => node.fund(alice.address, 500_000_000n))
      yield* Effect.promise(() => node.fund(alice.address, 400_000_000n, usdtContract))
      yield* scan
      // Credited once solidified (19 blocks on top).
      yield* mine(19)
      const run = yield* check()
      assertChainOk(run)
      assert.include(lineOf(run, trx, hot), "  HOT  expected 2000000000  on chain 2000000000  difference 0  ok")
      assert.include(lineOf(run, usdt, hot), "  HOT  expected 1000000000  on chain 1000000000  difference 0  ok")
      assert.include(lineOf(run, trx, alice.address), "  DEPOSIT  expected 500000000  on chain 500000000  difference 0  ok")
      assert.include(lineOf(run, usdt, alice.address), "  DEPOSIT  expected 400000000  on chain 400000000  difference 0  ok")
    }), timeout)

  it.effect("TRX and USDT withdrawals from HOT to new accounts: in flight while not solidified, then equal to the sun", () =>
    Effect.gen(function*() {
      const trxId = yield* withdrawAccepted(tenant, alice.walletId, trx, recipient(), 100_000_000n, "books-tron-trx")
      const usdtId = yield* withdrawAccepted(tenant, alice.walletId, usdt, recipient(), 50_000_000n, "books-tron-usdt")
      yield* waitFor(tenant, trxId, "CONFIRMING")
      yield* waitFor(tenant, usdtId, "CONFIRMING")
      yield* mine(1)
      const inFlight = yield* check()
      assertChainOk(inFlight)
      assert.match(lineOf(inFlight, trx, hot), new RegExp(`  HOT  expected 2000000000  on chain \\d+  difference -\\d+  in flight ` +
        `\\(explained: withdrawal (${trxId}|${usdtId}) \\(send PENDING\\), withdrawal (${trxId}|${usdtId}) \\(send PENDING\\)\\)$`))
      assert.include(lineOf(inFlight, usdt, hot), `  HOT  expected 1000000000  on chain 950000000  difference -50000000  ` +
        `in flight (explained: withdrawal ${usdtId} (send PENDING))`)

      yield* mine(19)
      yield* confirm
      yield* waitFor(tenant, trxId, "COMPLETED", null)
      yield* waitFor(tenant, usdtId, "COMPLETED", null)
      const run = yield* check()
      assertChainOk(run)
      assert.include(lineOf(run, trx, hot), `  HOT  expected ${node.trxBalance(hot)}  on chain ${node.trxBalance(hot)}  difference 0  ok`)
      assert.include(lineOf(run, usdt, hot), "  HOT  expected 950000000  on chain 950000000  difference 0  ok")
    }), timeout)

  it.effect("sweeps of both assets (the USDT one after its GAS top-up): what each left behind is in the books too, chain ok", () =>
    Effect.gen(function*() {
      const gas = yield* operating("GAS", tenant.tenantId)
      yield* Effect.promise(() => node.fund(gas, 100_000_000n))
      yield* scan
      for (let round = 0; round < 4; round++) {
        yield* pass
        yield* mine(20)
        yield* pass
      }
      const rows = yield* sweepsOf(alice.address)
      assert.sameMembers(
        rows.filter((row) => row.status === "COMPLETED").map((row) => `${row.kind} ${row.assetId}`),
        [`SWEEP ${trx}`, `TOP_UP ${trx}`, `SWEEP ${usdt}`],
        JSON.stringify(rows)
      )
      yield* scan
      const run = yield* check()
      assertChainOk(run)
      assert.match(run.lastLine, /^chain ok: \d+ lines, 0 in flight$/)
      assert.include(lineOf(run, usdt, alice.address), "  DEPOSIT  expected 0  on chain 0  difference 0  ok")
      assert.include(lineOf(run, trx, gas), "  GAS  expected ")
    }), timeout)

  it.effect("a reorganization that removes a receipt's block: the receipt goes with it, chain ok", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => node.fund(hot, 3_000_000n))
      yield* scan
      node.reorg(1)
      yield* scan
      assertChainOk(yield* check())
    }), timeout)

  it.effect("a withdrawal the node forgot, signed again once provably expired (TRON's replacement): only the included version leaves HOT, its fee booked, chain ok", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const to = recipient()
      const amount = 20_000_000n
      const hotBefore = node.trxBalance(hot)
      const id = yield* withdrawAccepted(tenant, alice.walletId, trx, to, amount, "books-tron-renewed")
      const first = yield* waitFor(tenant, id, "CONFIRMING")
      // The node restarts without its pool, and the chain moves past the expiration (60 s after the reference
      // block) before anything gives it the bytes again (both calls in one tick): from now on they are refused.
      assert.strictEqual(node.dropPending(), 1)
      node.mine(21)
      yield* scan
      yield* confirm
      const waiting = yield* check()
      assertChainOk(waiting)
      assert.include(lineOf(waiting, trx, hot), `  HOT  expected ${hotBefore}  on chain ${hotBefore}  difference 0  ok`)
      yield* mine(19)
      yield* confirm
      const versions = yield* sql<{ tx_hash: string }>`
        SELECT v.tx_hash FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
        WHERE s.owner_id = ${id} ORDER BY v.version`
      assert.deepStrictEqual(versions.map((version) => version.tx_hash).slice(0, 1), [first.txHash])
      assert.strictEqual(versions.length, 2, "signed again once provably expired")
      yield* mine(1)
      const inFlight = yield* check()
      assertChainOk(inFlight)
      assert.match(lineOf(inFlight, trx, hot), new RegExp(`  HOT  expected ${hotBefore}  on chain \\d+  difference -\\d+  ` +
        `in flight \\(explained: withdrawal ${id} \\(send PENDING\\)\\)$`))

      yield* mine(19)
      yield* confirm
      const done = yield* waitFor(tenant, id, "COMPLETED", null)
      assert.strictEqual(done.txHash, versions[1]!.tx_hash, "the renewed version was included")
      assert.deepStrictEqual(node.transactionInfo(first.txHash), {}, "the expired version is in no block")
      assert.strictEqual(node.trxBalance(to), amount, "paid once")
      const fee = BigInt(done.networkFeeRaw)
      assert.isAbove(Number(fee), 0, "a new account's creation: the fee is never 0 here")
      const [booked] = yield* sql<{ amount: string }>`
        SELECT p.amount::text AS amount FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id
        JOIN ledger_accounts a ON a.id = p.account_id
        WHERE e.kind = 'NETWORK_FEE' AND e.reference_id = ${id} AND a.kind = 'NETWORK_FEES'`
      assert.strictEqual(booked?.amount, (-fee).toString(), "the included version's fee, once")
      const hotAfter = hotBefore - amount - fee
      assert.strictEqual(node.trxBalance(hot), hotAfter)
      const run = yield* check()
      assertChainOk(run)
      assert.include(lineOf(run, trx, hot), `  HOT  expected ${hotAfter}  on chain ${hotAfter}  difference 0  ok`)
      assert.match(run.lastLine, /^chain ok: \d+ lines, 0 in flight$/)
    }), timeout)

  it.effect("TRX sent from HOT with HOT's key directly on the node: HOT's line is unexplained, exit 1", () =>
    Effect.gen(function*() {
      const signer = yield* Signer
      const head = node.head()
      const signed = yield* signer.signTransaction({
        family: "TRON",
        key: platformKey("HOT"),
        to: recipient(),
        amount: 7_000_000n,
        referenceBlock: { number: head.number, id: head.blockID, timestamp: Number(head.timestamp) }
      }).pipe(Effect.orDie)
      const answer = node.broadcastHex(signed.raw)
      assert.isTrue(answer.result, answer.message)
      const hotBefore = node.trxBalance(hot)
      yield* mine(1)
      const spent = hotBefore - node.trxBalance(hot)
      const run = yield* check()
      assert.strictEqual(run.code, 1, run.stdout + run.stderr)
      assert.notInclude(run.stdout, "not compared")
      assert.include(lineOf(run, trx, hot), `  on chain ${node.trxBalance(hot)}  difference -${spent}  UNEXPLAINED`)
      assert.include(lineOf(run, usdt, hot), "difference 0  ok")
      assert.match(run.lastLine, new RegExp(`^chain discrepancy: 1 unexplained difference, first ${networkKey}  ${trx}  ${hot}  HOT`))
    }), timeout)
})
