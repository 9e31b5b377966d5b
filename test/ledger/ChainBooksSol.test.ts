/**
 * `ledger:check --chain` on a Solana node interface (docs/ledger.md "Chain books", compared at a quiet head): the
 * whole service with SOL_DEVNET on the JSON-RPC front over litesvm (test/support/SolanaRpcFront.ts: each transaction
 * closes a block of its own, `finalized` is the head minus 31), and the check run as its own process as an operator
 * would.
 *
 * Held here, every line compared and nothing `not compared`: HOT funded from outside and a user's SOL and USDC
 * deposits (chain ok); SOL and USDC withdrawals from HOT (to a recipient that has a token account), in flight
 * until final, then equal; sweeps of both, the USDC one paid for by the tenant's GAS wallet as fee payer (its fee is
 * GAS's in the books, read from the signed bytes, not the deposit address's); a reorganization that removes a
 * receipt's block; a USDC withdrawal to a wallet without a token account, where HOT pays the account's rent
 * (2,039,280 lamports) beside `meta.fee`: recorded on the send (`account_cost`) and taken from HOT by the books,
 * chain ok; a SOL withdrawal no leader took, signed again on a fresh blockhash once the first one provably expired
 * (SOL's replacement, decisions.md: re-signed only after expiry): HOT's books and the node agree while it waits, the
 * new version is in flight once in a block, then HOT is charged the included version's fee only and the
 * withdrawal's NETWORK_FEE is that fee; SOL sent from HOT with HOT's key directly on the node: exit 1.
 *
 * Not here, by design: top-ups. SOL has none (decisions.md "Operating wallets, sweeps, gas and fee floors": the
 * tenant's GAS wallet is an SPL sweep's fee payer instead); that payer's fee is held above (the USDC sweep).
 */
import { assert, layer } from "@effect/vitest"
import { Connection, Keypair } from "@solana/web3.js"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { platformKey } from "../../src/signer/TransactionRequest.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { freePortSync } from "../support/AnvilBinary.ts"
import { networkCalls } from "../support/NetworkCalls.ts"
import { blockhashValidBlocks, finalityDepth, type SolanaRpcFront, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { waitFor, withdrawAccepted } from "../withdrawals/WithdrawalHelpers.ts"
import { type CheckRun, runLedgerCheck } from "./LedgerCheck.ts"

const networkKey = "SOL_DEVNET"
const sol = "SOL_DEVNET_SOL"
const usdc = "SOL_DEVNET_USDC"
const port = freePortSync()
const url = `http://127.0.0.1:${port}`
let front: SolanaRpcFront
let mint: string
beforeAll(async () => {
  front = await startSolanaRpcFront({ port })
})
afterAll(() => front.close())
const { depositAddress, operating, pass, scan, sweepsOf } = networkCalls(networkKey)

const timeout = { timeout: 240_000 }
/** Makes blocks, then scans: the books stand at the node's head. */
const mine = (count = 1) =>
  Effect.gen(function*() {
    front.mine(count)
    yield* scan
  })
const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm(networkKey)
})
const recipient = () => Keypair.generate().publicKey.toBase58()
const tokenAccountRent = 2_039_280n

const check = () =>
  runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL!, CHAIN_RPC_URLS: JSON.stringify({ [networkKey]: url }) }, ["--chain"])
const lineOf = (run: CheckRun, assetId: string, address: string) => {
  const found = run.stdout.split("\n").find((line) => line.startsWith(`${networkKey}  ${assetId}  ${address}  `))
  return found ?? assert.fail(`no line for ${assetId} ${address} in:\n${run.stdout}${run.stderr}`)
}
/** Exit 0 with `chain ok`, every line compared at the head and none `not compared`. */
const assertChainOk = (run: CheckRun) => {
  assert.strictEqual(run.code, 0, run.stdout + run.stderr)
  assert.notInclude(run.stdout, "not compared")
  assert.include(run.stdout, `chain books of ${networkKey} at block ${front.headHeight()} (the node's head, balances now)`)
  assert.match(run.lastLine, /^chain ok: \d+ lines, \d+ in flight$/)
}

