/**
 * The broadcast claim (sending/OutgoingSends.ts, sql/0030; issue 32) between two processes of one database, each its
 * own OutgoingSends (`one`, `other`) over the simulated chain, whose `devnet_broadcasts.broadcasts` counts every time
 * a node was given the bytes:
 *
 * - a claimer that froze past the grace while another took the version over sends nothing when it wakes: its claim is
 *   looked at again right before the bytes leave (the ThreeProcesses SIGSTOP case, made deterministic);
 * - the confirmation check's rebroadcast of bytes the node does not know goes through the claim too: it leaves a
 *   version another process claimed a moment ago, and sends it once that claim is past its grace;
 * - the claim's age is judged by PostgreSQL's clock: a process whose clock runs an hour behind neither makes its own
 *   claim look stale to the others nor takes theirs early.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Context, Deferred, Effect, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { SimulatedChain } from "../../src/chains/simulated/SimulatedChain.ts"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids, uuidV7 } from "../../src/domain/Ids.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { OutgoingSends, type Send } from "../../src/sending/OutgoingSends.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { platformKey } from "../../src/signer/TransactionRequest.ts"
import { testMnemonic } from "../support/TestApp.ts"

/**
 * A pause the test sets for one call of the node (the first call of `what` for `txHash`): the call is made, then it
 * waits for `release` before it answers, as a process that froze right after it.
 */
interface Pause {
  readonly what: "transactionState" | "broadcast"
  readonly txHash: string
  readonly reached: Deferred.Deferred<void>
  readonly release: Deferred.Deferred<void>
}
let pause: Pause | undefined

const paused = <A, E>(what: Pause["what"], txHash: string, call: Effect.Effect<A, E>): Effect.Effect<A, E> => {
  const current = pause
  if (current === undefined || current.what !== what || current.txHash !== txHash) return call
  pause = undefined
  return Effect.tap(call, () => Effect.andThen(Deferred.succeed(current.reached, undefined), Deferred.await(current.release)))
}

const clientsLayer = Layer.effect(
  ChainClients,
  Effect.map(Effect.service(SimulatedChain), (chain) =>
    ChainClients.of({
      get: (networkKey) => {
        const client = chain.client(networkKey)
        return {
          ...client,
          transactionState: (txHash: string) => paused("transactionState", txHash, client.transactionState(txHash)),
          withdrawals: {
            ...client.withdrawals!,
            // Paused before the node gets the bytes: a call under way (the node slow to answer).
            broadcast: (signed) =>
              paused("broadcast", signed.txHash, Effect.void).pipe(Effect.andThen(client.withdrawals!.broadcast(signed)))
          }
        }
      },
      networkKeys: ["ETH_SEPOLIA"],
      isSimulated: () => true
    }))
)

const layer = OutgoingSends.layer.pipe(
  Layer.provideMerge(Ledger.layer),
  Layer.provideMerge(clientsLayer),
  Layer.provideMerge(SimulatedChain.layer),
  Layer.provideMerge(Catalog.layer),
  Layer.provideMerge(Signer.layerLocalHd(Redacted.make(testMnemonic))),
  Layer.provideMerge(Ids.layer),
  Layer.provideMerge(Entropy.layer),
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.provideMerge(AppConfig.layerTest()),
  Layer.orDie
)

/** Each send's amount, so its bytes (and hash) are its own. */
let amount = 1_000n

/** A send of its own per test: a fresh sending address, owner and amount. */
const signedSend = Effect.gen(function*() {
  const sends = yield* OutgoingSends
  const ownerId = yield* uuidV7
  const from = `0x${ownerId.replaceAll("-", "").padEnd(40, "0").slice(0, 40)}`
  const outcome = yield* sends.sign({
    purpose: "WITHDRAWAL",
    ownerId,
    networkKey: "ETH_SEPOLIA",
    key: platformKey("HOT"),
    transfer: { withdrawalId: ownerId, from, to: "0x00000000000000000000000000000000000000c1", assetId: "ETH_SEPOLIA_ETH", amount: amount++ }
  }, { guard: Effect.succeed(true) })
  assert.strictEqual(outcome._tag, "Signed")
  return (outcome as { readonly send: Send }).send
})

const txHashOf = (send: Send) => send.versions[0]!.tx_hash

/** How often a node was given the bytes (the simulated node counts each call), and the send's own count. */
const counts = (send: Send) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const node = yield* sql<{ broadcasts: number }>`
      SELECT broadcasts FROM devnet_broadcasts WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${txHashOf(send)}`
    const own = yield* sql<{ broadcasts: number }>`SELECT broadcasts FROM outgoing_versions WHERE send_id = ${send.id}`
    return { node: node[0]?.broadcasts ?? 0, counted: own[0]!.broadcasts }
  })

/** The version's claim made older by an hour, as if that long had passed since it was taken (or last stamped). */
const ageClaim = (send: Send) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql`UPDATE outgoing_versions SET broadcast_claimed_at = broadcast_claimed_at - interval '1 hour' WHERE send_id = ${send.id}`)

