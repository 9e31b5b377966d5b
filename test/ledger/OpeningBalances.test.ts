/**
 * Opening balances (issue 35; docs/ledger.md "Opening balances"; src/ledger/OpeningBalances.ts): what an operating
 * address held at the block its network's watcher started from, recorded by the operator through
 * POST /ops/networks/{networkKey}/opening_balances with who and when, and counted by the chain books: an account
 * family's amount on the address's line, a BTC opening's outputs among the outputs the address holds. The rules
 * (operating addresses only, the network's assets, the watcher's start block, once, never changed) refuse with the
 * error envelope and store nothing. On the simulated chain; ChainBooks.test.ts holds one against anvil with
 * `ledger:check --chain`.
 */
import { assert, layer } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { readChainBooks } from "../../src/ledger/ChainBooks.ts"
import { networkCalls } from "../support/NetworkCalls.ts"
import { makeTestAppLayer, opsRequest, provisionTenant } from "../support/TestApp.ts"

const evm = "BSC_TESTNET"
const bnb = "BSC_TESTNET_BNB"
const btc = "BTC_TESTNET"
const txid = "ab".repeat(32)

const operating = (networkKey: string, role: string) =>
  Effect.gen(function*() {
    const all = (yield* opsRequest("GET", "/ops/platform/addresses")).json as Array<any>
    return all.find((entry) => entry.networkKey === networkKey && entry.role === role)!.address as string
  })

const lineOf = (networkKey: string, address: string, assetId: string) =>
  Effect.map(
    readChainBooks([networkKey]),
    (books) => books.lines.find((line) => line.address === address && line.assetId === assetId)
  )