layer(
  // Sweeps are passed by the test (AUTO_SWEEPS=false), so the withdrawals' lines are HOT's alone.
  makeTestAppLayer({ chainRpcUrls: { [networkKey]: Redacted.make(url) }, autoSweeps: false }),
  { excludeTestServices: true, timeout: 240_000 }
)("ledger:check --chain on a Solana node interface (litesvm behind a JSON-RPC front)", (it) => {
  let tenant: TestTenant
  let hot: string
  let alice: { walletId: string; address: string }

  it.effect("HOT funded from outside, SOL and USDC deposits credited: chain ok, every line equal", () =>
    Effect.gen(function*() {
      mint = (yield* Catalog).asset(usdc)!.contract!
      front.createMint(mint, 6)
      // The watcher starts at the head it first sees: what came before is history.
      yield* mine(1)
      hot = yield* operating("HOT")
      front.paySol(hot, 100_000_000_000n)
      front.payToken(hot, mint, 1_000_000_000n)
      tenant = yield* provisionTenant()
      alice = yield* depositAddress(tenant, "alice")
      front.paySol(alice.address, 3_000_000_000n)
      front.payToken(alice.address, mint, 500_000_000n)
      yield* scan
      yield* mine(finalityDepth + 1)
      const run = yield* check()
      assertChainOk(run)
      assert.include(lineOf(run, sol, hot), "  HOT  expected 100000000000  on chain 100000000000  difference 0  ok")
      assert.include(lineOf(run, usdc, hot), "  HOT  expected 1000000000  on chain 1000000000  difference 0  ok")
      assert.include(lineOf(run, sol, alice.address), "  DEPOSIT  expected 3000000000  on chain 3000000000  difference 0  ok")
      assert.include(lineOf(run, usdc, alice.address), "  DEPOSIT  expected 500000000  on chain 500000000  difference 0  ok")
    }), timeout)

  it.effect("SOL and USDC withdrawals from HOT: in flight until final, then equal to the lamport", () =>
    Effect.gen(function*() {
      const to = recipient()
      // The recipient has a token account already (paid from outside): the withdrawal creates none.
      front.payToken(to, mint, 1n)
      const solId = yield* withdrawAccepted(tenant, alice.walletId, sol, to, 250_000_000n, "books-sol-sol")
      const usdcId = yield* withdrawAccepted(tenant, alice.walletId, usdc, to, 40_000_000n, "books-sol-usdc")
      yield* waitFor(tenant, solId, "CONFIRMING")
      yield* waitFor(tenant, usdcId, "CONFIRMING")
      // Each landed in a block of its own on arrival.
      yield* scan
      const inFlight = yield* check()
      assertChainOk(inFlight)
      assert.include(lineOf(inFlight, usdc, hot), `  HOT  expected 1000000000  on chain 960000000  difference -40000000  ` +
        `in flight (explained: withdrawal ${usdcId} (send PENDING))`)

      yield* mine(finalityDepth + 1)
      yield* confirm
      yield* waitFor(tenant, solId, "COMPLETED", null)
      yield* waitFor(tenant, usdcId, "COMPLETED", null)
      const run = yield* check()
      assertChainOk(run)
      assert.include(lineOf(run, sol, hot), `  HOT  expected ${front.lamports(hot)}  on chain ${front.lamports(hot)}  difference 0  ok`)
      assert.include(lineOf(run, usdc, hot), "  HOT  expected 960000000  on chain 960000000  difference 0  ok")
    }), timeout)

  it.effect("sweeps of both assets, the USDC one's fee paid by the tenant's GAS wallet: chain ok, GAS charged its fee", () =>
    Effect.gen(function*() {
      const gas = yield* operating("GAS", tenant.tenantId)
      front.paySol(gas, 1_000_000_000n)
      yield* scan
      for (let round = 0; round < 3; round++) {
        yield* pass
        yield* mine(finalityDepth + 1)
        yield* pass
      }
      const rows = yield* sweepsOf(alice.address)
      assert.sameMembers(
        rows.filter((row) => row.status === "COMPLETED").map((row) => `${row.kind} ${row.assetId}`),
        [`SWEEP ${sol}`, `SWEEP ${usdc}`],
        JSON.stringify(rows)
      )
      const usdcSweep = rows.find((row) => row.assetId === usdc)!
      yield* scan
      const run = yield* check()
      assertChainOk(run)
      assert.match(run.lastLine, /^chain ok: \d+ lines, 0 in flight$/)
      assert.include(lineOf(run, sol, alice.address), "  DEPOSIT  expected 0  on chain 0  difference 0  ok")
      assert.include(lineOf(run, usdc, alice.address), "  DEPOSIT  expected 0  on chain 0  difference 0  ok")
      const gasHolds = 1_000_000_000n - BigInt(usdcSweep.networkFeeRaw!)
      assert.strictEqual(front.lamports(gas), gasHolds)
      assert.strictEqual(lineOf(run, sol, gas), `${networkKey}  ${sol}  ${gas}  GAS  expected ${gasHolds}  on chain ${gasHolds}  difference 0  ok`)
    }), timeout)

  it.effect("a reorganization that removes a receipt's block: the receipt goes with it, chain ok", () =>
    Effect.gen(function*() {
      front.paySol(hot, 3_000_000n)
      yield* scan
      front.reorg(1)
      yield* scan
      assertChainOk(yield* check())
    }), timeout)

  it.effect("a USDC withdrawal that creates the recipient's token account: HOT pays fee and rent, both in the books, chain ok", () =>
    Effect.gen(function*() {
      const before = front.lamports(hot)
      const id = yield* withdrawAccepted(tenant, alice.walletId, usdc, recipient(), 30_000_000n, "books-sol-rent")
      yield* waitFor(tenant, id, "CONFIRMING")
      yield* mine(finalityDepth + 1)
      yield* confirm
      yield* waitFor(tenant, id, "COMPLETED", null)
      // The case is the one meant: HOT paid one signature's fee and the new account's rent-exempt minimum.
      assert.strictEqual(before - front.lamports(hot), 5_000n + tokenAccountRent)
      const run = yield* check()
      assertChainOk(run)
      assert.include(lineOf(run, sol, hot), `  HOT  expected ${front.lamports(hot)}  on chain ${front.lamports(hot)}  difference 0  ok`)
      assert.include(lineOf(run, usdc, hot), "difference 0  ok")
    }), timeout)

  it.effect("a withdrawal never taken by a leader, signed again once its blockhash expired (SOL's replacement): only the included version leaves HOT, its fee booked, chain ok", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const to = recipient()
      const amount = 100_000_000n
      const before = front.lamports(hot)
      front.setDropping(true)
      const id = yield* withdrawAccepted(tenant, alice.walletId, sol, to, amount, "books-sol-renewed")
      const first = yield* waitFor(tenant, id, "CONFIRMING")
      // 150 blocks on: the blockhash is still valid in the head's bank, so it is not signed again yet; nothing left
      // HOT, in the books or on the node.
      yield* mine(blockhashValidBlocks)
      yield* confirm
      const waiting = yield* check()
      assertChainOk(waiting)
      assert.include(lineOf(waiting, sol, hot), `  HOT  expected ${before}  on chain ${before}  difference 0  ok`)
      // Past lastValidBlockHeight in the finalized bank too: no block can take the first bytes any more.
      front.mine(finalityDepth + 1)
      front.setDropping(false)
      yield* scan
      yield* confirm
      const versions = yield* sql<{ tx_hash: string }>`
        SELECT v.tx_hash FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
        WHERE s.owner_id = ${id} ORDER BY v.version`
      assert.deepStrictEqual(versions.map((version) => version.tx_hash).slice(0, 1), [first.txHash])
      assert.strictEqual(versions.length, 2, "signed again once expired")
      // The new version landed in a block of its own on arrival: in flight until final.
      yield* scan
      const inFlight = yield* check()
      assertChainOk(inFlight)
      assert.include(lineOf(inFlight, sol, hot), `  HOT  expected ${before}  on chain ${before - amount - 5_000n}  ` +
        `difference -${amount + 5_000n}  in flight (explained: withdrawal ${id} (send PENDING))`)

      yield* mine(finalityDepth + 1)
      yield* confirm
      const done = yield* waitFor(tenant, id, "COMPLETED", null)
      assert.strictEqual(done.txHash, versions[1]!.tx_hash, "the renewed version was included")
      assert.isUndefined(front.blockOf(first.txHash), "the expired version is in no block")
      assert.strictEqual(done.networkFeeRaw, "5000")
      assert.strictEqual(front.lamports(to), amount, "paid once")
      const [booked] = yield* sql<{ amount: string }>`
        SELECT p.amount::text AS amount FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id
        JOIN ledger_accounts a ON a.id = p.account_id
        WHERE e.kind = 'NETWORK_FEE' AND e.reference_id = ${id} AND a.kind = 'NETWORK_FEES'`
      assert.strictEqual(booked?.amount, "-5000", "the included version's fee, once")
      const after = before - amount - 5_000n
      assert.strictEqual(front.lamports(hot), after)
      const run = yield* check()
      assertChainOk(run)
      assert.include(lineOf(run, sol, hot), `  HOT  expected ${after}  on chain ${after}  difference 0  ok`)
      assert.match(run.lastLine, /^chain ok: \d+ lines, 0 in flight$/)
    }), timeout)

  it.effect("SOL sent from HOT with HOT's key directly on the node: HOT's line is unexplained, exit 1", () =>
    Effect.gen(function*() {
      const connection = new Connection(url, "confirmed")
      const { blockhash } = yield* Effect.promise(() => connection.getLatestBlockhash("confirmed"))
      const signer = yield* Signer
      const signed = yield* signer.signTransaction({
        family: "SOL",
        key: platformKey("HOT"),
        recentBlockhash: blockhash,
        to: recipient(),
        amount: 7_000_000n
      }).pipe(Effect.orDie)
      yield* Effect.promise(() => connection.sendRawTransaction(Buffer.from(signed.raw, "base64"), { skipPreflight: true }))
      yield* scan
      const run = yield* check()
      assert.strictEqual(run.code, 1, run.stdout + run.stderr)
      assert.notInclude(run.stdout, "not compared")
      assert.include(lineOf(run, sol, hot), `  on chain ${front.lamports(hot)}  difference -7005000  UNEXPLAINED`)
      assert.include(lineOf(run, usdc, hot), "difference 0  ok")
      assert.match(run.lastLine, new RegExp(`^chain discrepancy: 1 unexplained difference, first ${networkKey}  ${sol}  ${hot}  HOT`))
    }), timeout)
})
