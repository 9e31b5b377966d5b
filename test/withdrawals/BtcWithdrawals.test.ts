/**
 * Withdrawals on a BTC node (docs/btc.md; decisions.md "Sending on real networks" and "Operating wallets, sweeps,
 * gas and fee floors": BTC has no sweeps, withdrawals spend credited deposit outputs directly): the whole service
 * with BTC_TESTNET on a regtest Litecoin Core node (test/support/Litecoind.ts), blocks made only when the test asks.
 *
 * Held here: a withdrawal from HOT's outputs reaches COMPLETED at the 2nd confirmation with the recipient paid, the
 * change back to HOT, and networkFeeRaw = inputs - outputs of the transaction as the node has it; one spends a
 * credited deposit output (signed with its wallet's own key) together with HOT's; withdrawals at once never share
 * an input (reserved in PostgreSQL, sql/0018_btc_outputs.sql); with no confirmed output left, a withdrawal waits
 * for HOT's change to confirm instead of spending an output twice; one whose input somebody else spent is FAILED /
 * BROADCAST_FAILED with the funds back, before its broadcast and, once that spend is final, after it (CONFIRMING,
 * its block reorganized away); one stuck 6 blocks is replaced by fee (BIP 125).
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
import { balance, call, fund, getTransaction, hotAddress, statusEvents, waitFor, walletOf, withdraw, withdrawAccepted } from "./WithdrawalHelpers.ts"

const node = startLitecoind()
const networkKey = "BTC_TESTNET"
const btc = "BTC_TESTNET_BTC"
const network = bitcoinNetworks.test

beforeAll(() => node.ready, 60_000)

const promise = <A>(run: () => Promise<A>) => Effect.promise(run)
const mine = (count: number) => promise(() => node.mine(count))
const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm(networkKey)
})
const scan = Effect.gen(function*() {
  const watcher = yield* DepositWatcher
  return yield* watcher.scan(networkKey)
})

/** A P2WPKH address nobody holds the key of. */
const recipient = () => bitcoin.payments.p2wpkh({ hash: randomBytes(20), network }).address!
/** The recipient's address holds no output on the node: it was never paid. */
const assertNeverPaid = (to: string) =>
  Effect.map(
    promise(() => node.rpc("scantxoutset", ["start", [`addr(${node.nodeAddress(to, "test")})`]])),
    (scan: any) => assert.isUndefined(scan.unspents[0], "the recipient was never paid")
  )

/** The transaction as the node has it, decoded by bitcoinjs: exact satoshi values, inputs as `txid:vout`. */
const transactionOf = (txid: string) =>
  promise(async () => bitcoin.Transaction.fromHex(await node.rpc<string>("getrawtransaction", [txid, false])))
const inputsOf = (tx: bitcoin.Transaction) =>
  tx.ins.map((input) => `${Buffer.from(input.hash).reverse().toString("hex")}:${input.index}`)
/** Inputs minus outputs, every input's value read from the transaction that made it. */
const feeOf = (tx: bitcoin.Transaction) =>
  Effect.gen(function*() {
    let inputs = 0n
    for (const input of tx.ins) {
      const previous = yield* transactionOf(Buffer.from(input.hash).reverse().toString("hex"))
      inputs += previous.outs[input.index]!.value
    }
    return inputs - tx.outs.reduce((sum, output) => sum + output.value, 0n)
  })
const paidTo = (tx: bitcoin.Transaction, address: string) =>
  tx.outs.filter((output) => Buffer.from(output.script).equals(Buffer.from(bitcoin.address.toOutputScript(address, network))))
    .map((output) => output.value)

const fundedWallet = (tenant: TestTenant, name: string, amount: bigint) =>
  Effect.gen(function*() {
    const wallet = yield* walletOf(tenant, name, networkKey)
    yield* fund(tenant, wallet.walletId, btc, amount)
    return wallet
  })

/** CONFIRMING, then the 2 blocks BTC_TESTNET's rule asks for, then COMPLETED. */
const toCompleted = (tenant: TestTenant, id: string) =>
  Effect.gen(function*() {
    const confirming = yield* waitFor(tenant, id, "CONFIRMING")
    yield* mine(2)
    yield* confirm
    const done = yield* waitFor(tenant, id, "COMPLETED", null)
    assert.strictEqual(done.txHash, confirming.txHash)
    return done
  })