layer(makeTestAppLayer(), { excludeTestServices: true })("opening balances", (it) => {
  it.effect("an operator's opening of SWEEP's BNB: stored with who, when and the watcher's start block, audited, and in the chain books", () =>
    Effect.gen(function*() {
      const watcher = yield* DepositWatcher
      yield* watcher.scan(evm)
      const sweep = yield* operating(evm, "SWEEP")
      assert.isUndefined(yield* lineOf(evm, sweep, bnb), "no movement, no line")

      const recorded = yield* opsRequest("POST", `/ops/networks/${evm}/opening_balances`, {
        address: sweep,
        assetId: bnb,
        amountRaw: "4000000000000000000"
      }, { "x-operator": "carol" })
      assert.strictEqual(recorded.status, 201, recorded.text)
      const [opening] = recorded.json.items
      assert.deepInclude(opening, {
        networkKey: evm,
        address: sweep,
        role: "SWEEP",
        assetId: bnb,
        amountRaw: "4000000000000000000",
        height: "0",
        txid: null,
        vout: null,
        recordedBy: "carol"
      })
      assert.deepStrictEqual((yield* opsRequest("GET", `/ops/networks/${evm}/opening_balances`)).json.items, [opening])
      const audit = (yield* opsRequest("GET", "/ops/audit?action=OPENING_BALANCE_RECORDED")).json.items
      assert.deepStrictEqual(audit.map((entry: any) => [entry.operator, entry.target, entry.requestId, entry.change.amountRaw]), [
        ["carol", { type: "ADDRESS", id: `${evm}/${sweep}` }, opening.requestId, "4000000000000000000"]
      ])
      const line = yield* lineOf(evm, sweep, bnb)
      assert.deepInclude(line, { role: "SWEEP", expected: 4_000_000_000_000_000_000n, mayHoldLess: 0n, mayHoldMore: 0n })
    }))

  it.effect("refused, nothing stored: a deposit address, another network's asset, another block, a second opening, a BTC amount; the table refuses edits", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const hot = yield* operating(evm, "HOT")
      const tenant = yield* provisionTenant()
      const { address: depositAddress } = yield* networkCalls(evm).depositAddress(tenant, "opening")
      const post = (body: unknown, networkKey = evm) =>
        opsRequest("POST", `/ops/networks/${networkKey}/opening_balances`, body)
      const refusals = [
        [yield* post({ address: depositAddress, assetId: bnb, amountRaw: "1" }), 422, "not an operating address"],
        [yield* post({ address: hot, assetId: "ETH_SEPOLIA_ETH", amountRaw: "1" }), 422, "is not an asset of BSC_TESTNET"],
        [yield* post({ address: hot, assetId: bnb, amountRaw: "1", height: "7" }), 422, "not 7"],
        [yield* post({ address: hot, assetId: bnb, amountRaw: "0" }), 422, "above 0"],
        [yield* post({ address: hot, assetId: bnb }), 422, "amountRaw is required"],
        [yield* post({ address: hot, assetId: bnb, amountRaw: "1" }, "NO_SUCH_NETWORK"), 404, "no network"]
      ] as const
      for (const [response, status, message] of refusals) {
        assert.strictEqual(response.status, status, response.text)
        assert.include(response.json.error.message, message, response.text)
      }
      const first = yield* post({ address: hot, assetId: bnb, amountRaw: "5" })
      assert.strictEqual(first.status, 201, first.text)
      const again = yield* post({ address: hot, assetId: bnb, amountRaw: "6" })
      assert.strictEqual(again.status, 409, again.text)
      assert.strictEqual(again.json.error.code, "INVALID_STATE")

      const watcher = yield* DepositWatcher
      yield* watcher.scan(btc)
      const btcHot = yield* operating(btc, "HOT")
      const btcAmount = yield* post({ address: btcHot, assetId: "BTC_TESTNET_BTC", amountRaw: "5" }, btc)
      assert.strictEqual(btcAmount.status, 422, btcAmount.text)
      assert.include(btcAmount.json.error.message, "unspent outputs")

      const stored = yield* sql<{ address: string; amount: string }>`
        SELECT address, amount::text AS amount FROM opening_balances WHERE network_key IN (${evm}, ${btc}) AND address <> (
          SELECT address FROM opening_balances WHERE role = 'SWEEP' AND network_key = ${evm})`
      assert.deepStrictEqual(stored.map((row) => [row.address, row.amount]), [[hot, "5"]])
      const audited = (yield* opsRequest("GET", "/ops/audit?action=OPENING_BALANCE_RECORDED")).json.items
      assert.strictEqual(audited.length, 2, "one entry per opening recorded, none for a refusal")
      for (const change of [sql`UPDATE opening_balances SET amount = 6 WHERE address = ${hot}`, sql`DELETE FROM opening_balances`]) {
        const exit = yield* Effect.exit(change)
        assert.isTrue(Exit.isFailure(exit), "the database accepted it")
        if (Exit.isFailure(exit)) assert.include(Cause.pretty(exit.cause), "append-only")
      }
    }))

  it.effect("a BTC opening names HOT's unspent outputs: the chain books hold them one for one", () =>
    Effect.gen(function*() {
      const watcher = yield* DepositWatcher
      yield* watcher.scan(btc)
      const hot = yield* operating(btc, "HOT")
      const recorded = yield* opsRequest("POST", `/ops/networks/${btc}/opening_balances`, {
        address: hot,
        assetId: "BTC_TESTNET_BTC",
        outputs: [{ txid, vout: 0, valueRaw: "150000" }, { txid, vout: 3, valueRaw: "2500" }]
      })
      assert.strictEqual(recorded.status, 201, recorded.text)
      assert.deepStrictEqual(recorded.json.items.map((item: any) => [item.txid, item.vout, item.amountRaw]), [
        [txid, 0, "150000"],
        [txid, 3, "2500"]
      ])
      const line = yield* lineOf(btc, hot, "BTC_TESTNET_BTC")
      assert.strictEqual(line?.expected, 152_500n)
      assert.deepStrictEqual(line?.outputs?.held.map((output) => [output.txid, output.vout, output.value]), [
        [txid, 0, 150_000n],
        [txid, 3, 2_500n]
      ])
    }))
})
