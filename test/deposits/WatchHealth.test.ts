/**
 * How far behind a watcher is (decisions.md, "Sending on real networks": a watcher more than its network's lag
 * budget, default 10 × block time, behind the head reports DEGRADED; docs/deposits.md "Watch status" for how the lag
 * is estimated from the watcher's cursor).
 */
import { assert, describe, it } from "@effect/vitest"
import { scanIntervalMillis } from "../../src/deposits/DepositWatcher.ts"
import { watchedHealth, watchLagMillis } from "../../src/deposits/WatchHealth.ts"

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
