/**
 * Faults around a real EVM node (issue 10, "Bad input and faults"; decisions.md "Sending on real networks": node
 * unreachable, timeouts and garbage are retried, never terminal): the service talks to anvil through a proxy
 * (test/support/RpcProxy.ts) that can answer garbage, HTTP 500, or reset connections, or forget transactions. Held:
 * the tenant never sees a 500, the withdrawal waits (never FAILED, never a second transaction), and completes once
 * the node answers again; fees above the network's cap make it wait, not pay; a HOT wallet short of funds holds it
 * QUEUED / INSUFFICIENT_FUNDS_PLATFORM until funded.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type Hex, parseEther } from "viem"
import { beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { auditLedger } from "../../src/ledger/LedgerAudit.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { startAnvil } from "../support/Anvil.ts"
import { startRpcProxy } from "../support/RpcProxy.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { call, fund, getTransaction, hotAddress, tenantAccount, waitFor, walletOf, withdraw, withdrawAccepted } from "./WithdrawalHelpers.ts"

const anvil = startAnvil({ chainId: 11155111 })
const proxy = startRpcProxy(anvil.url)
const { client: node } = anvil
const eth = "ETH_SEPOLIA_ETH"

beforeAll(() => Effect.runPromise(anvil.ready))

const mine = (blocks = 1) => Effect.promise(() => node.mine({ blocks }))
const processor = Effect.gen(function*() {
  return yield* WithdrawalProcessor
})
const processNow = (id: string) => Effect.flatMap(processor, (service) => service.process(id))
const confirm = Effect.flatMap(processor, (service) => service.confirm("ETH_SEPOLIA"))

let recipients = 0
const recipient = () => `0x${(0xfa170000 + ++recipients).toString(16).padStart(40, "0")}` as Hex

const payerWith = (tenant: TestTenant, name: string, amount: bigint) =>
  Effect.gen(function*() {
    const wallet = yield* walletOf(tenant, name, "ETH_SEPOLIA")
    yield* fund(tenant, wallet.walletId, eth, amount)
    return wallet.walletId
  })

/** Transactions HOT sent that are in blocks (its mined nonce). */
const hotNonce = (hot: string) => Effect.promise(() => node.getTransactionCount({ address: hot as Hex }))

const completes = (tenant: TestTenant, id: string) =>
  Effect.gen(function*() {
    yield* waitFor(tenant, id, "CONFIRMING")
    yield* mine(13)
    yield* confirm
    return yield* waitFor(tenant, id, "COMPLETED")
  })

