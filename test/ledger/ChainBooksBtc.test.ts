/**
 * `ledger:check --chain` on a BTC node (docs/ledger.md "Chain books", BTC by outputs; src/ledger/ChainOutputs.ts):
 * the whole service with BTC_TESTNET on a regtest Litecoin Core node, blocks made only when the test asks, and the
 * check run as its own process as an operator would.
 *
 * Held here: HOT funded from outside and a deposit are compared output by output with the node's UTXO set (`chain
 * ok`, every line compared); a withdrawal that spends the deposit output together with HOT's is charged to the
 * deposit address for its output and to HOT for its own (the split per address BTC's amount books got wrong: the
 * deposit address was left holding the deposit, HOT short by it), in flight while its block is not final, and exact
 * once COMPLETED; a withdrawal stuck 6 blocks and replaced by fee (BIP 125, docs/btc.md): while both versions are
 * only in the mempool nothing moved, the replacement in a block is in flight, and once COMPLETED the deposit
 * address is charged its output and HOT holds the replacement's change (the replaced version's outputs never
 * appear, its fee is not booked); a reorganization that double-spends an unconfirmed deposit leaves nothing to explain; HOT's output
 * spent with HOT's key directly on the node is found, named by its outpoint, exit 1.
 *
 * Not here, by design: sweeps and top-ups. BTC has none (decisions.md "Operating wallets, sweeps, gas and fee
 * floors": credited deposit outputs are inputs that withdrawals spend directly, each signed with its own key), so
 * its movements are deposits, receipts, withdrawals (their replacements included) and reorganizations.
 */
import { assert, layer } from "@effect/vitest"
import * as bitcoin from "bitcoinjs-lib"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { beforeAll } from "vitest"
import { bitcoinNetworks } from "../../src/chains/BitcoinNetwork.ts"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { platformKey } from "../../src/signer/TransactionRequest.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { startLitecoind } from "../support/Litecoind.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { call, hotAddress, waitFor, walletOf, withdrawAccepted } from "../withdrawals/WithdrawalHelpers.ts"
import { type CheckRun, runLedgerCheck } from "./LedgerCheck.ts"

const node = startLitecoind()
const networkKey = "BTC_TESTNET"
const btc = "BTC_TESTNET_BTC"
const network = bitcoinNetworks.test

beforeAll(() => node.ready, 60_000)

const timeout = { timeout: 240_000 }
const promise = <A>(run: () => Promise<A>) => Effect.promise(run)
const scan = Effect.gen(function*() {
  const watcher = yield* DepositWatcher
  return yield* watcher.scan(networkKey)
})
/** Mines, then scans: the books stand at the node's head. */
const mine = (count: number) =>
  Effect.gen(function*() {
    yield* promise(() => node.mine(count))
    yield* scan
  })
const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm(networkKey)
})
const recipient = () => bitcoin.payments.p2wpkh({ hash: randomBytes(20), network }).address!
const voutOf = (txid: string, address: string) =>
  promise(async () => bitcoin.Transaction.fromHex(await node.rpc<string>("getrawtransaction", [txid, false]))).pipe(
    Effect.map((tx) =>
      tx.outs.findIndex((output) =>
        Buffer.from(output.script).equals(Buffer.from(bitcoin.address.toOutputScript(address, network)))
      )
    )
  )

const check = () =>
  runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL!, CHAIN_RPC_URLS: JSON.stringify({ [networkKey]: node.url }) }, [
    "--chain"
  ])

const lineOf = (run: CheckRun, address: string) => {
  const found = run.stdout.split("\n").find((line) => line.startsWith(`${networkKey}  ${btc}  ${address}  `))
  return found ?? assert.fail(`no line for ${address} in:\n${run.stdout}${run.stderr}`)
}

/** Exit 0 with `chain ok`, every line compared and none `not compared`. */
const assertChainOk = (run: CheckRun, inFlight = 0) => {
  assert.strictEqual(run.code, 0, run.stdout + run.stderr)
  assert.notInclude(run.stdout, "not compared")
  assert.include(run.stdout, `chain books of ${networkKey} at block`)
  assert.include(run.stdout, "(the node's head, unspent outputs one for one)")
  assert.match(run.lastLine, new RegExp(`^chain ok: \\d+ lines, ${inFlight} in flight$`))
  assert.notInclude(run.stdout + run.stderr, node.url)
}