const armPause = (what: Pause["what"], send: Send) =>
  Effect.gen(function*() {
    const armed: Pause = { what, txHash: txHashOf(send), reached: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
    pause = armed
    return armed
  })

/** A second process: an OutgoingSends of its own over the same database and node. */
const otherProcess = Effect.map(Layer.build(Layer.fresh(OutgoingSends.layer)), (context) => Context.get(context, OutgoingSends))

describe("broadcast claims between processes", () => {
  it.live("a claimer frozen past the grace, its version taken over and sent by another, sends nothing when it wakes", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const one = yield* OutgoingSends
      const other = yield* otherProcess
      const send = yield* signedSend
      // An earlier claimer died before the node got the bytes, long ago: the next attempt claims again and asks the
      // node first.
      yield* sql`UPDATE outgoing_versions SET broadcast_claimed_at = clock_timestamp() - interval '1 hour', broadcast_claims = 1
        WHERE send_id = ${send.id}`
      // `one` claims, asks the node (it does not know the bytes), and freezes right after its answer.
      const frozen = yield* armPause("transactionState", send)
      const waking = yield* Effect.forkChild(one.broadcast(send))
      yield* Deferred.await(frozen.reached)
      // Frozen past the grace: `other` takes the claim again, asks the node, and gives it the bytes.
      yield* ageClaim(send)
      assert.strictEqual(yield* other.broadcast(send), "SENT")
      assert.deepStrictEqual(yield* counts(send), { node: 1, counted: 1 })
      // `one` wakes: its claim is no longer its own, so it sends nothing and will ask again later.
      yield* Deferred.succeed(frozen.release, undefined)
      assert.strictEqual(yield* Fiber.join(waking), "LATER")
      assert.deepStrictEqual(yield* counts(send), { node: 1, counted: 1 }, "the bytes reached the node once")
      // Its next attempt finds them at the node.
      assert.strictEqual(yield* one.broadcast(send), "SENT")
      assert.deepStrictEqual(yield* counts(send), { node: 1, counted: 1 })
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("the confirmation check's rebroadcast goes through the claim: left to a fresh claim of another process, sent once it is stale", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const one = yield* OutgoingSends
      const other = yield* otherProcess
      const send = yield* signedSend
      assert.strictEqual(yield* one.broadcast(send), "SENT")
      assert.deepStrictEqual(yield* counts(send), { node: 1, counted: 1 })
      // The node forgot the transaction (it restarted; or a reorganization dropped it), and another process claimed
      // its broadcast a moment ago (it is sending it, or froze right before).
      yield* sql`DELETE FROM devnet_transfers WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${txHashOf(send)}`
      yield* sql`UPDATE outgoing_versions SET broadcast_claimed_at = clock_timestamp(), broadcast_claims = broadcast_claims + 1
        WHERE send_id = ${send.id}`
      const head = { height: 1_000n, hash: "head", finalizedHeight: 0n }
      const fresh = (yield* one.forOwner("WITHDRAWAL", send.owner_id))!
      assert.strictEqual((yield* one.check(fresh, head))._tag, "Waiting")
      assert.deepStrictEqual(yield* counts(send), { node: 1, counted: 1 }, "a fresh claim of another is left to it")
      // That claim is past its grace: the check gives the node the same bytes again, once.
      yield* ageClaim(send)
      assert.strictEqual((yield* other.check(fresh, head))._tag, "Waiting")
      assert.deepStrictEqual(yield* counts(send), { node: 2, counted: 2 })
      const requeued = yield* sql`SELECT 1 FROM devnet_transfers WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${txHashOf(send)}`
      assert.strictEqual(requeued.length, 1)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("the grace is judged by PostgreSQL's clock: a process an hour behind does not make its fresh claim look stale", () =>
    Effect.gen(function*() {
      const one = yield* OutgoingSends
      const other = yield* otherProcess
      const send = yield* signedSend
      // `one`'s clock runs an hour behind; it claims and is still waiting for the node's answer.
      const behind = yield* Clock.clockWith((clock) =>
        Effect.succeed<Clock.Clock>({
          ...clock,
          currentTimeMillisUnsafe: () => clock.currentTimeMillisUnsafe() - 3_600_000,
          currentTimeMillis: Effect.sync(() => clock.currentTimeMillisUnsafe() - 3_600_000),
          currentTimeNanosUnsafe: () => clock.currentTimeNanosUnsafe() - 3_600_000_000_000n,
          currentTimeNanos: Effect.sync(() => clock.currentTimeNanosUnsafe() - 3_600_000_000_000n)
        }))
      const slow = yield* armPause("broadcast", send)
      const sending = yield* Effect.forkChild(one.broadcast(send).pipe(Effect.provideService(Clock.Clock, behind)))
      yield* Deferred.await(slow.reached)
      // `other` finds the claim fresh: it asks the node (not there yet) and waits rather than sending too.
      assert.strictEqual(yield* other.broadcast(send), "LATER")
      yield* Deferred.succeed(slow.release, undefined)
      assert.strictEqual(yield* Fiber.join(sending), "SENT")
      assert.deepStrictEqual(yield* counts(send), { node: 1, counted: 1 })
    }).pipe(Effect.scoped, Effect.provide(layer)))
})
