/**
 * Sweeps and GAS wallets on a real EVM node (docs/sweeps.md; decisions.md "Operating wallets, sweeps, gas and fee
 * floors"): the whole service with ETH_SEPOLIA on anvil (chain id 11155111, the catalog's), the catalog's USDT
 * cloned at its contract address. Blocks are mined by the test; deposits are scanned and sweeps passed explicitly
 * (the background loops may run too: passes of a network never overlap, and every step is idempotent).
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { encodeFunctionData, erc20Abi, type Hex, parseEther } from "viem"
import { beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { GasWallets } from "../../src/sweeps/GasWallets.ts"
import { Sweeps } from "../../src/sweeps/Sweeps.ts"
import { anvilAccounts, cloneTokenAt, deployToken, erc20Artifact, startAnvil } from "../support/Anvil.ts"
import { networkCalls } from "../support/NetworkCalls.ts"
import { auditLedger } from "../../src/ledger/LedgerAudit.ts"
import { makeTestAppLayer, opsClient, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { tenantAccount } from "../withdrawals/WithdrawalHelpers.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const sender = anvilAccounts[0]
const networkKey = "ETH_SEPOLIA"
const { scan, pass, depositAddress, sweepsOf, operating, tenantView } = networkCalls(networkKey)
const ethAssetId = "ETH_SEPOLIA_ETH"
const usdtAssetId = "ETH_SEPOLIA_USDT"

beforeAll(() => Effect.runPromise(anvil.ready))

const mine = (blocks = 1) => Effect.promise(() => node.mine({ blocks }))

const ethBalance = (address: string) => Effect.promise(() => node.getBalance({ address: address as Hex }))

let usdtContract: Hex
const usdtBalance = (address: string) =>
  Effect.promise(() =>
    node.readContract({ address: usdtContract, abi: erc20Abi, functionName: "balanceOf", args: [address as Hex] })
  )

/** Sends ETH or USDT to `to` and credits it: mined, then 12 confirmations (catalog n = 12), scanned each time. */
const depositAndCredit = (to: string, assetId: string, amount: bigint) =>
  Effect.gen(function*() {
    yield* Effect.promise(() =>
      assetId === ethAssetId
        ? node.sendTransaction({ account: sender, to: to as Hex, value: amount })
        : node.sendTransaction({
          account: sender,
          to: usdtContract,
          data: encodeFunctionData({ abi: erc20Artifact.abi, functionName: "transfer", args: [to as Hex, amount] })
        })
    )
    yield* mine()
    yield* scan
    yield* mine(11)
    yield* scan
  })

/** A pass (signs and broadcasts), the block including it, 11 more for the confirmation rule, and a pass that completes it. */
const sweepThrough = Effect.gen(function*() {
  yield* pass
  yield* mine()
  yield* mine(11)
  yield* pass
})

const receiptFee = (txHash: string) =>
  Effect.promise(async () => {
    const receipt = await node.getTransactionReceipt({ hash: txHash as Hex })
    return { fee: receipt.gasUsed * receipt.effectiveGasPrice, status: receipt.status, from: receipt.from.toLowerCase() }
  })

/**
 * What the tenant's vault has paid in network fees by the journal (its NETWORK_FEES, negative), after the audit found
 * every fee a send paid booked once (docs/ledger.md "Costs paid on chain").
 */
const feesBooked = (tenant: TestTenant) =>
  Effect.gen(function*() {
    const report = yield* auditLedger
    const check = report.checks.find((entry) => entry.check === "sendFeesBooked")!
    assert.deepStrictEqual(check.discrepancies.map((entry) => entry.message), [])
    return BigInt(yield* tenantAccount(tenant, "NETWORK_FEES", ethAssetId))
  }).pipe(Effect.orDie)