layer(
  makeTestAppLayer({ chainRpcUrls: { [networkKey]: Redacted.make(node.url) } }),
  { excludeTestServices: true, timeout: 240_000 }
)("ledger:check --chain on a BTC node (litecoind regtest)", (it) => {
  let tenant: TestTenant
  let hot: string
  let deposit: { walletId: string; address: string }
  let depositTx: string

  it.effect("HOT funded from outside and a credited deposit: the node's outputs are the books' outputs, chain ok", () =>
    Effect.gen(function*() {
      // The watcher starts at the head it first sees: what came before is history.
      yield* scan
      hot = yield* hotAddress(networkKey)
      for (const amount of [20_000_000n, 30_000_000n]) yield* promise(() => node.send(hot, "test", amount))
      tenant = yield* provisionTenant()
      deposit = yield* walletOf(tenant, "alice", networkKey)
      depositTx = yield* promise(() => node.send(deposit.address, "test", 300_000n))
      yield* mine(1)
      yield* promise(() => node.send(deposit.address, "test", 3_000_000n))
      yield* mine(1)
      // BTC_TESTNET credits at the 2nd confirmation.
      yield* mine(1)
      const listed = yield* call(tenant, "GET", "/v1/transactions?kind=DEPOSIT")
      assert.deepStrictEqual((listed.json.items as Array<any>).map((item) => item.status), ["COMPLETED", "COMPLETED"], listed.text)

      const run = yield* check()
      assertChainOk(run)
      assert.strictEqual(lineOf(run, hot), `${networkKey}  ${btc}  ${hot}  HOT  expected 50000000  on chain 50000000  difference 0  ok`)
      assert.strictEqual(
        lineOf(run, deposit.address),
        `${networkKey}  ${btc}  ${deposit.address}  DEPOSIT  expected 3300000  on chain 3300000  difference 0  ok`
      )
    }), timeout)

  it.effect("a withdrawal spending the deposit outputs, its change to HOT: in flight while not final, then each address charged for its own outputs", () =>
    Effect.gen(function*() {
      const vout = yield* voutOf(depositTx, deposit.address)
      // Credited deposit outputs are spent first, oldest first: both of them, and the change goes to HOT.
      const id = yield* withdrawAccepted(tenant, deposit.walletId, btc, recipient(), 2_500_000n, "books-btc-1")
      yield* waitFor(tenant, id, "CONFIRMING")
      // In the mempool only: the UTXO set (confirmed outputs) has not moved.
      assertChainOk(yield* check())

      yield* mine(1)
      assert.isNull(yield* promise(() => node.rpc("gettxout", [depositTx, vout, true])), "the deposit output is spent")
      const inFlight = yield* check()
      assertChainOk(inFlight, 1)
      assert.strictEqual(
        lineOf(inFlight, deposit.address),
        `${networkKey}  ${btc}  ${deposit.address}  DEPOSIT  expected 3300000  on chain 0  difference -3300000  ` +
          `in flight (explained: withdrawal ${id} (send PENDING))`
      )
      // HOT's change is in a block the watcher saw (a receipt), its own outputs untouched.
      assert.match(lineOf(inFlight, hot), /  HOT  expected (\d+)  on chain \1  difference 0  ok$/)

      yield* mine(1)
      yield* confirm
      const done = yield* waitFor(tenant, id, "COMPLETED", null)
      const run = yield* check()
      assertChainOk(run)
      // The deposit address's outputs are charged to it, not to HOT (the amount books left it holding 3300000 and
      // HOT short by as much): it holds nothing, in the books and on the node.
      assert.strictEqual(
        lineOf(run, deposit.address),
        `${networkKey}  ${btc}  ${deposit.address}  DEPOSIT  expected 0  on chain 0  difference 0  ok`
      )
      const hotHolds = 50_000_000n + 3_300_000n - 2_500_000n - BigInt(done.networkFeeRaw)
      assert.strictEqual(lineOf(run, hot), `${networkKey}  ${btc}  ${hot}  HOT  expected ${hotHolds}  on chain ${hotHolds}  difference 0  ok`)
    }), timeout)

  it.effect("a withdrawal stuck 6 blocks and replaced by fee (BIP 125): the replaced version's outputs never count, the included one's inputs and fee do; chain ok", () =>
    Effect.gen(function*() {
      yield* promise(() => node.send(deposit.address, "test", 2_000_000n))
      yield* mine(2)
      const credited = yield* check()
      assertChainOk(credited)
      const hotBefore = BigInt(/  HOT  expected (\d+)  on chain \1  difference 0  ok$/.exec(lineOf(credited, hot))![1]!)
      assert.strictEqual(
        lineOf(credited, deposit.address),
        `${networkKey}  ${btc}  ${deposit.address}  DEPOSIT  expected 2000000  on chain 2000000  difference 0  ok`
      )

      const id = yield* withdrawAccepted(tenant, deposit.walletId, btc, recipient(), 1_000_000n, "books-btc-rbf")
      const first = yield* waitFor(tenant, id, "CONFIRMING")
      // Miners leave it out, as they would a transaction paying too little for the blocks of the day.
      yield* promise(() => node.rpc("prioritisetransaction", [first.txHash, 0, -100_000_000]))
      yield* confirm
      yield* mine(6)
      yield* confirm
      const sql = yield* SqlClient.SqlClient
      const versions = yield* sql<{ tx_hash: string }>`
        SELECT v.tx_hash FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
        WHERE s.owner_id = ${id} ORDER BY v.version`
      assert.strictEqual(versions.length, 2, "replaced after 6 blocks")
      // Both versions in the mempool at most, none in a block: the UTXO set has not moved, nothing in flight.
      assertChainOk(yield* check())

      yield* mine(1)
      const inFlight = yield* check()
      assertChainOk(inFlight, 1)
      assert.strictEqual(
        lineOf(inFlight, deposit.address),
        `${networkKey}  ${btc}  ${deposit.address}  DEPOSIT  expected 2000000  on chain 0  difference -2000000  ` +
          `in flight (explained: withdrawal ${id} (send PENDING))`
      )

      yield* mine(1)
      yield* confirm
      const done = yield* waitFor(tenant, id, "COMPLETED", null)
      assert.strictEqual(done.txHash, versions[1]!.tx_hash, "the replacement was included")
      const replacedMined = yield* promise(() =>
        node.rpc<{ confirmations?: number }>("getrawtransaction", [versions[0]!.tx_hash, true]).then(
          (tx) => (tx.confirmations ?? 0) > 0,
          () => false
        )
      )
      assert.isFalse(replacedMined, "the replaced version is in no block")
      const run = yield* check()
      assertChainOk(run)
      assert.strictEqual(
        lineOf(run, deposit.address),
        `${networkKey}  ${btc}  ${deposit.address}  DEPOSIT  expected 0  on chain 0  difference 0  ok`
      )
      // HOT got the replacement's change: the deposit output less the payment and the replacement's (higher) fee.
      const hotHolds = hotBefore + 2_000_000n - 1_000_000n - BigInt(done.networkFeeRaw)
      assert.strictEqual(lineOf(run, hot), `${networkKey}  ${btc}  ${hot}  HOT  expected ${hotHolds}  on chain ${hotHolds}  difference 0  ok`)
    }), timeout)

  it.effect("a reorganization that double-spends an unconfirmed deposit: the deposit leaves the books with the chain, chain ok", () =>
    Effect.gen(function*() {
      const other = yield* walletOf(tenant, "bob", networkKey)
      const paid = yield* promise(() => node.pay(other.address, "test", 400_000n))
      yield* scan
      const before = yield* check()
      assertChainOk(before)
      assert.include(lineOf(before, other.address), "expected 400000  on chain 400000  difference 0  ok")
      yield* promise(() => node.reorg(1, paid.txHash))
      yield* scan
      const listed = yield* call(tenant, "GET", "/v1/transactions?kind=DEPOSIT")
      const dropped = (listed.json.items as Array<any>).find((item) => item.txHash === paid.txHash)
      assert.strictEqual(dropped?.status, "FAILED", listed.text)
      const run = yield* check()
      assertChainOk(run)
      // No output of it is known any more, in the books or on the node: the address has no line.
      assert.notInclude(run.stdout, other.address)
    }), timeout)

  it.effect("HOT's output spent with HOT's key directly on the node: found by its outpoint, exit 1", () =>
    Effect.gen(function*() {
      const funding = yield* promise(() => node.send(hot, "test", 5_000_000n))
      yield* mine(1)
      assertChainOk(yield* check())
      const vout = yield* voutOf(funding, hot)
      const signer = yield* Signer
      const behindTheBack = yield* signer.signTransaction({
        family: "BTC",
        btcNetwork: "test",
        inputs: [{ txid: funding, vout, value: 5_000_000n, key: platformKey("HOT") }],
        outputs: [{ address: recipient(), value: 4_990_000n }]
      }).pipe(Effect.orDie)
      yield* promise(() => node.rpc("sendrawtransaction", [behindTheBack.raw]))
      yield* mine(1)
      const run = yield* check()
      assert.strictEqual(run.code, 1, run.stdout + run.stderr)
      assert.notInclude(run.stdout, "not compared")
      assert.include(lineOf(run, hot), `difference -5000000  UNEXPLAINED (outputs not on the node: ${funding}:${vout} 5000000)`)
      assert.include(lineOf(run, deposit.address), "difference 0  ok")
      assert.match(run.lastLine, new RegExp(`^chain discrepancy: 1 unexplained difference, first ${networkKey}  ${btc}  ${hot}  HOT`))
    }), timeout)
})