layer(
  makeTestAppLayer({ chainRpcUrls: { BTC_TESTNET: Redacted.make(node.url) } }),
  { excludeTestServices: true, timeout: 120_000 }
)("withdrawals on a BTC node (litecoind regtest)", (it) => {
  it.effect("setup: HOT holds five confirmed outputs on the node", () =>
    Effect.gen(function*() {
      const hot = yield* hotAddress(networkKey)
      assert.match(hot, /^tb1q/)
      for (let index = 0; index < 5; index++) yield* promise(() => node.send(hot, "test", 20_000_000n))
      yield* mine(1)
    }))

  it.effect("from HOT's outputs: COMPLETED at the 2nd confirmation, recipient paid, change to HOT, networkFeeRaw = inputs - outputs", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress(networkKey)
      const wallet = yield* fundedWallet(tenant, "payer", 10_000_000n)
      const to = recipient()
      const amount = 1_500_001n
      const done = yield* toCompleted(tenant, yield* withdrawAccepted(tenant, wallet.walletId, btc, to, amount, "btc-1"))
      const tx = yield* transactionOf(done.txHash)
      assert.deepStrictEqual(paidTo(tx, to), [amount])
      assert.strictEqual(paidTo(tx, hot).length, 1, "the change goes back to HOT")
      const fee = yield* feeOf(tx)
      assert.isTrue(fee > 0n)
      assert.strictEqual(done.networkFeeRaw, fee.toString())
      assert.strictEqual(done.networkFeeAssetId, btc)
      const payer = yield* balance(tenant, wallet.walletId, btc)
      assert.strictEqual(payer.frozen, "0")
      assert.strictEqual(BigInt(payer.available), 10_000_000n - amount - BigInt(done.feeRaw))
    }))

  it.effect("a credited deposit output is spent together with HOT's, signed with its wallet's own key", () =>
    Effect.gen(function*() {
      yield* scan
      const tenant = yield* provisionTenant()
      const depositWallet = yield* walletOf(tenant, "depositor", networkKey)
      const paid = yield* promise(() => node.pay(depositWallet.address, "test", 300_000n))
      yield* mine(1)
      yield* scan
      const listed = yield* call(tenant, "GET", "/v1/transactions?kind=DEPOSIT")
      const [deposit] = listed.json.items as Array<any>
      assert.deepStrictEqual([deposit.status, deposit.txHash], ["COMPLETED", paid.txHash], listed.text)
      // Which output paid the deposit address (the harness wallet's change is the other one).
      const vout = (yield* transactionOf(paid.txHash)).outs.findIndex((output) =>
        Buffer.from(output.script).equals(Buffer.from(bitcoin.address.toOutputScript(depositWallet.address, network))))
      const payer = yield* fundedWallet(tenant, "payer", 10_000_000n)
      const to = recipient()
      // More than the deposit output holds: HOT's output completes it.
      const done = yield* toCompleted(tenant, yield* withdrawAccepted(tenant, payer.walletId, btc, to, 2_000_000n, "btc-deposit-input"))
      const tx = yield* transactionOf(done.txHash)
      const inputs = inputsOf(tx)
      assert.include(inputs, `${paid.txHash}:${vout}`, "the deposit output is an input")
      assert.isAtLeast(inputs.length, 2, "with one of HOT's")
      assert.deepStrictEqual(paidTo(tx, to), [2_000_000n])
      assert.strictEqual(done.networkFeeRaw, (yield* feeOf(tx)).toString())
      // Spent: the node no longer has it as unspent.
      assert.isNull(yield* promise(() => node.rpc("gettxout", [paid.txHash, vout, true])))
    }))

  it.effect("withdrawals at once never share an input; each is COMPLETED", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "many", 50_000_000n)
      const created = yield* Effect.forEach([0, 1, 2], (index) =>
        withdraw(tenant, wallet.walletId, btc, recipient(), 1_000_000n + BigInt(index), `btc-many-${index}`), { concurrency: "unbounded" })
      for (const response of created) assert.strictEqual(response.status, 202, response.text)
      const confirming = yield* Effect.forEach(created, (response) => waitFor(tenant, response.json.withdrawalId, "CONFIRMING"))
      const inputSets = yield* Effect.forEach(confirming, (withdrawal) => Effect.map(transactionOf(withdrawal.txHash), inputsOf))
      const all = inputSets.flat()
      assert.strictEqual(new Set(all).size, all.length, `inputs shared: ${JSON.stringify(inputSets)}`)
      yield* mine(2)
      yield* confirm
      for (const response of created) yield* waitFor(tenant, response.json.withdrawalId, "COMPLETED", null)
    }))

  it.effect("HOT's output spent elsewhere before the broadcast: FAILED / BROADCAST_FAILED with the funds back, never a second payment", () =>
    Effect.gen(function*() {
      const hot = yield* hotAddress(networkKey)
      // The largest of HOT's outputs, which coin selection takes first.
      const funding = yield* promise(() => node.send(hot, "test", 100_000_000n))
      yield* mine(1)
      const vout = (yield* transactionOf(funding)).outs.findIndex((output) =>
        Buffer.from(output.script).equals(Buffer.from(bitcoin.address.toOutputScript(hot, network))))
      // Somebody holding HOT's key (an operator's wallet) spends it, paying a high fee: in the mempool, unconfirmed,
      // so the node's UTXO set (scantxoutset) still lists the output.
      const signer = yield* Signer
      const elsewhere = yield* signer.signTransaction({
        family: "BTC",
        btcNetwork: "test",
        inputs: [{ txid: funding, vout, value: 100_000_000n, key: platformKey("HOT") }],
        outputs: [{ address: recipient(), value: 99_800_000n }]
      }).pipe(Effect.orDie)
      yield* promise(() => node.rpc("sendrawtransaction", [elsewhere.raw]))

      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "refused", 10_000_000n)
      const to = recipient()
      const id = yield* withdrawAccepted(tenant, wallet.walletId, btc, to, 5_000_000n, "btc-refused")
      const sql = yield* SqlClient.SqlClient
      // Signed on that output; the node keeps the other spend (higher fee): "not now", the withdrawal waits.
      for (let attempt = 0; attempt < 150; attempt++) {
        const rows = yield* sql`SELECT 1 FROM outgoing_sends s JOIN outgoing_versions v ON v.send_id = s.id WHERE s.owner_id = ${id}`
        if (rows.length > 0) break
        yield* Effect.sleep("100 millis")
      }
      const [signed] = yield* sql<{ raw: string }>`
        SELECT v.raw FROM outgoing_sends s JOIN outgoing_versions v ON v.send_id = s.id WHERE s.owner_id = ${id}`
      assert.include(inputsOf(bitcoin.Transaction.fromHex(signed!.raw)), `${funding}:${vout}`)
      // The other spend is mined: the withdrawal's input is gone, and none of its versions is in a block.
      yield* mine(1)
      const processor = yield* WithdrawalProcessor
      yield* processor.process(id)
      const failed = yield* waitFor(tenant, id, "FAILED", "BROADCAST_FAILED")
      assert.isNull(failed.txHash ?? null)
      const payer = yield* balance(tenant, wallet.walletId, btc)
      assert.deepStrictEqual(payer, { available: "10000000", frozen: "0" }, "the amount and the fee are back")
      yield* mine(2)
      yield* assertNeverPaid(to)
    }))

  it.effect("CONFIRMING, its block reorganized away and an input spent by another transaction instead: CONFIRMING while that spend is not final; at its 2nd confirmation FAILED / BROADCAST_FAILED, funds back, one status change, never paid", () =>
    // decisions.md "Sending on real networks" and the life cycle's CONFIRMING ─► FAILED (BROADCAST_FAILED): only once
    // no version of the send can ever be included; before that a reorganization could still bring it back.
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "conflicted", 10_000_000n)
      const to = recipient()
      const id = yield* withdrawAccepted(tenant, wallet.walletId, btc, to, 3_000_000n, "btc-conflicted")
      const sent = yield* waitFor(tenant, id, "CONFIRMING")
      yield* mine(1)
      yield* confirm
      const ours = yield* transactionOf(sent.txHash)
      // Its block goes (ours back in the mempool); somebody holding HOT's key spends its first input again with a
      // far higher fee, which replaces ours (BIP 125), and that is what the new block holds.
      yield* promise(async () => node.rpc("invalidateblock", [await node.rpc<string>("getbestblockhash")]))
      const [txid, index] = inputsOf(ours)[0]!.split(":") as [string, string]
      const value = (yield* transactionOf(txid)).outs[Number(index)]!.value
      const signer = yield* Signer
      const elsewhere = yield* signer.signTransaction({
        family: "BTC",
        btcNetwork: "test",
        inputs: [{ txid, vout: Number(index), value, key: platformKey("HOT") }],
        outputs: [{ address: recipient(), value: value - 20_000n }]
      }).pipe(Effect.orDie)
      yield* promise(() => node.rpc("sendrawtransaction", [elsewhere.raw]))
      // To a fresh address: the invalidated block itself would be refused ("block not accepted").
      yield* promise(async () => node.rpc("generatetoaddress", [1, await node.rpc<string>("getnewaddress", ["", "bech32"], "harness")]))
      assert.strictEqual((yield* promise(() => node.rpc("getrawtransaction", [elsewhere.txHash, true]))).confirmations, 1)

      // One confirmation: a reorganization could still undo the other spend and bring ours back. It waits.
      yield* confirm
      yield* confirm
      assert.strictEqual((yield* getTransaction(tenant, id)).status, "CONFIRMING", "not final: it waits")
      assert.notStrictEqual((yield* balance(tenant, wallet.walletId, btc)).frozen, "0", "still frozen")

      // The 2nd confirmation (BTC_TESTNET's rule): final, so no version of ours can ever be included.
      yield* mine(1)
      yield* confirm
      const failed = yield* waitFor(tenant, id, "FAILED", "BROADCAST_FAILED")
      assert.strictEqual(failed.txHash, sent.txHash, "the hash it was broadcast with stays on the record")
      assert.deepStrictEqual(yield* balance(tenant, wallet.walletId, btc), { available: "10000000", frozen: "0" }, "the amount and the fee are back")
      yield* confirm
      const events = yield* statusEvents(tenant, id)
      assert.strictEqual(events.filter((event) => event.startsWith("UPDATED:FAILED")).length, 1, JSON.stringify(events))
      assert.strictEqual(events[events.length - 1], "UPDATED:FAILED/BROADCAST_FAILED")
      const sql = yield* SqlClient.SqlClient
      const [send] = yield* sql<{ state: string }>`SELECT state FROM outgoing_sends WHERE owner_id = ${id}`
      assert.strictEqual(send!.state, "REJECTED")
      yield* mine(2)
      yield* confirm
      assert.strictEqual((yield* getTransaction(tenant, id)).status, "FAILED")
      yield* assertNeverPaid(to)
    }))

  it.effect("stuck 6 blocks: replaced by fee (BIP 125) on the same inputs; one record, COMPLETED with the replacement's hash and fee", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "stuck", 10_000_000n)
      const to = recipient()
      const id = yield* withdrawAccepted(tenant, wallet.walletId, btc, to, 2_500_000n, "btc-stuck")
      const first = yield* waitFor(tenant, id, "CONFIRMING")
      // Miners leave it out, as they would a transaction paying too little for the blocks of the day.
      yield* promise(() => node.rpc("prioritisetransaction", [first.txHash, 0, -100_000_000]))
      yield* confirm
      yield* mine(5)
      yield* confirm
      const sql = yield* SqlClient.SqlClient
      const versions = () => sql<{ tx_hash: string; raw: string }>`
        SELECT v.tx_hash, v.raw FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
        WHERE s.owner_id = ${id} ORDER BY v.version`
      assert.strictEqual((yield* versions()).length, 1, "5 blocks: still waiting")
      yield* mine(1)
      yield* confirm
      const [v1, v2] = yield* versions()
      assert.isDefined(v2, "replaced after 6 blocks")
      const [old, replacement] = [bitcoin.Transaction.fromHex(v1!.raw), bitcoin.Transaction.fromHex(v2!.raw)]
      assert.deepStrictEqual(inputsOf(replacement), inputsOf(old), "the same inputs")
      assert.deepStrictEqual(paidTo(replacement, to), [2_500_000n], "the same payment")
      const [oldFee, newFee] = [yield* feeOf(old), yield* feeOf(replacement)]
      assert.isTrue(newFee * 1000n >= oldFee * 1250n, `fee ${newFee} is at least 125 % of ${oldFee}`)
      yield* mine(2)
      yield* confirm
      const done = yield* waitFor(tenant, id, "COMPLETED", null)
      assert.strictEqual(done.txHash, v2!.tx_hash)
      assert.strictEqual(done.networkFeeRaw, newFee.toString())
      const listed = yield* call(tenant, "GET", "/v1/transactions?kind=WITHDRAWAL")
      assert.strictEqual((listed.json.items as Array<any>).filter((item) => item.externalTxId === "btc-stuck").length, 1)
    }))
})

