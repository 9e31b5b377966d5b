/**
 * How far behind a watcher is (decisions.md, "Sending on real networks": a watcher more than its network's lag
 * budget, default 10 × block time, behind the head reports DEGRADED; a network no client watches is not ACTIVE;
 * docs/deposits.md "Watch status" for how the lag is estimated from the watcher's cursor). The rule alone, then the
 * service over a real `chain_cursors` table on the TestClock, in a service where no network has a client (so no
 * watcher writes the cursors but the test) and the ETH_SEPOLIA client is a stub that is never asked anything.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { scanIntervalMillis } from "../../src/deposits/DepositWatcher.ts"
import { WatchHealth, watchedHealth, watchLagMillis } from "../../src/deposits/WatchHealth.ts"
import { makeTestAppLayer } from "../support/TestApp.ts"

const blockTimeMillis = 12_000
const budgetMillis = 10 * blockTimeMillis
const startedAtMillis = 1_000_000
const at = (nowMillis: number, cursor?: { height: bigint; headHeight: bigint; updatedAtMillis: number }) =>
  watchedHealth(watchLagMillis({ cursor, blockTimeMillis, startedAtMillis, nowMillis }), blockTimeMillis)

describe("watch health (decisions.md, lag budget 10 × block time)", () => {
  it("blocks behind the head at the last step: up to 10 is ACTIVE, 11 is DEGRADED", () => {
    const now = startedAtMillis + 500_000
    assert.strictEqual(at(now, { height: 100n, headHeight: 110n, updatedAtMillis: now }), "ACTIVE")
    assert.strictEqual(at(now, { height: 100n, headHeight: 111n, updatedAtMillis: now }), "DEGRADED")
    // A cursor above the head it saw (the head went back in a reorganization) is not behind.
    assert.strictEqual(at(now, { height: 110n, headHeight: 100n, updatedAtMillis: now }), "ACTIVE")
    assert.strictEqual(at(now, { height: 0n, headHeight: 10n ** 30n, updatedAtMillis: now }), "DEGRADED")
  })

  it("a silent watcher (its node down) is DEGRADED once its silence beyond one scan interval passes the budget", () => {
    const heard = startedAtMillis + 10_000
    const cursor = { height: 100n, headHeight: 100n, updatedAtMillis: heard }
    assert.strictEqual(at(heard + scanIntervalMillis + budgetMillis, cursor), "ACTIVE")
    assert.strictEqual(at(heard + scanIntervalMillis + budgetMillis + 1, cursor), "DEGRADED")
    // Blocks behind and silence add up.
    const behind = { height: 95n, headHeight: 100n, updatedAtMillis: heard }
    assert.strictEqual(at(heard + scanIntervalMillis + budgetMillis / 2, behind), "ACTIVE")
    assert.strictEqual(at(heard + scanIntervalMillis + budgetMillis / 2 + 1, behind), "DEGRADED")
  })

  it("after a restart the downtime is not lag: silence counts from the start, so a watcher has the budget for its first scan", () => {
    const beforeRestart = { height: 100n, headHeight: 100n, updatedAtMillis: startedAtMillis - 3_600_000 }
    assert.strictEqual(at(startedAtMillis + 1_000, beforeRestart), "ACTIVE")
    assert.strictEqual(at(startedAtMillis + scanIntervalMillis + budgetMillis + 1, beforeRestart), "DEGRADED")
    // Never ran (no cursor yet): the same grace, then DEGRADED.
    assert.strictEqual(at(startedAtMillis + 1_000, undefined), "ACTIVE")
    assert.strictEqual(at(startedAtMillis + scanIntervalMillis + budgetMillis + 1, undefined), "DEGRADED")
  })
})

const ethBudgetMillis = 10 * 12_000

/** ETH_SEPOLIA has a client (a stub never called: the service reads only the cursor); nothing else has one. */
const ethOnly = Layer.succeed(ChainClients)({
  get: (networkKey) =>
    networkKey === "ETH_SEPOLIA"
      ? {
        networkKey,
        startFromGenesis: false,
        head: Effect.die("unused"),
        block: () => Effect.die("unused"),
        transactionState: () => Effect.die("unused")
      }
      : undefined,
  networkKeys: ["ETH_SEPOLIA"],
  isSimulated: () => false
})