layer(
  makeTestAppLayer({ chainRpcUrls: { ETH_SEPOLIA: Redacted.make(proxy.url) } }),
  { excludeTestServices: true, timeout: 120_000 }
)("faults of an EVM node (anvil behind a proxy)", (it) => {
  it.effect("setup: HOT funded", () =>
    Effect.gen(function*() {
      const hot = yield* hotAddress("ETH_SEPOLIA")
      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: parseEther("100") }))
      yield* mine()
    }))

  it.effect("a node answering garbage, HTTP 500 or resetting connections: the withdrawal waits, the tenant never sees a 500, then it completes with one transaction", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const payer = yield* payerWith(tenant, "faults", parseEther("1"))
      const to = recipient()
      const nonceBefore = yield* hotNonce(hot)
      for (const mode of ["garbage", "error500", "reset"] as const) {
        proxy.mode = mode
        const calls = [...proxy.calls.values()].reduce((sum, count) => sum + count, 0)
        const created = mode === "garbage"
          ? yield* withdraw(tenant, payer, eth, to, parseEther("0.1"), "faults-1")
          : undefined
        if (created !== undefined) assert.strictEqual(created.status, 202, created.text)
        const id = created?.json.withdrawalId ?? (yield* currentId(tenant))
        // Asked again now rather than after the supervisor's 10 s: the answer must still be "wait".
        const status = yield* processNow(id)
        assert.include(["QUEUED", "PENDING_SIGNATURE"], status, `${mode}: waits`)
        const seen = yield* getTransaction(tenant, id)
        assert.include(["QUEUED", "PENDING_SIGNATURE"], seen.status, mode)
        assert.isNull(seen.txHash)
        // The service did ask the faulty node (so "waits" is its answer to the fault, not to silence).
        assert.isAbove([...proxy.calls.values()].reduce((sum, count) => sum + count, 0), calls, mode)
      }
      proxy.mode = "pass"
      const id = yield* currentId(tenant)
      yield* processNow(id)
      const done = yield* completes(tenant, id)
      assert.strictEqual(yield* Effect.promise(() => node.getBalance({ address: to })), parseEther("0.1"))
      assert.strictEqual((yield* hotNonce(hot)) - nonceBefore, 1, "one transaction")
      assert.strictEqual(done.status, "COMPLETED")
    }))

  it.effect("a node that forgets the transaction while CONFIRMING: the same bytes again, one transaction, COMPLETED", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const payer = yield* payerWith(tenant, "forget", parseEther("1"))
      const nonceBefore = yield* hotNonce(hot)
      const created = yield* withdraw(tenant, payer, eth, recipient(), parseEther("0.1"), "forget-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      proxy.mode = "nullReceipts"
      const broadcasts = proxy.calls.get("eth_sendRawTransaction") ?? 0
      yield* confirm
      // Unknown to the node as far as the service can tell: rebroadcast, and "already known" is no error.
      assert.isAbove(proxy.calls.get("eth_sendRawTransaction") ?? 0, broadcasts)
      assert.strictEqual((yield* getTransaction(tenant, created.json.withdrawalId)).status, "CONFIRMING")
      proxy.mode = "pass"
      const done = yield* completes(tenant, created.json.withdrawalId)
      assert.strictEqual(done.txHash, confirming.txHash)
      assert.strictEqual((yield* hotNonce(hot)) - nonceBefore, 1)
    }))

  it.effect("a transaction the node refuses for good: FAILED / BROADCAST_FAILED with the funds back, its nonce filled by a 0-value self-transfer, and the next withdrawal is not stuck behind the gap", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const payer = yield* payerWith(tenant, "refused", parseEther("1"))
      const nonceBefore = yield* hotNonce(hot)
      proxy.mode = "refuseNextSend"
      const refused = yield* withdraw(tenant, payer, eth, recipient(), parseEther("0.1"), "refused-1")
      assert.strictEqual(refused.status, 202, refused.text)
      const failed = yield* waitFor(tenant, refused.json.withdrawalId, "FAILED", "BROADCAST_FAILED")
      assert.isNull(failed.txHash)
      const sql = yield* SqlClient.SqlClient
      const [send] = yield* sql<{ state: string; nonce: string; versions: Array<string> }>`
        SELECT s.state, s.nonce::text AS nonce,
          (SELECT array_agg(v.kind ORDER BY v.version) FROM outgoing_versions v WHERE v.send_id = s.id) AS versions
        FROM outgoing_sends s WHERE s.owner_id = ${refused.json.withdrawalId}`
      assert.deepStrictEqual([send!.state, Number(send!.nonce), send!.versions], ["FILLING", nonceBefore, ["PAYLOAD", "FILL"]])
      // The next withdrawal takes the next nonce; it is mined right behind the fill.
      const next = yield* withdraw(tenant, payer, eth, recipient(), parseEther("0.1"), "refused-2")
      assert.strictEqual(next.status, 202, next.text)
      yield* completes(tenant, next.json.withdrawalId)
      assert.strictEqual((yield* hotNonce(hot)) - nonceBefore, 2, "the fill and the next withdrawal")
      const [settled] = yield* sql<{ state: string; included_tx_hash: string }>`
        SELECT state, included_tx_hash FROM outgoing_sends WHERE owner_id = ${refused.json.withdrawalId}`
      assert.strictEqual(settled!.state, "REJECTED")
      const fill = yield* Effect.promise(() => node.getTransaction({ hash: settled!.included_tx_hash as Hex }))
      assert.deepStrictEqual([fill.from.toLowerCase(), fill.to?.toLowerCase(), fill.value, fill.nonce], [hot, hot, 0n, nonceBefore])
      assert.deepStrictEqual(yield* Effect.map(call(tenant, "GET", `/v1/wallets/${payer}/assets`), (response) =>
        (response.json as Array<any>).find((item) => item.assetId === eth).frozen), "0")
      // HOT paid the fill's fee: booked on the send (SEND_NETWORK_FEE), beside the next withdrawal's NETWORK_FEE.
      const fillReceipt = yield* Effect.promise(() => node.getTransactionReceipt({ hash: settled!.included_tx_hash as Hex }))
      const fillFee = fillReceipt.gasUsed * fillReceipt.effectiveGasPrice
      const [booked] = yield* sql<{ amount: string }>`
        SELECT p.amount::text AS amount FROM ledger_entries e
        JOIN outgoing_sends s ON s.id = e.reference_id AND s.owner_id = ${refused.json.withdrawalId}
        JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
        WHERE e.kind = 'SEND_NETWORK_FEE' AND e.tenant_id = ${tenant.tenantId} AND a.kind = 'NETWORK_FEES'`
      assert.strictEqual(booked?.amount, (-fillFee).toString())
      const nextFee = BigInt((yield* getTransaction(tenant, next.json.withdrawalId)).networkFeeRaw)
      assert.strictEqual(yield* tenantAccount(tenant, "NETWORK_FEES", eth), (-(fillFee + nextFee)).toString())
      const audit = yield* auditLedger
      assert.deepStrictEqual(audit.checks.find((check) => check.check === "sendFeesBooked")!.discrepancies, [])
    }))

  it.effect("base fee above the network's fee cap: nothing is signed, the withdrawal waits QUEUED; under the cap again, it completes", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const cap = (yield* Catalog).network("ETH_SEPOLIA")!.feeRateCap
      const payer = yield* payerWith(tenant, "cap", parseEther("1"))
      // Twice the cap: an empty block lowers the next base fee by 12.5 %, still far above the cap.
      yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: [`0x${(cap * 2n).toString(16)}`] as any }))
      yield* mine()
      // The client's fee reading lasts 2 s (EvmWithdrawals.feeQuoteMillis).
      yield* Effect.sleep("2100 millis")
      const id = yield* withdrawAccepted(tenant, payer, eth, recipient(), parseEther("0.1"), "cap-1")
      yield* Effect.sleep("500 millis")
      assert.strictEqual(yield* processNow(id), "QUEUED")
      yield* Effect.promise(() => node.request({ method: "anvil_setNextBlockBaseFeePerGas" as any, params: ["0x3b9aca00"] as any }))
      yield* mine()
      yield* Effect.sleep("2100 millis")
      yield* processNow(id)
      yield* completes(tenant, id)
    }))

  it.effect("HOT short of the amount: QUEUED / INSUFFICIENT_FUNDS_PLATFORM and cancellable; funded, it goes on chain", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("ETH_SEPOLIA")
      const payer = yield* payerWith(tenant, "short", parseEther("5"))
      const held = yield* Effect.promise(() => node.getBalance({ address: hot as Hex }))
      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: parseEther("0.01") }))
      const created = yield* withdraw(tenant, payer, eth, recipient(), parseEther("1"), "short-1")
      assert.strictEqual(created.status, 202, created.text)
      yield* waitFor(tenant, created.json.withdrawalId, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
      yield* Effect.promise(() => node.setBalance({ address: hot as Hex, value: held }))
      yield* processNow(created.json.withdrawalId)
      yield* completes(tenant, created.json.withdrawalId)
    }))
})

/** The tenant's newest withdrawal. */
const currentId = (tenant: TestTenant) =>
  Effect.gen(function*() {
    const list = yield* call(tenant, "GET", "/v1/transactions?kind=WITHDRAWAL&limit=1")
    assert.strictEqual(list.status, 200, list.text)
    return list.json.items[0].id as string
  })
