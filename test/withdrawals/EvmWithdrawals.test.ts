/**
 * Withdrawals on a real EVM node (docs/sending.md; decisions.md "Sending on real networks"): the whole service with
 * ETH_SEPOLIA on a local anvil (chain id 11155111, blocks mined only when the test asks). The platform HOT address is
 * funded on the node; the catalog's USDT contract gets an OpenZeppelin ERC-20's code (test/support/Anvil.ts).
 *
 * Held here: ETH and ERC-20 withdrawals reach COMPLETED with the recipient paid, HOT debited by amount + the actual
 * fee, and networkFeeRaw = gasUsed × effectiveGasPrice of the receipt; 20 withdrawals at once take consecutive nonces
 * and are all in the node's pool together; a transfer that reverts is FAILED / REVERTED_ON_CHAIN with the funds
 * back and the burned fee booked; a transaction stuck 20 blocks is replaced (same nonce, fees raised) and the
 * withdrawal keeps one record showing the included hash; a reorganization that drops the block rebroadcasts the same
 * bytes, never a second nonce.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { erc20Abi, type Hex, parseEther, parseTransaction } from "viem"
import { beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { anvilAccounts, cloneTokenAt, deployToken, startAnvil } from "../support/Anvil.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { balance, entryCount, fund, getTransaction, hotAddress, waitFor, walletOf, withdraw } from "./WithdrawalHelpers.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const eth = "ETH_SEPOLIA_ETH"
const usdt = "ETH_SEPOLIA_USDT"

beforeAll(() => Effect.runPromise(anvil.ready))

const mine = (blocks = 1) => Effect.promise(() => node.mine({ blocks }))
const head = Effect.promise(() => node.getBlockNumber())
/** Runs the confirmation check now rather than waiting for the background loop (both are safe together). */
const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm("ETH_SEPOLIA")
})

const ethBalance = (address: string) => Effect.promise(() => node.getBalance({ address: address as Hex }))
const tokenBalance = (contract: Hex, address: string) =>
  Effect.promise(() => node.readContract({ address: contract, abi: erc20Abi, functionName: "balanceOf", args: [address as Hex] }))
const receiptOf = (hash: string) => Effect.promise(() => node.getTransactionReceipt({ hash: hash as Hex }))
/** Runs the confirmation check until the node holds `hash` (in its pool or a block); at most 50 rounds. */
const untilNodeHolds = (hash: string) =>
  Effect.gen(function*() {
    for (let round = 0; round < 50; round++) {
      yield* confirm
      const held = yield* Effect.promise(() => node.getTransaction({ hash: hash as Hex }).then(() => true, () => false))
      if (held) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
    }
    return yield* Effect.die(new Error(`the node never received ${hash} again`))
  })

/** A fresh recipient address per test (no code, no balance). */
let recipients = 0
const recipient = () => `0x${(0xbeef0000 + ++recipients).toString(16).padStart(40, "0")}`

const sends = (withdrawalIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ owner_id: string; nonce: string; state: string; versions: number }>`
      SELECT s.owner_id, s.nonce::text AS nonce, s.state,
        (SELECT count(*)::int FROM outgoing_versions v WHERE v.send_id = s.id) AS versions
      FROM outgoing_sends s WHERE s.owner_id IN ${sql.in(withdrawalIds)} ORDER BY s.nonce`
  })

/** Mines until the withdrawal is final by ETH_SEPOLIA's rule (12 confirmations) and checks it. */
const mineToFinal = (tenant: TestTenant, id: string, status = "COMPLETED", subStatus: string | null = null) =>
  Effect.gen(function*() {
    yield* mine(12)
    yield* confirm
    return yield* waitFor(tenant, id, status, subStatus)
  })

const fundedWallet = (tenant: TestTenant, name: string, assetId: string, amount: bigint) =>
  Effect.gen(function*() {
    const wallet = yield* walletOf(tenant, name, "ETH_SEPOLIA")
    yield* fund(tenant, wallet.walletId, assetId, amount)
    return wallet
  })

