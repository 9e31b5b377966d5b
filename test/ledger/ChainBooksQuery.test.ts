/**
 * The chain books' arithmetic (src/ledger/ChainBooks.ts; docs/ledger.md "Chain books") over rows written directly,
 * for the movements a node test cannot make on main yet (sweeps and GAS top-ups arrive with their own branch; their
 * rows are the outgoing_sends purposes SWEEP and TOP_UP of sql/0012_outgoing.sql), and the edge cases: a reverted
 * send pays only its fee, a rejected one whose nonce was filled pays the fill's fee, a send included above the
 * books' block is not counted, pending sends widen the window both ways, the service's own sweep seen by the watcher
 * is not counted twice, and an address's role comes from whichever record names it.
 *
 * The network here is one no watcher follows (inserted for the test), so the cursor, the books' block, stays put.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { type BookLine, compareLine, readChainBooks } from "../../src/ledger/ChainBooks.ts"
import { makeTestAppLayer } from "../support/TestApp.ts"

const network = "BOOKS_TEST"
const native = "BOOKS_TEST_ETH"
const token = "BOOKS_TEST_USDT"
const hot = "0x00000000000000000000000000000000000000a1"
const sweep = "0x00000000000000000000000000000000000000a2"
const gas = "0x00000000000000000000000000000000000000a3"
const depositAddress = "0x00000000000000000000000000000000000000d1"
const outside = "0x00000000000000000000000000000000000000e1"
/** The books' block: the watcher's cursor of the test network. */
const asOf = 100

const platformKey = (role: string) => ({ _tag: "Platform", role })
const walletKey = { _tag: "Wallet", tenantIndex: 1, userIndex: 1, walletIndex: 0 }
const gasKey = { _tag: "Gas", tenantIndex: 1 }

interface SendRow {
  readonly purpose: "WITHDRAWAL" | "SWEEP" | "TOP_UP"
  readonly from: string
  readonly to: string
  readonly assetId: string
  readonly amount: bigint
  readonly key: unknown
  readonly state: "PENDING" | "CONFIRMED" | "REVERTED" | "FILLING" | "REJECTED"
  readonly includedHeight?: number
  readonly networkFee?: bigint
  /** The highest fee its versions were signed for. */
  readonly feeMax: bigint
  readonly txHash: string
}

const insertSend = (send: SendRow) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* uuidV7
    const at = new Date(0)
    yield* sql`
      INSERT INTO outgoing_sends (id, network_key, purpose, owner_id, from_address, to_address, asset_id, amount,
        signing_key, state, included_height, network_fee, created_at)
      VALUES (${id}, ${network}, ${send.purpose}, ${id}, ${send.from}, ${send.to}, ${send.assetId},
        ${send.amount.toString()}, ${JSON.stringify(send.key)}::jsonb, ${send.state},
        ${send.includedHeight ?? null}, ${send.networkFee?.toString() ?? null}, ${at})`
    yield* sql`
      INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, network_fee_max, signed_at)
      VALUES (${id}, 1, 'PAYLOAD', ${network}, ${send.txHash}, '0x00', ${send.feeMax.toString()}, ${at})`
    return id
  })

