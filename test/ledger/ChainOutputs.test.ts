/**
 * The comparison at a head-only node (src/ledger/ChainBooks.ts `auditChain`; docs/ledger.md "Every family"): the
 * books and the node must stand at the same block, read twice around the balances, or the comparison is made again
 * and, never quiet, the check cannot run; and BTC's comparison output by output (src/ledger/ChainOutputs.ts): a sum
 * that agrees over other outputs is unexplained, what a PENDING send or a deposit awaiting a block explains is named.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { describe, it as plainIt } from "vitest"
import { auditChain, type BalanceReader, compareLineOutputs } from "../../src/ledger/ChainBooks.ts"
import { compareOutputs, type OutputBooks } from "../../src/ledger/ChainOutputs.ts"
import { makeTestAppLayer } from "../support/TestApp.ts"

const txid = (n: number) => n.toString(16).padStart(64, "0")

describe("BTC outputs, one for one", () => {
  const books: OutputBooks = {
    held: [
      { txid: txid(1), vout: 0, value: 500n, spending: undefined },
      { txid: txid(2), vout: 1, value: 300n, spending: "withdrawal w1 (send PENDING)" }
    ],
    mayAppear: new Map([[`${txid(3)}:0`, { value: 70n, name: "deposit d1 (awaiting a block)" }]]),
    pendingTransactions: new Map([[txid(9), "withdrawal w1 (send PENDING, output)"]])
  }
  const line = {
    networkKey: "BTC_TESTNET",
    assetId: "BTC_TESTNET_BTC",
    address: "tb1qexample",
    role: "HOT" as const,
    expected: 800n,
    mayHoldLess: 300n,
    mayHoldMore: 70n,
    inFlight: [],
    outputs: books
  }

  plainIt("the same outputs: ok; a held output spent by a PENDING send and its change: in flight, named", () => {
    assert.strictEqual(compareLineOutputs(line, [
      { txid: txid(1), vout: 0, value: 500n },
      { txid: txid(2), vout: 1, value: 300n }
    ]).verdict, "ok")
    const spent = compareLineOutputs(line, [
      { txid: txid(1), vout: 0, value: 500n },
      { txid: txid(9), vout: 1, value: 120n },
      { txid: txid(3), vout: 0, value: 70n }
    ])
    assert.strictEqual(spent.verdict, "in flight")
    assert.deepStrictEqual(spent.inFlight, [
      "deposit d1 (awaiting a block)",
      "withdrawal w1 (send PENDING)",
      "withdrawal w1 (send PENDING, output)"
    ])
    assert.strictEqual(spent.difference, 690n - 800n)
  })

  plainIt("the same sum over other outputs is unexplained, each named by its outpoint", () => {
    const other = compareOutputs({ ...books, held: [books.held[0]!] }, [{ txid: txid(4), vout: 0, value: 500n }])
    assert.strictEqual(other.onChain, 500n)
    assert.deepStrictEqual(other.missing, [`${txid(1)}:0 500`])
    assert.deepStrictEqual(other.unexpected, [`${txid(4)}:0 500`])
    const compared = compareLineOutputs({ ...line, expected: 500n, outputs: { ...books, held: [books.held[0]!] } }, [
      { txid: txid(4), vout: 0, value: 500n }
    ])
    assert.strictEqual(compared.verdict, "UNEXPLAINED")
    assert.strictEqual(compared.difference, 0n)
    // A held output gone that no PENDING send names: spent behind the service's back.
    assert.deepStrictEqual(compareOutputs(books, [{ txid: txid(2), vout: 1, value: 300n }]).missing, [`${txid(1)}:0 500`])
    // An awaited deposit of another value is not the awaited one.
    assert.deepStrictEqual(
      compareOutputs(books, [...books.held, { txid: txid(3), vout: 0, value: 71n }]).unexpected,
      [`${txid(3)}:0 71`]
    )
  })
})

const network = "QUIET_TEST"
const native = "QUIET_TEST_TRX"
const hot = "TQuietHotAddress"

layer(makeTestAppLayer(), { excludeTestServices: true })("a head-only node: compared at a quiet head", (it) => {
  it.effect("a head that moves while the balances are read, or a watcher behind it: compared again, then exit 2 saying why; a quiet head: compared", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO networks (network_key, chain_family, display_name, is_testnet, enabled, deposit_enabled,
          withdraw_enabled, new_wallets_enabled, confirmations, native_asset_id)
        VALUES (${network}, 'TRON', 'quiet test', true, true, true, true, true, '{"mode":"confirmations","n":1}'::jsonb, ${native})`
      yield* sql`
        INSERT INTO assets (asset_id, network_key, kind, contract, symbol, name, decimals, status, withdraw_enabled,
          min_deposit, min_withdraw, withdraw_fee_floor, deposit_fee_floor)
        VALUES (${native}, ${network}, 'NATIVE', NULL, 'TRX', 'TRON', 6, 'ENABLED', true, 0, 0, 0, 0)`
      yield* sql`
        INSERT INTO platform_receipts (network_key, tx_hash, output_index, from_address, to_address, role, asset_id,
          amount, block_height, block_hash, recorded_at)
        VALUES (${network}, ${txid(1)}, 0, 'TOutside', ${hot}, 'HOT', ${native}, 1000, 5, ${txid(5)}, ${new Date(0)})`
      yield* sql`INSERT INTO chain_cursors (network_key, height, head_height, updated_at) VALUES (${network}, 5, 5, ${new Date(0)})`
      yield* sql`INSERT INTO chain_blocks (network_key, height, hash) VALUES (${network}, 5, ${txid(5)})`
      const quiet = { attempts: 3, spacing: "10 millis" } as const

      let heads = 0
      const reader = (head: () => bigint, hash: () => string, held = 1000n): BalanceReader => ({
        at: "head",
        head: Effect.sync(() => ({ height: head(), hash: hash() })),
        balance: () => Effect.succeed(held)
      })
      const moving = yield* Effect.flip(auditChain(new Map([[network, reader(() => 5n + BigInt(heads++ % 2), () => txid(5))]]), quiet))
      assert.include(moving.message, `${network}: its node answers for the head only, and the head was not quiet in 3 attempts`)
      assert.include(moving.message, "while the balances were read")

      const behind = yield* Effect.flip(auditChain(new Map([[network, reader(() => 7n, () => txid(7))]]), quiet))
      assert.include(behind.message, "the watcher's cursor is at block 5, the node's head at 7")

      const otherFork = yield* Effect.flip(auditChain(new Map([[network, reader(() => 5n, () => txid(55))]]), quiet))
      assert.include(otherFork.message, "a reorganization the watcher has not followed yet")

      const report = yield* auditChain(new Map([[network, reader(() => 5n, () => txid(5))]]), quiet)
      assert.deepStrictEqual(report.networks, [{ networkKey: network, block: 5n, at: "head", lines: 1 }])
      assert.deepStrictEqual([report.ok, report.lines[0]!.verdict], [true, "ok"])
      const short = yield* auditChain(new Map([[network, reader(() => 5n, () => txid(5), 999n)]]), quiet)
      assert.deepStrictEqual([short.ok, short.lines[0]!.verdict, short.lines[0]!.difference], [false, "UNEXPLAINED", -1n])
    }))
})