layer(
  makeTestAppLayer({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(anvil.url) } }),
  { excludeTestServices: true }
)("sweeps on an EVM node (anvil)", (it) => {
  it.effect("setup: the catalog's USDT on anvil; ETH_SEPOLIA sweeps (a real node that sends), simulated networks do not", () =>
    Effect.gen(function*() {
      const catalog = yield* Catalog
      usdtContract = catalog.asset(usdtAssetId)!.contract!.toLowerCase() as Hex
      const source = yield* deployToken(anvil, 10n ** 24n)
      yield* cloneTokenAt(anvil, source, usdtContract, sender, 10n ** 12n)
      yield* mine()
      // The watcher starts at the head it first sees.
      yield* scan
      const sweeps = yield* Sweeps
      assert.deepStrictEqual(sweeps.networkKeys, [networkKey])
    }))

  it.effect("an ETH deposit, once credited, is swept to HOT (below its hot target): amount + actual fee = the balance, address left at 0; user view unchanged", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const { address, walletId } = yield* depositAddress(tenant, "alice")
      const deposited = parseEther("0.5") + 7n
      yield* depositAndCredit(address, ethAssetId, deposited)
      const before = yield* tenantView(tenant, walletId)
      assert.deepStrictEqual(before.transactions.map((row) => [row[1], row[2]]), [["DEPOSIT", "COMPLETED"]])
      const hot = yield* operating("HOT")
      const hotBefore = yield* ethBalance(hot)

      yield* sweepThrough
      const [sweep] = yield* sweepsOf(address)
      assert.isDefined(sweep)
      // decisions.md: to HOT while HOT holds less than the asset's hotTargetRaw (10 ETH); a native sweep pays its own fee.
      assert.deepInclude(sweep, { kind: "SWEEP", networkKey, assetId: ethAssetId, from: address, to: hot, status: "COMPLETED" })
      const receipt = yield* receiptFee(sweep!.txHash!)
      assert.strictEqual(receipt.status, "success")
      assert.strictEqual(receipt.from, address)
      assert.strictEqual(BigInt(sweep!.networkFeeRaw!), receipt.fee, "networkFeeRaw is the receipt's gasUsed × effectiveGasPrice")
      assert.strictEqual(BigInt(sweep!.amountRaw) + receipt.fee, deposited)
      assert.strictEqual(yield* ethBalance(address), 0n)
      assert.strictEqual((yield* ethBalance(hot)) - hotBefore, BigInt(sweep!.amountRaw))
      // The fee left the deposit address: in the journal, charged to the tenant's vault (spec section 1, rule 4).
      assert.strictEqual(yield* feesBooked(tenant), -receipt.fee)
      // Sweeps never touch user balances or /v1/transactions (decisions.md).
      assert.deepStrictEqual(yield* tenantView(tenant, walletId), before)
    }))

  it.effect("with HOT at or above the hot target, the next credited deposit is swept to SWEEP", () =>
    Effect.gen(function*() {
      const hot = yield* operating("HOT")
      const sweepAddress = yield* operating("SWEEP")
      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: parseEther("20") }))
      const tenant = yield* provisionTenant()
      const { address } = yield* depositAddress(tenant, "bob")
      const deposited = parseEther("0.2")
      yield* depositAndCredit(address, ethAssetId, deposited)
      const sweepBefore = yield* ethBalance(sweepAddress)
      yield* sweepThrough
      const [sweep] = yield* sweepsOf(address)
      assert.deepInclude(sweep, { to: sweepAddress, status: "COMPLETED", assetId: ethAssetId })
      assert.strictEqual(BigInt(sweep!.amountRaw) + BigInt(sweep!.networkFeeRaw!), deposited)
      assert.strictEqual((yield* ethBalance(sweepAddress)) - sweepBefore, BigInt(sweep!.amountRaw))
      assert.strictEqual(yield* ethBalance(address), 0n)
      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: 0n }))
    }))

  it.effect("an ERC-20 deposit: the tenant's GAS wallet sends the exact top-up first, the token sweep follows its confirmation", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const gas = yield* operating("GAS", tenant.tenantId)
      yield* Effect.promise(() => node.setBalance({ address: gas as Hex, value: parseEther("1") }))
      const { address, walletId } = yield* depositAddress(tenant, "carol")
      const deposited = 50_000_000n
      yield* depositAndCredit(address, usdtAssetId, deposited)
      const before = yield* tenantView(tenant, walletId)
      const hot = yield* operating("HOT")
      const hotUsdtBefore = yield* usdtBalance(hot)

      yield* pass
      let rows = yield* sweepsOf(address)
      const topUp = rows.find((row) => row.kind === "TOP_UP")!
      const sweep = rows.find((row) => row.kind === "SWEEP")!
      assert.deepInclude(topUp, { from: gas, to: address, assetId: ethAssetId })
      assert.deepInclude(sweep, { from: address, to: hot, assetId: usdtAssetId, amountRaw: deposited.toString(), status: "PENDING" })
      assert.isNull(sweep.txHash, "the token sweep is not signed before its top-up is confirmed")

      yield* mine()
      yield* mine(11)
      yield* pass
      rows = yield* sweepsOf(address)
      const toppedUp = rows.find((row) => row.kind === "TOP_UP")!
      assert.strictEqual(toppedUp.status, "COMPLETED")
      const topUpReceipt = yield* receiptFee(toppedUp.txHash!)
      assert.strictEqual(topUpReceipt.from, gas)
      assert.strictEqual(BigInt(toppedUp.networkFeeRaw!), topUpReceipt.fee)
      assert.strictEqual(rows.find((row) => row.kind === "SWEEP")!.status, "CONFIRMING")

      yield* mine()
      yield* mine(11)
      yield* pass
      rows = yield* sweepsOf(address)
      const swept = rows.find((row) => row.kind === "SWEEP")!
      assert.strictEqual(swept.status, "COMPLETED")
      const sweepReceipt = yield* receiptFee(swept.txHash!)
      assert.strictEqual(sweepReceipt.status, "success")
      assert.strictEqual(BigInt(swept.networkFeeRaw!), sweepReceipt.fee)
      assert.strictEqual(yield* usdtBalance(address), 0n)
      assert.strictEqual((yield* usdtBalance(hot)) - hotUsdtBefore, deposited)
      // The top-up was exactly gas × maxFeePerGas of the sweep (the address held no ETH): what the sweep did not
      // burn (unused gas) is all that is left there.
      const sent = yield* Effect.promise(() => node.getTransaction({ hash: swept.txHash! as Hex }))
      assert.strictEqual(BigInt(toppedUp.amountRaw), sent.gas * sent.maxFeePerGas!)
      assert.strictEqual(yield* ethBalance(address), BigInt(toppedUp.amountRaw) - sweepReceipt.fee)
      // Both fees left our addresses (the top-up's GAS, the sweep's the topped-up deposit address): both booked to
      // the tenant, whose GAS wallet pays for sweeping its token deposits (decisions.md).
      assert.strictEqual(yield* feesBooked(tenant), -(topUpReceipt.fee + sweepReceipt.fee))
      // The top-up paid ETH to the user's deposit address: the watcher has seen its block, and it is no deposit.
      yield* scan
      assert.deepStrictEqual(yield* tenantView(tenant, walletId), before)
    }))

  it.effect("GAS empty: the token sweep waits (WAITING_GAS, no top-up), one VAULT_GAS_LOW (not two within 6 h; again once 6 h passed), /ops/tenants/{id}/gas figures; funded, it goes on", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const gasWallets = yield* GasWallets
      const ops = yield* opsClient
      const tenant = yield* provisionTenant()
      const gas = yield* operating("GAS", tenant.tenantId)
      const { address } = yield* depositAddress(tenant, "dave")
      yield* depositAndCredit(address, usdtAssetId, 20_000_000n)

      yield* pass
      const rows = yield* sweepsOf(address)
      assert.deepStrictEqual(rows.map((row) => [row.kind, row.status]), [["SWEEP", "WAITING_GAS"]])

      yield* gasWallets.checkGas(networkKey)
      yield* gasWallets.checkGas(networkKey)
      const events = yield* sql<{ data: any }>`
        SELECT data FROM outbox_events WHERE tenant_id = ${tenant.tenantId} AND event_type = 'VAULT_GAS_LOW'`
      assert.strictEqual(events.length, 1, "at most once per 6 hours per tenant and network")
      const data = typeof events[0]!.data === "string" ? JSON.parse(events[0]!.data) : events[0]!.data
      assert.deepStrictEqual(Object.keys(data).sort(), ["address", "assetId", "balanceRaw", "networkKey", "recommendedMinRaw"])
      assert.deepInclude(data, { networkKey, address: gas, assetId: ethAssetId, balanceRaw: "0" })
      assert.isTrue(BigInt(data.recommendedMinRaw) > 0n)
      // Once the last one is 6 hours old, the next check sends again.
      yield* sql`UPDATE gas_alerts SET sent_at = sent_at - interval '6 hours' WHERE tenant_id = ${tenant.tenantId}`
      yield* gasWallets.checkGas(networkKey)
      yield* gasWallets.checkGas(networkKey)
      const again = yield* sql<{ count: number }>`
        SELECT count(*)::int AS count FROM outbox_events WHERE tenant_id = ${tenant.tenantId} AND event_type = 'VAULT_GAS_LOW'`
      assert.strictEqual(again[0]!.count, 2)

      // The other networks run on the simulated chain, whose GAS wallets are listed too (DevnetGasWallets.test.ts).
      const figures = (yield* ops.sweeps.gas({ params: { tenantId: tenant.tenantId } }).pipe(Effect.orDie))
        .filter((figure) => figure.networkKey === networkKey)
      assert.deepStrictEqual(figures.map((figure) => [figure.networkKey, figure.address, figure.assetId, figure.balanceRaw]), [
        [networkKey, gas, ethAssetId, "0"]
      ])
      // 20 token sweeps at the current fee: a multiple of 20 (the count waiting, 1, is fewer).
      assert.isTrue(BigInt(figures[0]!.recommendedMinRaw) > 0n && BigInt(figures[0]!.recommendedMinRaw) % 20n === 0n)
      const unknown = yield* Effect.flip(ops.sweeps.gas({ params: { tenantId: "0190a8b2-0000-7000-8000-000000000000" } }))
      assert.strictEqual(unknown._tag, "NotFound")

      yield* Effect.promise(() => node.setBalance({ address: gas as Hex, value: parseEther("1") }))
      yield* pass
      const funded = yield* sweepsOf(address)
      assert.strictEqual(funded.find((row) => row.kind === "SWEEP")!.status, "PENDING")
      assert.include(["PENDING", "CONFIRMING"], funded.find((row) => row.kind === "TOP_UP")!.status)
    }))

  it.effect("a balance below the sweep threshold (10 × the current cost of one sweep) waits; the next deposit adds to it and the whole is swept", () =>
    Effect.gen(function*() {
      // A base fee of 50 gwei: one native sweep costs 21,000 × (2 × base fee + tip) wei, so the threshold
      // (catalog sweepThresholdRaw null: 10 × that) is well above a 0.002 ETH deposit while the base fee stays high.
      yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${(50n * 10n ** 9n).toString(16)}`] as any }))
      yield* mine()
      // The client reuses one reading of the node's fees for 2 s (EvmWithdrawals.feeQuoteMillis): a reading taken
      // before the base fee rose must expire before any pass (the background loop's too) prices this sweep.
      yield* Effect.sleep("2100 millis")
      const tenant = yield* provisionTenant()
      const { address } = yield* depositAddress(tenant, "erin")
      const small = parseEther("0.002")
      yield* depositAndCredit(address, ethAssetId, small)
      yield* pass
      assert.deepStrictEqual(yield* sweepsOf(address), [], "below the threshold: no sweep")
      assert.strictEqual(yield* ethBalance(address), small)

      // The base fee falls block by block (empty blocks); the next credited deposit makes the address due again.
      yield* mine(40)
      const more = parseEther("0.05")
      yield* depositAndCredit(address, ethAssetId, more)
      yield* sweepThrough
      const [sweep] = yield* sweepsOf(address)
      assert.deepInclude(sweep, { status: "COMPLETED", assetId: ethAssetId })
      assert.strictEqual(BigInt(sweep!.amountRaw) + BigInt(sweep!.networkFeeRaw!), small + more)
      assert.strictEqual(yield* ethBalance(address), 0n)
    }))

  it.effect("a reorganization that drops a sweep's block before it is final: the same signed bytes again, no second signature or nonce", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* provisionTenant()
      const { address } = yield* depositAddress(tenant, "frank")
      const deposited = parseEther("0.3")
      yield* depositAndCredit(address, ethAssetId, deposited)
      yield* pass
      yield* mine()
      const [sent] = yield* sweepsOf(address)
      assert.strictEqual(sent!.status, "CONFIRMING")
      const included = yield* Effect.promise(() => node.getTransactionReceipt({ hash: sent!.txHash! as Hex }))
      // The block holding the sweep is replaced by an empty one (decisions.md: rebroadcast the same bytes).
      yield* Effect.promise(() => node.request({ method: "anvil_reorg" as any, params: [1, []] as any }))
      const gone = yield* Effect.promise(() => node.getBlock({ blockNumber: included.blockNumber }))
      assert.notStrictEqual(gone.hash, included.blockHash)
      yield* pass
      yield* mine()
      yield* mine(11)
      yield* pass
      const [swept] = yield* sweepsOf(address)
      assert.deepInclude(swept, { status: "COMPLETED", txHash: sent!.txHash })
      assert.strictEqual(BigInt(swept!.amountRaw) + BigInt(swept!.networkFeeRaw!), deposited)
      assert.strictEqual(yield* ethBalance(address), 0n)
      const versions = yield* sql<{ count: number }>`
        SELECT count(*)::int AS count FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
        WHERE s.purpose = 'SWEEP' AND s.owner_id = ${swept!.id}`
      assert.strictEqual(versions[0]!.count, 1)
    }))

  it.effect("a sweep stuck behind a base fee above its maxFeePerGas is never replaced (its address holds exactly its fee): same bytes, included once the base fee falls", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* provisionTenant()
      const { address } = yield* depositAddress(tenant, "gina")
      const deposited = parseEther("0.3")
      yield* depositAndCredit(address, ethAssetId, deposited)
      yield* pass
      const [sent] = yield* sweepsOf(address)
      assert.strictEqual(sent!.status, "CONFIRMING")
      const signed = yield* Effect.promise(() => node.getTransaction({ hash: sent!.txHash! as Hex }))
      // 100 × its maxFeePerGas: not includable for about 35 blocks (the base fee falls 12.5 % per empty block).
      const high = signed.maxFeePerGas! * 100n
      yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${high.toString(16)}`] as any }))
      yield* mine()
      yield* pass
      yield* mine(25)
      // More than 20 blocks without inclusion: a withdrawal would be replaced with raised fees (docs/sending.md).
      yield* pass
      const versionsOf = Effect.map(
        sql<{ count: number }>`SELECT count(*)::int AS count FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
          WHERE s.purpose = 'SWEEP' AND s.owner_id = ${sent!.id}`,
        (rows) => rows[0]!.count
      )
      assert.strictEqual(yield* versionsOf, 1, "no replacement: a higher fee could not be paid from the swept address")
      assert.strictEqual((yield* sweepsOf(address))[0]!.status, "CONFIRMING")

      yield* mine(20)
      yield* pass
      yield* mine()
      yield* mine(11)
      yield* pass
      const [swept] = yield* sweepsOf(address)
      assert.deepInclude(swept, { status: "COMPLETED", txHash: sent!.txHash })
      assert.strictEqual(yield* versionsOf, 1)
      assert.strictEqual(BigInt(swept!.amountRaw) + BigInt(swept!.networkFeeRaw!), deposited)
      assert.strictEqual(yield* ethBalance(address), 0n)
    }))

  it.effect("GET /ops/sweeps: newest first, filtered by network and status, paged by cursor", () =>
    Effect.gen(function*() {
      const ops = yield* opsClient
      const all = yield* ops.sweeps.list({ query: { networkKey } }).pipe(Effect.orDie)
      assert.isTrue(all.items.length >= 5)
      const ids = all.items.map((item) => item.id)
      assert.deepStrictEqual(ids, ids.toSorted().reverse())
      const completed = yield* ops.sweeps.list({ query: { status: "COMPLETED" } }).pipe(Effect.orDie)
      assert.isTrue(completed.items.length >= 4)
      assert.isTrue(completed.items.every((item) => item.status === "COMPLETED" && item.networkFeeRaw !== null && item.txHash !== null))
      const first = yield* ops.sweeps.list({ query: { networkKey, limit: 2 } }).pipe(Effect.orDie)
      assert.strictEqual(first.items.length, 2)
      const second = yield* ops.sweeps.list({ query: { networkKey, limit: 2, cursor: first.nextCursor! } }).pipe(Effect.orDie)
      assert.deepStrictEqual([...first.items, ...second.items].map((item) => item.id), ids.slice(0, 4))
      const none = yield* ops.sweeps.list({ query: { networkKey: "BTC_TESTNET" } }).pipe(Effect.orDie)
      assert.deepStrictEqual(none, { items: [], nextCursor: null })
    }))
})