const insertReceipt = (txHash: string, to: string, role: string, assetId: string, amount: bigint, height: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      INSERT INTO platform_receipts (network_key, tx_hash, output_index, from_address, to_address, role, asset_id,
        amount, block_height, block_hash, recorded_at)
      VALUES (${network}, ${txHash}, 0, ${outside}, ${to}, ${role}, ${assetId}, ${amount.toString()}, ${height},
        ${`0xblock${height}`}, ${new Date(0)})`
  })

const hash = (n: number) => `0x${n.toString(16).padStart(64, "0")}`

const find = (lines: ReadonlyArray<BookLine>, address: string, assetId: string) =>
  lines.find((line) => line.address === address && line.assetId === assetId) ??
    assert.fail(`no line ${address} ${assetId}: ${JSON.stringify(lines.map((line) => [line.address, line.assetId]))}`)

const figures = (line: BookLine) => [line.role, line.expected, line.mayHoldLess, line.mayHoldMore]

layer(makeTestAppLayer(), { excludeTestServices: true })("chain books: the arithmetic per address", (it) => {
  it.effect("withdrawals, sweeps, top-ups, fees, fills, receipts and the books' block, per address and asset", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO networks (network_key, chain_family, display_name, is_testnet, enabled, deposit_enabled,
          withdraw_enabled, new_wallets_enabled, confirmations, native_asset_id)
        VALUES (${network}, 'EVM', 'books test', true, true, true, true, true, '{"mode":"confirmations","n":1}'::jsonb, ${native})`
      yield* sql`
        INSERT INTO assets (asset_id, network_key, kind, contract, symbol, name, decimals, status, withdraw_enabled,
          min_deposit, min_withdraw, withdraw_fee_floor, deposit_fee_floor)
        VALUES (${native}, ${network}, 'NATIVE', NULL, 'ETH', 'Ether', 18, 'ENABLED', true, 0, 0, 0, 0),
          (${token}, ${network}, 'TOKEN', '0x00000000000000000000000000000000000000c0', 'USDT', 'Tether', 6, 'ENABLED',
            true, 0, 0, 0, 0)`
      yield* sql`INSERT INTO chain_cursors (network_key, height, head_height, updated_at)
        VALUES (${network}, ${asOf}, ${asOf}, ${new Date(0)})`

      // HOT: funded from outside with 1000 and 500 tokens; a receipt above the books' block is not counted yet.
      yield* insertReceipt(hash(1), hot, "HOT", native, 1000n, 10)
      yield* insertReceipt(hash(2), hot, "HOT", token, 500n, 10)
      yield* insertReceipt(hash(3), hot, "HOT", native, 9999n, asOf + 1)
      // A withdrawal that succeeded: amount and fee.
      yield* insertSend({ purpose: "WITHDRAWAL", from: hot, to: outside, assetId: native, amount: 100n, key: platformKey("HOT"),
        state: "CONFIRMED", includedHeight: 20, networkFee: 3n, feeMax: 5n, txHash: hash(10) })
      // A token withdrawal that reverted: only its fee, in the native coin.
      yield* insertSend({ purpose: "WITHDRAWAL", from: hot, to: outside, assetId: token, amount: 40n, key: platformKey("HOT"),
        state: "REVERTED", includedHeight: 21, networkFee: 4n, feeMax: 6n, txHash: hash(11) })
      // Refused for good, its nonce taken by a fill that was included: the fill's fee.
      yield* insertSend({ purpose: "WITHDRAWAL", from: hot, to: outside, assetId: token, amount: 30n, key: platformKey("HOT"),
        state: "REJECTED", includedHeight: 22, networkFee: 2n, feeMax: 2n, txHash: hash(12) })
      // Refused before any nonce was used: nothing.
      yield* insertSend({ purpose: "WITHDRAWAL", from: hot, to: outside, assetId: native, amount: 70n, key: platformKey("HOT"),
        state: "REJECTED", feeMax: 9n, txHash: hash(13) })
      // Final, but in a block above the books' block: not on the chain there yet.
      yield* insertSend({ purpose: "WITHDRAWAL", from: hot, to: outside, assetId: native, amount: 50n, key: platformKey("HOT"),
        state: "CONFIRMED", includedHeight: asOf + 2, networkFee: 1n, feeMax: 1n, txHash: hash(14) })
      // Pending: HOT may hold up to 25 + 7 (the highest fee signed) less.
      const pendingWithdrawal = yield* insertSend({ purpose: "WITHDRAWAL", from: hot, to: outside, assetId: native,
        amount: 25n, key: platformKey("HOT"), state: "PENDING", feeMax: 7n, txHash: hash(15) })

      // The deposit address: a GAS top-up in, a token sweep to SWEEP out (its fee from the topped-up coin), and a
      // native sweep to HOT still pending (HOT may hold 60 more, the address 60 + 1 less).
      yield* insertReceipt(hash(4), gas, "GAS", native, 200n, 30)
      yield* insertSend({ purpose: "TOP_UP", from: gas, to: depositAddress, assetId: native, amount: 8n, key: gasKey,
        state: "CONFIRMED", includedHeight: 31, networkFee: 1n, feeMax: 2n, txHash: hash(20) })
      yield* insertSend({ purpose: "SWEEP", from: depositAddress, to: sweep, assetId: token, amount: 300n, key: walletKey,
        state: "CONFIRMED", includedHeight: 33, networkFee: 6n, feeMax: 8n, txHash: hash(21) })
      // The watcher saw the sweep arrive on SWEEP: recorded (it names SWEEP's role), never counted a second time.
      yield* insertReceipt(hash(21), sweep, "SWEEP", token, 300n, 33)
      const pendingSweep = yield* insertSend({ purpose: "SWEEP", from: depositAddress, to: hot, assetId: native, amount: 60n,
        key: walletKey, state: "PENDING", feeMax: 1n, txHash: hash(22) })

      const books = yield* readChainBooks([network])
      assert.deepStrictEqual(books.networks.map((entry) => [entry.networkKey, entry.nativeAssetId, entry.asOf]), [[network, native, 100n]])
      assert.deepStrictEqual(
        books.lines.map((line) => `${line.role} ${line.address} ${line.assetId}`),
        [
          `DEPOSIT ${depositAddress} ${native}`,
          `DEPOSIT ${depositAddress} ${token}`,
          `HOT ${hot} ${native}`,
          `HOT ${hot} ${token}`,
          `SWEEP ${sweep} ${token}`,
          `GAS ${gas} ${native}`
        ]
      )
      // 1000 in; −100 −3 sent; −4 reverted fee; −2 fill fee; pending 25 + 7 may be gone, 60 may have arrived.
      assert.deepStrictEqual(figures(find(books.lines, hot, native)), ["HOT", 891n, 32n, 60n])
      assert.deepStrictEqual(find(books.lines, hot, native).inFlight, [
        `sweep ${pendingSweep} (send PENDING, incoming)`,
        `withdrawal ${pendingWithdrawal} (send PENDING)`
      ])
      assert.deepStrictEqual(figures(find(books.lines, hot, token)), ["HOT", 500n, 0n, 0n])
      // +8 top-up, −6 sweep fee; the pending sweep may have taken 60 + 1.
      assert.deepStrictEqual(figures(find(books.lines, depositAddress, native)), ["DEPOSIT", 2n, 61n, 0n])
      // No deposit here (rows written directly): −300 swept.
      assert.deepStrictEqual(figures(find(books.lines, depositAddress, token)), ["DEPOSIT", -300n, 0n, 0n])
      assert.deepStrictEqual(figures(find(books.lines, sweep, token)), ["SWEEP", 300n, 0n, 0n])
      // 200 in; −8 −1 the top-up.
      assert.deepStrictEqual(figures(find(books.lines, gas, native)), ["GAS", 191n, 0n, 0n])

      // The verdicts at the window's edges.
      const hotLine = find(books.lines, hot, native)
      assert.strictEqual(compareLine(hotLine, 891n).verdict, "ok")
      assert.strictEqual(compareLine(hotLine, 891n - 32n).verdict, "in flight")
      assert.strictEqual(compareLine(hotLine, 891n - 33n).verdict, "UNEXPLAINED")
      assert.strictEqual(compareLine(hotLine, 891n + 60n).verdict, "in flight")
      assert.strictEqual(compareLine(hotLine, 891n + 61n).verdict, "UNEXPLAINED")
      assert.strictEqual(compareLine(find(books.lines, sweep, token), 301n).verdict, "UNEXPLAINED")
      assert.strictEqual(compareLine(find(books.lines, sweep, token), 301n).difference, 1n)
    }))
})