layer(makeTestAppLayer({ simulatedChains: false }), { excludeTestServices: true })("watch health over chain_cursors", (it) => {
  it.effect("no client: UNWATCHED; never ran: ACTIVE for the budget after the start, then DEGRADED; a restart inherits no downtime; silence and blocks behind each make it DEGRADED", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const startMillis = Date.UTC(2026, 10, 26, 12, 0, 0)
      yield* TestClock.setTime(startMillis)
      // Fresh: the app built its own WatchHealth (with the app's clients and start time).
      const context = yield* Layer.build(Layer.fresh(WatchHealth.layer).pipe(Layer.provide(ethOnly)))
      const service = Context.get(context, WatchHealth)
      const health = (networkKey: string) => Effect.map(service.view, (view) => view(networkKey))

      assert.strictEqual(yield* health("BTC_TESTNET"), "UNWATCHED")
      assert.strictEqual(yield* health("NOT_IN_CATALOG"), "UNWATCHED")
      // Never ran (no cursor row): the first scan has the budget to come.
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "ACTIVE")
      yield* TestClock.adjust(scanIntervalMillis + ethBudgetMillis + 1)
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "DEGRADED")

      // A cursor last written an hour before this service started (a restart): its silence counts from the start.
      const setCursor = (height: number, headHeight: number, updatedAtMillis: number) =>
        sql`INSERT INTO chain_cursors (network_key, height, head_height, updated_at)
          VALUES ('ETH_SEPOLIA', ${height}, ${headHeight}, ${new Date(updatedAtMillis)})
          ON CONFLICT (network_key) DO UPDATE SET height = EXCLUDED.height, head_height = EXCLUDED.head_height,
            updated_at = EXCLUDED.updated_at`.pipe(Effect.orDie)
      yield* setCursor(100, 100, startMillis - 3_600_000)
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "DEGRADED", "the budget since the start has passed")
      // A service started now (a restart) gives the same cursor the budget again before it says DEGRADED.
      const restarted = Context.get(
        yield* Layer.build(Layer.fresh(WatchHealth.layer).pipe(Layer.provide(ethOnly))),
        WatchHealth
      )
      assert.strictEqual((yield* restarted.view)("ETH_SEPOLIA"), "ACTIVE")
      // The watcher writes (at the head): ACTIVE; then silent past the budget: DEGRADED.
      const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      yield* setCursor(100, 100, now)
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "ACTIVE")
      yield* TestClock.adjust(scanIntervalMillis + ethBudgetMillis)
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "ACTIVE")
      yield* TestClock.adjust(1)
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "DEGRADED")
      // /ops/health's lines (`report`) follow the same rule: silent past the budget is DEGRADED there too ("lagging"),
      // though the watcher was at the head when it last wrote.
      assert.deepStrictEqual(yield* service.report, [
        { networkKey: "ETH_SEPOLIA", height: 100n, headHeight: 100n, health: "DEGRADED" }
      ])
      // Fresh, but 11 blocks behind the head it saw: DEGRADED; 10: ACTIVE.
      const later = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      yield* setCursor(100, 111, later)
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "DEGRADED")
      assert.strictEqual((yield* service.report)[0]!.health, "DEGRADED")
      yield* setCursor(101, 111, later)
      assert.strictEqual(yield* health("ETH_SEPOLIA"), "ACTIVE")
      assert.deepStrictEqual(yield* service.report, [
        { networkKey: "ETH_SEPOLIA", height: 101n, headHeight: 111n, health: "ACTIVE" }
      ])
    }).pipe(Effect.provide(TestClock.layer())))
})
