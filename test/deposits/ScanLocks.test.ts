/**
 * No transaction holds row locks while it waits on a chain node (docs/ledger.md "Locks and timeouts"): a deposit scan
 * whose node hangs leaves the network's cursor row free for everyone else, and finishes once the node answers. The
 * node is the simulated chain behind a gate that holds every `block` call.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer } from "effect"
import pg from "pg"
import { type ChainClient, ChainClients } from "../../src/chains/ChainClient.ts"
import { DepositWatcher } from "../../src/deposits/DepositWatcher.ts"
import { makeTestAppLayer } from "../support/TestApp.ts"

const networkKey = "TRON_NILE"

/** Whether another session can lock the network's cursor row within `waitMillis` (false: someone holds it). */
const cursorLockable = (waitMillis: number) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL })
    await client.connect()
    try {
      await client.query(`SET lock_timeout = ${waitMillis}`)
      await client.query("BEGIN")
      const rows = await client.query("SELECT height FROM chain_cursors WHERE network_key = $1 FOR UPDATE", [networkKey])
      await client.query("ROLLBACK")
      return rows.rowCount === 1
    } catch {
      return false
    } finally {
      await client.end()
    }
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("deposit scans and locks", (it) => {
  describe("a chain node that hangs", () => {
    it.effect("a scan waiting on the node holds no row lock: the cursor row stays lockable; the scan ends once the node answers", () =>
      Effect.gen(function*() {
        const clients = yield* ChainClients
        const real = clients.get(networkKey)!
        // One scan first, so the cursor row exists.
        yield* (yield* DepositWatcher).scan(networkKey)

        const gate = yield* Deferred.make<void>()
        const waiting = yield* Deferred.make<void>()
        const hanging: ChainClient = {
          ...real,
          block: (height) =>
            Deferred.succeed(waiting, undefined).pipe(
              Effect.andThen(Deferred.await(gate)),
              Effect.andThen(real.block(height))
            )
        }
        const hangingClients = Layer.succeed(ChainClients)({
          ...clients,
          get: (key) => (key === networkKey ? hanging : clients.get(key))
        })
        // Fresh: the app already built DepositWatcher.layer, and building it again would share that instance.
        const context = yield* Layer.build(Layer.fresh(DepositWatcher.layer).pipe(Layer.provide(hangingClients)))
        const watcher = Context.get(context, DepositWatcher)
        const scan = yield* Effect.forkChild(watcher.scan(networkKey))
        yield* Deferred.await(waiting)

        assert.isTrue(yield* cursorLockable(3_000), "the cursor row is free while the scan waits on the node")
        yield* Deferred.succeed(gate, undefined)
        const result = yield* Fiber.join(scan)
        assert.strictEqual(result.networkKey, networkKey)
      }).pipe(Effect.scoped))
  })
})
