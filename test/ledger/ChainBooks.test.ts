/**
 * The chain books against a real node (issue 10 "Books and the audit"; decisions.md "Operating wallets, sweeps, gas
 * and fee floors", Books; docs/ledger.md "Chain books"): the whole service with ETH_SEPOLIA on a local anvil (chain
 * id 11155111, blocks mined only when the test asks), and `npm run ledger:check -- --chain` run as its own process
 * as an operator would.
 *
 * Held here: HOT funded from outside by real transfers is recorded by the watcher (platform_receipts) and booked;
 * money SWEEP held before the watcher saw it (anvil setBalance: carried over) is in the books once the operator
 * records its opening balance (issue 35); after ETH and ERC-20 deposits and withdrawals the check passes (exit 0)
 * with every line equal; a withdrawal in a block but not yet final is an explained in-flight line (exit 0); an ETH
 * sweep from the deposit address to HOT is in flight on both lines until final, then both equal the node with its
 * fee booked (issue 35: the sweep step of the comparison); a USDT sweep that needs the tenant's GAS wallet to top the
 * deposit address up with ETH first: in flight on GAS and the deposit address, then GAS, the deposit address (what
 * the sweep did not burn of its top-up stays there) and HOT equal the node, both fees once in the journal; a
 * withdrawal stuck 20 blocks behind a raised base fee and replaced (same nonce, higher fees): while waiting HOT's
 * books and the node agree, once final HOT is charged the included version's fee only, the replaced one is in no
 * block, and the withdrawal's NETWORK_FEE is that fee; an out-of-band change on chain (anvil
 * setBalance) on HOT, then on a deposit address, is reported with that address and exits 1; the node's URL (and its
 * credentials) is never printed, also when the node cannot be reached (exit 2).
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { encodeFunctionData, type Hex, parseEther, parseTransaction } from "viem"
import { beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { anvilAccounts, cloneTokenAt, deployToken, erc20Artifact, startAnvil } from "../support/Anvil.ts"
import { deposits, networkCalls } from "../support/NetworkCalls.ts"
import { makeTestAppLayer, opsRequest, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { hotAddress, waitFor, walletOf, withdraw } from "../withdrawals/WithdrawalHelpers.ts"
import { type CheckRun, runLedgerCheck } from "./LedgerCheck.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const eth = "ETH_SEPOLIA_ETH"
const usdt = "ETH_SEPOLIA_USDT"
const sender = anvilAccounts[0]
const { pass, sweepsOf, operating } = networkCalls("ETH_SEPOLIA")

beforeAll(() => Effect.runPromise(anvil.ready))

const timeout = { timeout: 240_000 }

/** Mines, then scans until the watcher's cursor stands at the node's head (the books' block). */
const mine = (blocks = 1) =>
  Effect.gen(function*() {
    yield* Effect.promise(() => node.mine({ blocks }))
    const head = yield* Effect.promise(() => node.getBlockNumber())
    const watcher = yield* DepositWatcher
    for (let attempt = 0; attempt < 100; attempt++) {
      if ((yield* watcher.scan("ETH_SEPOLIA")).height >= head) return head
      yield* Effect.sleep("100 millis")
    }
    return assert.fail(`the watcher did not reach block ${head}`)
  })

const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm("ETH_SEPOLIA")
})

const check = (env: Record<string, string> = {}) =>
  runLedgerCheck({
    DATABASE_URL: process.env.DATABASE_URL!,
    CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: anvil.url }),
    ...env
  }, ["--chain"])

/** The printed line of an address and asset (network, asset, address, role, expected, on chain, difference, verdict). */
const lineOf = (run: CheckRun, assetId: string, address: string) => {
  const found = run.stdout.split("\n").find((line) => line.startsWith(`ETH_SEPOLIA  ${assetId}  ${address}  `))
  return found ?? assert.fail(`no line for ${assetId} ${address} in:\n${run.stdout}${run.stderr}`)
}

/** A withdrawal's signed version (1 the first, 2 its replacement). */
const rawOf = (withdrawalId: string, version: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ raw: string }>`
      SELECT v.raw FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
      WHERE s.owner_id = ${withdrawalId} AND v.version = ${version}`
    return row?.raw ?? assert.fail(`no version ${version} of withdrawal ${withdrawalId}`)
  })