layer(
  makeTestAppLayer({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(anvil.url) } }),
  { excludeTestServices: true, timeout: 120_000 }
)("withdrawals on an EVM node (anvil)", (it) => {
  let contract: Hex

  it.effect("setup: HOT funded with ETH and the catalog's USDT on the node", () =>
    Effect.gen(function*() {
      const hot = yield* hotAddress("ETH_SEPOLIA")
      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: parseEther("1000") }))
      contract = (yield* Catalog).asset(usdt)!.contract!.toLowerCase() as Hex
      const source = yield* deployToken(anvil, 10n ** 24n)
      // The clone gives the deployer a balance; the deployer (an unlocked dev account) pays HOT from it.
      yield* cloneTokenAt(anvil, source, contract, anvilAccounts[0], 10n ** 15n)
      yield* Effect.promise(() =>
        node.writeContract({
          account: anvilAccounts[0],
          address: contract,
          abi: erc20Abi,
          functionName: "transfer",
          args: [hot as Hex, 10n ** 15n]
        })
      )
      yield* mine()
      assert.strictEqual(yield* tokenBalance(contract, hot), 10n ** 15n)
    }))

  it.effect("ETH: COMPLETED with the recipient paid, HOT debited by amount + the receipt's fee, networkFeeRaw = gasUsed × effectiveGasPrice", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const wallet = yield* fundedWallet(tenant, "eth-payer", eth, parseEther("2"))
      const to = recipient()
      const amount = parseEther("0.25")
      const hotBefore = yield* ethBalance(hot)
      const created = yield* withdraw(tenant, wallet.walletId, eth, to, amount, "eth-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      yield* mine()
      const receipt = yield* receiptOf(confirming.txHash)
      assert.strictEqual(receipt.status, "success")
      const done = yield* mineToFinal(tenant, created.json.withdrawalId)
      const fee = receipt.gasUsed * receipt.effectiveGasPrice
      assert.strictEqual(done.txHash, confirming.txHash)
      assert.strictEqual(done.networkFeeRaw, fee.toString())
      assert.strictEqual(done.networkFeeAssetId, eth)
      assert.strictEqual(yield* ethBalance(to), amount)
      assert.strictEqual(hotBefore - (yield* ethBalance(hot)), amount + fee)
      const payer = yield* balance(tenant, wallet.walletId, eth)
      assert.strictEqual(payer.frozen, "0")
      assert.strictEqual(BigInt(payer.available), parseEther("2") - amount - BigInt(done.feeRaw))
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "NETWORK_FEE"), 1)
    }))

  it.effect("ERC-20: COMPLETED with the token moved from HOT to the recipient and the fee paid in ETH", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const wallet = yield* fundedWallet(tenant, "usdt-payer", usdt, 500_000_000n)
      const to = recipient()
      const amount = 120_000_000n
      const [hotEth, hotToken] = [yield* ethBalance(hot), yield* tokenBalance(contract, hot)]
      const created = yield* withdraw(tenant, wallet.walletId, usdt, to, amount, "usdt-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      yield* mine()
      const receipt = yield* receiptOf(confirming.txHash)
      assert.strictEqual(receipt.to?.toLowerCase(), contract)
      const done = yield* mineToFinal(tenant, created.json.withdrawalId)
      const fee = receipt.gasUsed * receipt.effectiveGasPrice
      assert.strictEqual(done.networkFeeRaw, fee.toString())
      assert.strictEqual(yield* tokenBalance(contract, to), amount)
      assert.strictEqual(hotToken - (yield* tokenBalance(contract, hot)), amount)
      assert.strictEqual(hotEth - (yield* ethBalance(hot)), fee)
    }))

  it.effect("20 withdrawals at once: consecutive nonces, all in the node's pool together, one block includes them all", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const wallet = yield* fundedWallet(tenant, "many", eth, parseEther("10"))
      const nonceBefore = yield* Effect.promise(() => node.getTransactionCount({ address: hot as Hex }))
      const created = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, index) => index),
        (index) => withdraw(tenant, wallet.walletId, eth, recipient(), parseEther("0.01"), `many-${index}`),
        { concurrency: 20 }
      )
      const ids = created.map((response) => {
        assert.strictEqual(response.status, 202, response.text)
        return response.json.withdrawalId as string
      })
      yield* Effect.forEach(ids, (id) => waitFor(tenant, id, "CONFIRMING"), { concurrency: 5 })
      const rows = yield* sends(ids)
      assert.deepStrictEqual(rows.map((row) => Number(row.nonce)), Array.from({ length: 20 }, (_, index) => nonceBefore + index))
      // All twenty are waiting in the node's pool at once: its pending count is 20 ahead of the mined one.
      const pending = yield* Effect.promise(() => node.getTransactionCount({ address: hot as Hex, blockTag: "pending" }))
      assert.strictEqual(pending - nonceBefore, 20)
      yield* mine()
      const block = yield* Effect.promise(() => node.getBlock({ blockTag: "latest" }))
      assert.strictEqual(block.transactions.length, 20)
      yield* mineToFinal(tenant, ids[0]!)
      yield* Effect.forEach(ids, (id) => waitFor(tenant, id, "COMPLETED"), { concurrency: 5 })
      assert.isTrue((yield* sends(ids)).every((row) => row.state === "CONFIRMED" && row.versions === 1))
    }))

  it.effect("a token transfer that reverts on chain: FAILED / REVERTED_ON_CHAIN, funds back to available, the burned fee booked", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "revert", usdt, 300_000_000n)
      const created = yield* withdraw(tenant, wallet.walletId, usdt, recipient(), 100_000_000n, "revert-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      // The contract now reverts every call (PUSH1 0 PUSH1 0 REVERT) before the transaction is mined.
      const code = yield* Effect.promise(() => node.getCode({ address: contract }))
      yield* Effect.promise(() => node.setCode({ address: contract, bytecode: "0x60006000fd" }))
      yield* mine()
      const receipt = yield* receiptOf(confirming.txHash)
      assert.strictEqual(receipt.status, "reverted")
      const failed = yield* mineToFinal(tenant, created.json.withdrawalId, "FAILED", "REVERTED_ON_CHAIN")
      yield* Effect.promise(() => node.setCode({ address: contract, bytecode: code! }))
      assert.strictEqual(failed.networkFeeRaw, (receipt.gasUsed * receipt.effectiveGasPrice).toString())
      assert.deepStrictEqual(yield* balance(tenant, wallet.walletId, usdt), { available: "300000000", frozen: "0" })
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "WITHDRAWAL_RELEASE"), 1)
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "NETWORK_FEE"), 1)
    }))

  it.effect("stuck 20 blocks behind a raised base fee: replaced with the same nonce and payload and higher fees; one record, the included hash", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "stuck", eth, parseEther("1"))
      const to = recipient()
      const created = yield* withdraw(tenant, wallet.walletId, eth, to, parseEther("0.1"), "stuck-1")
      assert.strictEqual(created.status, 202, created.text)
      const first = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      const signed = parseTransaction(yield* rawOf(created.json.withdrawalId, 1))
      // Blocks whose base fee is above what the transaction offers: it waits in the pool, unmined.
      const high = signed.maxFeePerGas! * 4n
      yield* confirm // the check that records the height it was first seen waiting at
      for (let block = 0; block < 21; block++) {
        yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${high.toString(16)}`] as any }))
        yield* mine()
      }
      const unmined = yield* Effect.promise(() => node.getTransactionReceipt({ hash: first.txHash }).then(() => false, () => true))
      assert.isTrue(unmined, "not included while the base fee is above its maxFeePerGas")
      yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${high.toString(16)}`] as any }))
      yield* confirm
      const rows = yield* sends([created.json.withdrawalId])
      assert.strictEqual(rows[0]!.versions, 2)
      const replacement = parseTransaction(yield* rawOf(created.json.withdrawalId, 2))
      assert.strictEqual(replacement.nonce, signed.nonce)
      assert.deepStrictEqual([replacement.to, replacement.value, replacement.gas], [signed.to, signed.value, signed.gas])
      assert.isTrue(replacement.maxFeePerGas! * 1000n >= signed.maxFeePerGas! * 1125n)
      assert.isTrue(replacement.maxPriorityFeePerGas! * 1000n >= signed.maxPriorityFeePerGas! * 1125n)
      yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${high.toString(16)}`] as any }))
      yield* mine()
      const done = yield* mineToFinal(tenant, created.json.withdrawalId)
      const receipt = yield* receiptOf(done.txHash)
      assert.notStrictEqual(done.txHash, first.txHash)
      assert.strictEqual(done.networkFeeRaw, (receipt.gasUsed * receipt.effectiveGasPrice).toString())
      assert.strictEqual(yield* ethBalance(to), parseEther("0.1"))
      const listed = yield* getTransaction(tenant, created.json.withdrawalId)
      assert.strictEqual(listed.txHash, done.txHash)
    }))

  it.effect("a reorganization drops the withdrawal's block before it is final: the same bytes are broadcast again and included; one nonce", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "reorg", eth, parseEther("1"))
      const to = recipient()
      const created = yield* withdraw(tenant, wallet.walletId, eth, to, parseEther("0.2"), "reorg-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      yield* mine()
      const includedAt = (yield* receiptOf(confirming.txHash)).blockNumber
      yield* mine(3)
      // Replace every block from the withdrawal's one with empty blocks: its transaction is in no block now.
      const depth = Number((yield* head) - includedAt + 1n)
      yield* Effect.promise(() => node.request({ method: "anvil_reorg" as any, params: [depth, []] as any }))
      // A node may put a reorganized transaction back in its pool; this one forgets it, the harder case.
      yield* Effect.promise(() => node.request({ method: "anvil_dropTransaction" as any, params: [confirming.txHash] as any }))
      const gone = yield* Effect.promise(() => node.getTransactionReceipt({ hash: confirming.txHash }).then(() => false, () => true))
      assert.isTrue(gone, "the reorganization removed the withdrawal's transaction")
      // In no block and unknown to the node: the same bytes again. The background loop may hold the broadcast claim
      // when this check runs (it then leaves the send to that loop), so the node is asked until it has the bytes.
      yield* untilNodeHolds(confirming.txHash)
      yield* mine()
      const receipt = yield* receiptOf(confirming.txHash)
      assert.strictEqual(receipt.status, "success")
      const done = yield* mineToFinal(tenant, created.json.withdrawalId)
      assert.strictEqual(done.txHash, confirming.txHash)
      const rows = yield* sends([created.json.withdrawalId])
      assert.deepStrictEqual(rows.map((row) => [row.versions, row.state]), [[1, "CONFIRMED"]])
      assert.strictEqual(yield* ethBalance(to), parseEther("0.2"))
    }))
})

const rawOf = (withdrawalId: string, version: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ raw: string }>`
      SELECT v.raw FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
      WHERE s.owner_id = ${withdrawalId} AND v.version = ${version}`
    return row!.raw as `0x02${string}`
  })