/** The SEND_NETWORK_FEE entries of the sends of `owners` (sweeps, top-ups): [owner, NETWORK_FEES posting], sorted. */
const sendFeesInJournal = (owners: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ owner_id: string; amount: string }>`
      SELECT s.owner_id, p.amount::text AS amount FROM outgoing_sends s
      JOIN ledger_entries e ON e.kind = 'SEND_NETWORK_FEE' AND e.reference_id = s.id
      JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
      WHERE s.owner_id IN ${sql.in(owners)} AND a.kind = 'NETWORK_FEES'`
    return rows.map((row) => [row.owner_id, row.amount]).toSorted()
  })

const ethBalance = (address: string) => Effect.promise(() => node.getBalance({ address: address as Hex }))

layer(
  // Sweeps off (AUTO_SWEEPS=false): no background pass; the one sweep below is a pass the test runs, so the
  // expectations around it are exact. Their movements in detail: test/sweeps/EvmSweeps.test.ts.
  makeTestAppLayer({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(anvil.url) }, autoSweeps: false }),
  { excludeTestServices: true, timeout: 240_000 }
)("ledger:check --chain on an EVM node (anvil)", (it) => {
  let tenant: TestTenant
  let hot: string
  let deposit: { walletId: string; address: string }
  let contract: Hex
  let sweepAddress: string
  let gas: string
  let depositEthLeft: bigint

  it.effect("HOT funded from outside and a tenant's ETH and USDT deposits: booked from what the watcher saw, the check passes", () =>
    Effect.gen(function*() {
      contract = (yield* Catalog).asset(usdt)!.contract!.toLowerCase() as Hex
      const source = yield* deployToken(anvil, 10n ** 24n)
      yield* cloneTokenAt(anvil, source, contract, sender, 10n ** 15n)
      // Money on SWEEP the watcher never sees arrive (carried over from a previous system): no line until its
      // opening balance is recorded (below).
      sweepAddress = yield* operating("SWEEP")
      yield* Effect.promise(() => node.setBalance({ address: sweepAddress as Hex, value: parseEther("4") }))
      // The watcher starts at the head it first sees: what came before is history.
      yield* mine()
      hot = yield* hotAddress("ETH_SEPOLIA")
      tenant = yield* provisionTenant()
      deposit = yield* walletOf(tenant, "alice", "ETH_SEPOLIA")

      const transferData = (to: string, amount: bigint) =>
        encodeFunctionData({ abi: erc20Artifact.abi, functionName: "transfer", args: [to as Hex, amount] })
      for (const transaction of [
        { to: hot as Hex, value: parseEther("10") },
        { to: contract, data: transferData(hot, 1_000_000_000n) },
        { to: deposit.address as Hex, value: parseEther("2") },
        { to: contract, data: transferData(deposit.address, 500_000_000n) }
      ]) {
        yield* Effect.promise(() => node.sendTransaction({ account: sender, ...transaction }))
      }
      yield* mine()
      const sql = yield* SqlClient.SqlClient
      const receipts = yield* sql<{ asset_id: string; role: string; amount: string }>`
        SELECT asset_id, role, amount::text AS amount FROM platform_receipts
        WHERE network_key = 'ETH_SEPOLIA' AND to_address = ${hot} ORDER BY asset_id`
      assert.deepStrictEqual(receipts.map((row) => [row.asset_id, row.role, row.amount]), [
        [eth, "HOT", parseEther("10").toString()],
        [usdt, "HOT", "1000000000"]
      ])
      // ETH_SEPOLIA credits at the 12th confirmation.
      yield* mine(11)
      assert.deepStrictEqual((yield* deposits(tenant)).map((row) => row.status), ["COMPLETED", "COMPLETED"])

      const run = yield* check()
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.notInclude(run.stdout, "not compared")
      assert.strictEqual(lineOf(run, eth, hot), `ETH_SEPOLIA  ${eth}  ${hot}  HOT  expected 10000000000000000000  ` +
        "on chain 10000000000000000000  difference 0  ok")
      assert.strictEqual(lineOf(run, usdt, hot), `ETH_SEPOLIA  ${usdt}  ${hot}  HOT  expected 1000000000  ` +
        "on chain 1000000000  difference 0  ok")
      assert.strictEqual(lineOf(run, eth, deposit.address), `ETH_SEPOLIA  ${eth}  ${deposit.address}  DEPOSIT  ` +
        "expected 2000000000000000000  on chain 2000000000000000000  difference 0  ok")
      assert.strictEqual(lineOf(run, usdt, deposit.address), `ETH_SEPOLIA  ${usdt}  ${deposit.address}  DEPOSIT  ` +
        "expected 500000000  on chain 500000000  difference 0  ok")
      assert.match(run.lastLine, /^chain ok: 4 lines, 0 in flight$/)
      assert.notInclude(run.stdout + run.stderr, anvil.url)

      // The operator records SWEEP's opening balance (what it held at the block the watcher started from): the
      // books count it, and the line is compared like any other.
      const opening = yield* opsRequest("POST", "/ops/networks/ETH_SEPOLIA/opening_balances", {
        address: sweepAddress,
        assetId: eth,
        amountRaw: parseEther("4").toString()
      }, { "x-operator": "auditor" })
      assert.strictEqual(opening.status, 201, opening.text)
      const opened = yield* check()
      assert.strictEqual(opened.code, 0, opened.stdout + opened.stderr)
      assert.strictEqual(lineOf(opened, eth, sweepAddress), `ETH_SEPOLIA  ${eth}  ${sweepAddress}  SWEEP  ` +
        "expected 4000000000000000000  on chain 4000000000000000000  difference 0  ok")
      assert.match(opened.lastLine, /^chain ok: 5 lines, 0 in flight$/)
    }), timeout)

  it.effect("ETH and USDT withdrawals from HOT: in a block but not final, explained in flight (exit 0); final, HOT's books equal the node to the wei", () =>
    Effect.gen(function*() {
      const to = "0x00000000000000000000000000000000beef0001"
      const ethAmount = parseEther("0.5")
      const usdtAmount = 120_000_000n
      const ethWithdrawal = yield* withdraw(tenant, deposit.walletId, eth, to, ethAmount, "books-eth")
      assert.strictEqual(ethWithdrawal.status, 202, ethWithdrawal.text)
      const usdtWithdrawal = yield* withdraw(tenant, deposit.walletId, usdt, to, usdtAmount, "books-usdt")
      assert.strictEqual(usdtWithdrawal.status, 202, usdtWithdrawal.text)
      yield* waitFor(tenant, ethWithdrawal.json.withdrawalId, "CONFIRMING")
      yield* waitFor(tenant, usdtWithdrawal.json.withdrawalId, "CONFIRMING")
      yield* mine()

      // Included at the books' block, not yet final (12 confirmations): HOT holds less than the books by the sends.
      const inFlight = yield* check()
      assert.strictEqual(inFlight.code, 0, inFlight.stdout + inFlight.stderr)
      assert.match(lineOf(inFlight, eth, hot), new RegExp(`  HOT  expected 10000000000000000000  on chain \\d+  difference -\\d+  ` +
        `in flight \\(explained: withdrawal ${ethWithdrawal.json.withdrawalId} \\(send PENDING\\), ` +
        `withdrawal ${usdtWithdrawal.json.withdrawalId} \\(send PENDING\\)\\)$`))
      assert.strictEqual(lineOf(inFlight, usdt, hot), `ETH_SEPOLIA  ${usdt}  ${hot}  HOT  expected 1000000000  on chain 880000000  ` +
        `difference -120000000  in flight (explained: withdrawal ${usdtWithdrawal.json.withdrawalId} (send PENDING))`)
      assert.match(inFlight.lastLine, /^chain ok: 5 lines, 2 in flight$/)

      yield* mine(11)
      yield* confirm
      const ethDone = yield* waitFor(tenant, ethWithdrawal.json.withdrawalId, "COMPLETED")
      const usdtDone = yield* waitFor(tenant, usdtWithdrawal.json.withdrawalId, "COMPLETED")
      const fees = BigInt(ethDone.networkFeeRaw) + BigInt(usdtDone.networkFeeRaw)
      const hotEth = parseEther("10") - ethAmount - fees
      assert.strictEqual(yield* ethBalance(hot), hotEth)

      const run = yield* check()
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.strictEqual(lineOf(run, eth, hot), `ETH_SEPOLIA  ${eth}  ${hot}  HOT  expected ${hotEth}  on chain ${hotEth}  difference 0  ok`)
      assert.strictEqual(lineOf(run, usdt, hot), `ETH_SEPOLIA  ${usdt}  ${hot}  HOT  expected 880000000  on chain 880000000  difference 0  ok`)
      // The deposit address keeps its coins: withdrawals are paid from HOT (no sweep ran).
      assert.include(lineOf(run, eth, deposit.address), "expected 2000000000000000000  on chain 2000000000000000000  difference 0  ok")
      assert.match(run.lastLine, /^chain ok: 5 lines, 0 in flight$/)
    }), timeout)

  it.effect("an ETH sweep of the deposit address to HOT: in flight on both lines while not final; final, both equal the node and its fee is in the journal", () =>
    Effect.gen(function*() {
      const hotBefore = yield* ethBalance(hot)
      const deposited = yield* ethBalance(deposit.address)
      // HOT is below the hot target (10 ETH), so the sweep goes there (decisions.md); a native sweep pays its own fee.
      yield* pass
      const sweep = (yield* sweepsOf(deposit.address)).find((entry) => entry.assetId === eth)
      assert.deepInclude(sweep, { kind: "SWEEP", from: deposit.address, to: hot })
      yield* mine()
      const inFlight = yield* check()
      assert.strictEqual(inFlight.code, 0, inFlight.stdout + inFlight.stderr)
      assert.match(lineOf(inFlight, eth, deposit.address), new RegExp(`  DEPOSIT  expected ${deposited}  on chain 0  ` +
        `difference -${deposited}  in flight \\(explained: sweep ${sweep!.id} \\(send PENDING\\)\\)$`))
      assert.match(lineOf(inFlight, eth, hot), new RegExp(`  HOT  expected ${hotBefore}  on chain \\d+  difference \\+\\d+  ` +
        `in flight \\(explained: sweep ${sweep!.id} \\(send PENDING, incoming\\)\\)$`))

      yield* mine(11)
      yield* pass
      const [done] = (yield* sweepsOf(deposit.address)).filter((entry) => entry.id === sweep!.id)
      assert.strictEqual(done!.status, "COMPLETED")
      const swept = BigInt(done!.amountRaw)
      assert.strictEqual(swept + BigInt(done!.networkFeeRaw!), deposited, "the address's whole balance: amount + fee")
      const run = yield* check()
      // The ledger half passed too: the sweep's fee is booked once (sendFeesBooked).
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.strictEqual(lineOf(run, eth, deposit.address), `ETH_SEPOLIA  ${eth}  ${deposit.address}  DEPOSIT  ` +
        "expected 0  on chain 0  difference 0  ok")
      assert.strictEqual(lineOf(run, eth, hot), `ETH_SEPOLIA  ${eth}  ${hot}  HOT  expected ${hotBefore + swept}  ` +
        `on chain ${hotBefore + swept}  difference 0  ok`)
      assert.match(run.lastLine, /^chain ok: 5 lines, 0 in flight$/)
    }), timeout)

  it.effect("a USDT sweep after the tenant's GAS wallet topped the deposit address up with ETH: in flight on GAS and the deposit address, then every line equal and both fees in the journal", () =>
    Effect.gen(function*() {
      // GAS funded from outside by a real transfer: the watcher records it (a receipt, role GAS), the books count it.
      gas = yield* operating("GAS", tenant.tenantId)
      yield* Effect.promise(() => node.sendTransaction({ account: sender, to: gas as Hex, value: parseEther("1") }))
      yield* mine()
      // The deposit address holds USDT and no ETH (swept above): the token sweep needs a top-up from GAS first.
      yield* pass
      const planned = yield* sweepsOf(deposit.address)
      const topUp = planned.find((entry) => entry.kind === "TOP_UP")!
      const sweep = planned.find((entry) => entry.kind === "SWEEP" && entry.assetId === usdt)!
      assert.deepInclude(topUp, { from: gas, to: deposit.address, assetId: eth })
      assert.deepInclude(sweep, { from: deposit.address, assetId: usdt, amountRaw: "500000000" })
      yield* mine()
      const inFlight = yield* check()
      assert.strictEqual(inFlight.code, 0, inFlight.stdout + inFlight.stderr)
      assert.match(lineOf(inFlight, eth, gas), new RegExp(`  GAS  expected 1000000000000000000  on chain \\d+  difference -\\d+  ` +
        `in flight \\(explained: top-up ${topUp.id} \\(send PENDING\\)\\)$`))
      assert.match(lineOf(inFlight, eth, deposit.address), new RegExp(`  DEPOSIT  expected 0  on chain ${topUp.amountRaw}  ` +
        `difference \\+${topUp.amountRaw}  in flight \\(explained: top-up ${topUp.id} \\(send PENDING, incoming\\)\\)$`))

      // The top-up final, the sweep is signed; the sweep final, both are COMPLETED.
      yield* mine(11)
      yield* pass
      yield* mine(12)
      yield* pass
      const done = yield* sweepsOf(deposit.address)
      const toppedUp = done.find((entry) => entry.id === topUp.id)!
      const swept = done.find((entry) => entry.id === sweep.id)!
      assert.deepStrictEqual([toppedUp.status, swept.status], ["COMPLETED", "COMPLETED"])
      const topUpFee = BigInt(toppedUp.networkFeeRaw!)
      const sweepFee = BigInt(swept.networkFeeRaw!)
      // What the sweep did not burn (unused gas) stays at the deposit address: in the books too.
      depositEthLeft = BigInt(toppedUp.amountRaw) - sweepFee
      const gasLeft = parseEther("1") - BigInt(toppedUp.amountRaw) - topUpFee
      assert.strictEqual(yield* ethBalance(gas), gasLeft)
      assert.strictEqual(yield* ethBalance(deposit.address), depositEthLeft)
      const run = yield* check()
      // The ledger half passed too: each fee once in the journal (sendFeesBooked), charged to the tenant.
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.strictEqual(lineOf(run, eth, gas), `ETH_SEPOLIA  ${eth}  ${gas}  GAS  expected ${gasLeft}  on chain ${gasLeft}  difference 0  ok`)
      assert.strictEqual(lineOf(run, eth, deposit.address), `ETH_SEPOLIA  ${eth}  ${deposit.address}  DEPOSIT  ` +
        `expected ${depositEthLeft}  on chain ${depositEthLeft}  difference 0  ok`)
      assert.strictEqual(lineOf(run, usdt, deposit.address), `ETH_SEPOLIA  ${usdt}  ${deposit.address}  DEPOSIT  ` +
        "expected 0  on chain 0  difference 0  ok")
      const destination = swept.to
      const held = (yield* Effect.promise(() =>
        node.readContract({ address: contract, abi: erc20Artifact.abi, functionName: "balanceOf", args: [destination as Hex] })
      )) as bigint
      assert.include(lineOf(run, usdt, destination), `expected ${held}  on chain ${held}  difference 0  ok`)
      assert.deepStrictEqual(yield* sendFeesInJournal([topUp.id, sweep.id]), [
        [topUp.id, (-topUpFee).toString()],
        [sweep.id, (-sweepFee).toString()]
      ].toSorted())
      assert.match(run.lastLine, /^chain ok: 6 lines, 0 in flight$/)
    }), timeout)

  it.effect("a withdrawal stuck behind a raised base fee, replaced with the same nonce and higher fees: the replaced version left no trace, the included one's fee is booked, every line equal", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const to = "0x00000000000000000000000000000000beef0002"
      const amount = parseEther("0.1")
      const hotBefore = yield* ethBalance(hot)
      const created = yield* withdraw(tenant, deposit.walletId, eth, to, amount, "books-replaced")
      assert.strictEqual(created.status, 202, created.text)
      const id = created.json.withdrawalId as string
      const first = yield* waitFor(tenant, id, "CONFIRMING")
      const signed = parseTransaction((yield* rawOf(id, 1)) as `0x02${string}`)
      // Blocks whose base fee is above what the transaction offers: it waits in the pool, unmined, 20 blocks.
      const high = signed.maxFeePerGas! * 4n
      const raiseBaseFee = Effect.promise(() =>
        node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${high.toString(16)}`] as any })
      )
      yield* confirm // the check that records the height it was first seen waiting at
      for (let block = 0; block < 21; block++) {
        yield* raiseBaseFee
        yield* mine()
      }
      // Waiting, in no block: the books take nothing from HOT for it, and the node agrees.
      const waiting = yield* check()
      assert.strictEqual(waiting.code, 0, waiting.stdout + waiting.stderr)
      assert.strictEqual(lineOf(waiting, eth, hot), `ETH_SEPOLIA  ${eth}  ${hot}  HOT  expected ${hotBefore}  ` +
        `on chain ${hotBefore}  difference 0  ok`)
      yield* raiseBaseFee
      yield* confirm
      const replacement = parseTransaction((yield* rawOf(id, 2)) as `0x02${string}`)
      assert.strictEqual(replacement.nonce, signed.nonce)
      assert.isTrue(replacement.maxFeePerGas! > signed.maxFeePerGas!)
      yield* raiseBaseFee
      yield* mine()
      yield* mine(11)
      yield* confirm
      const done = yield* waitFor(tenant, id, "COMPLETED")
      assert.notStrictEqual(done.txHash, first.txHash)
      const receipt = yield* Effect.promise(() => node.getTransactionReceipt({ hash: done.txHash as Hex }))
      const fee = receipt.gasUsed * receipt.effectiveGasPrice
      assert.strictEqual(done.networkFeeRaw, fee.toString())
      // The replaced version is in no block: only the included one left HOT.
      const replacedMined = yield* Effect.promise(() =>
        node.getTransactionReceipt({ hash: first.txHash as Hex }).then(() => true, () => false)
      )
      assert.isFalse(replacedMined, "the replaced version is in no block")
      const [send] = yield* sql<{ included_tx_hash: string; network_fee: string }>`
        SELECT included_tx_hash, network_fee::text AS network_fee FROM outgoing_sends
        WHERE owner_id = ${id} AND purpose = 'WITHDRAWAL'`
      assert.deepStrictEqual([send!.included_tx_hash, send!.network_fee], [done.txHash, fee.toString()])
      const [booked] = yield* sql<{ amount: string }>`
        SELECT p.amount::text AS amount FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.id
        JOIN ledger_accounts a ON a.id = p.account_id
        WHERE e.kind = 'NETWORK_FEE' AND e.reference_id = ${id} AND a.kind = 'NETWORK_FEES'`
      assert.strictEqual(booked?.amount, (-fee).toString(), "the included version's fee, once")

      const hotAfter = hotBefore - amount - fee
      assert.strictEqual(yield* ethBalance(hot), hotAfter)
      const run = yield* check()
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.strictEqual(lineOf(run, eth, hot), `ETH_SEPOLIA  ${eth}  ${hot}  HOT  expected ${hotAfter}  on chain ${hotAfter}  difference 0  ok`)
      assert.notInclude(run.stdout, "UNEXPLAINED")
      assert.match(run.lastLine, /^chain ok: 6 lines, 0 in flight$/)
    }), timeout)

  it.effect("a reorganization that removes a receipt's block forgets the receipt with it; the books still equal the node", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const funding = yield* Effect.promise(() => node.sendTransaction({ account: sender, to: hot as Hex, value: parseEther("3") }))
      const minedAt = yield* mine()
      const recorded = yield* sql<{ block_hash: string }>`
        SELECT block_hash FROM platform_receipts WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${funding}`
      assert.strictEqual(recorded.length, 1)
      const removedBlock = recorded[0]!.block_hash
      yield* Effect.promise(() => node.request({ method: "anvil_reorg" as any, params: [1, []] as any }))
      yield* mine()
      const kept = yield* sql<{ n: number }>`
        SELECT count(*)::int AS n FROM platform_receipts WHERE network_key = 'ETH_SEPOLIA' AND block_hash = ${removedBlock}`
      assert.strictEqual(kept[0]!.n, 0, `the receipt of removed block ${minedAt} is gone`)
      // Whether the node mined the transaction again or dropped it, the books follow the chain.
      const run = yield* check()
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.include(lineOf(run, eth, hot), "difference 0  ok")
    }), timeout)

  it.effect("an out-of-band change on HOT, then on a deposit address: reported with its address, exit 1", () =>
    Effect.gen(function*() {
      const hotEth = yield* ethBalance(hot)
      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: hotEth + 7n }))
      yield* mine()
      const hotChanged = yield* check()
      assert.strictEqual(hotChanged.code, 1, hotChanged.stdout + hotChanged.stderr)
      assert.strictEqual(lineOf(hotChanged, eth, hot),
        `ETH_SEPOLIA  ${eth}  ${hot}  HOT  expected ${hotEth}  on chain ${hotEth + 7n}  difference +7  UNEXPLAINED`)
      assert.include(lineOf(hotChanged, eth, deposit.address), "difference 0  ok")
      assert.strictEqual(hotChanged.lastLine, `chain discrepancy: 1 unexplained difference, first ` +
        `ETH_SEPOLIA  ${eth}  ${hot}  HOT  expected ${hotEth}  on chain ${hotEth + 7n}  difference +7  UNEXPLAINED`)

      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: hotEth }))
      yield* Effect.promise(() => node.setBalance({ address: deposit.address as Hex, value: parseEther("1.5") }))
      yield* mine()
      const depositChanged = yield* check()
      assert.strictEqual(depositChanged.code, 1, depositChanged.stdout + depositChanged.stderr)
      assert.include(lineOf(depositChanged, eth, hot), "difference 0  ok")
      // Swept to HOT above, then what the USDT sweep left of its top-up: the books say that much.
      assert.strictEqual(lineOf(depositChanged, eth, deposit.address), `ETH_SEPOLIA  ${eth}  ${deposit.address}  DEPOSIT  ` +
        `expected ${depositEthLeft}  on chain 1500000000000000000  difference +${parseEther("1.5") - depositEthLeft}  UNEXPLAINED`)
      assert.include(depositChanged.lastLine, `chain discrepancy: 1 unexplained difference, first ETH_SEPOLIA  ${eth}  ${deposit.address}`)
    }), timeout)

  it.effect("a node that cannot be reached: exit 2, and neither its URL nor its credentials are printed", () =>
    Effect.gen(function*() {
      const unreachable = "http://auditor:s3cret-key@127.0.0.1:9/rpc/s3cret-path"
      const run = yield* check({ CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: unreachable }) })
      assert.strictEqual(run.code, 2, run.stdout + run.stderr)
      assert.include(run.stderr, "ledger check cannot run: ETH_SEPOLIA: eth_blockNumber")
      assert.notInclude(run.stdout + run.stderr, "s3cret")
    }), timeout)

  it.effect("--chain without CHAIN_RPC_URLS, or an unknown option: exit 2, saying why", () =>
    Effect.gen(function*() {
      const noNodes = yield* runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL! }, ["--chain"])
      assert.strictEqual(noNodes.code, 2, noNodes.stdout + noNodes.stderr)
      assert.include(noNodes.stderr, "--chain: CHAIN_RPC_URLS names no node of a catalog network")
      // Every family is compared now: a TRON node that cannot be reached is no reason to leave it out, it is exit 2.
      const tronUnreachable = yield* runLedgerCheck(
        { DATABASE_URL: process.env.DATABASE_URL!, CHAIN_RPC_URLS: JSON.stringify({ TRON_NILE: "http://auditor:s3cret@127.0.0.1:9" }) },
        ["--chain"]
      )
      assert.strictEqual(tronUnreachable.code, 2, tronUnreachable.stdout + tronUnreachable.stderr)
      assert.notInclude(tronUnreachable.stdout, "not compared")
      assert.include(tronUnreachable.stderr, "ledger check cannot run: CHAIN_RPC_URLS: the node for TRON_NILE did not say which chain it is on")
      assert.notInclude(tronUnreachable.stdout + tronUnreachable.stderr, "s3cret")
      const unknown = yield* runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL! }, ["--chains"])
      assert.strictEqual(unknown.code, 2, unknown.stdout + unknown.stderr)
      assert.include(unknown.stderr, "Unknown option '--chains'; --help lists the options")
    }), timeout)

  it.effect("without --chain the check is the ledger audit alone, as before", () =>
    Effect.gen(function*() {
      const run = yield* runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL!, CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: anvil.url }) })
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      assert.notInclude(run.stdout, "chain books")
      assert.match(run.lastLine, /^ledger ok: /)
    }), timeout)
})
