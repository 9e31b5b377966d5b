/**
 * Signings from one address share a database transaction (sending/OutgoingSends.ts `signBatch`): the nonce row is
 * taken once per batch. What must hold whatever the batching: the nonces of the signatures an address made are
 * consecutive from its sequence, with no gap for a signature the signer refused or an owner whose guard said no; a
 * batch that fails is tried again one signing at a time, so one owner that cannot be signed fails alone. The chain is
 * the simulated one with an EVM `accountNonce` added, so the service's own nonce sequence is used as on a real node.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { SimulatedChain } from "../../src/chains/simulated/SimulatedChain.ts"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids, uuidV7 } from "../../src/domain/Ids.ts"
import { type FirstSignature, OutgoingSends, type Send } from "../../src/sending/OutgoingSends.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { Signer, SignerRefused } from "../../src/signer/Signer.ts"
import { platformKey } from "../../src/signer/TransactionRequest.ts"
import { testMnemonic } from "../support/TestApp.ts"

/** The node's pending count of every address here: where a new address's sequence starts. */
const nodeCount = 7n
/** The amount the signer refuses. */
const refusedAmount = 13n

const clientsLayer = Layer.effect(
  ChainClients,
  Effect.map(Effect.service(SimulatedChain), (chain) =>
    ChainClients.of({
      get: (networkKey) => {
        const client = chain.client(networkKey)
        return { ...client, withdrawals: { ...client.withdrawals!, accountNonce: () => Effect.succeed(nodeCount) } }
      },
      networkKeys: ["ETH_SEPOLIA"],
      isSimulated: () => true
    }))
)

/** The amount whose signature waits for the test (`gate`): a slow signer, such as a remote one. */
const gatedAmount = 77n

/** Set by a test before it signs `gatedAmount`: the signer says it started, then waits for `release`. */
let gate: { readonly started: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void>; calls: number } | undefined

const refusingSigner = Layer.effect(
  Signer,
  Effect.map(Effect.service(Signer), (signer) =>
    Signer.of({
      ...signer,
      signTransaction: (request) =>
        request.family === "EVM" && request.amount === refusedAmount
          ? Effect.fail(new SignerRefused({ message: "refused by the test" }))
          : request.family === "EVM" && request.amount === gatedAmount && gate !== undefined
          ? Effect.gen(function*() {
            const { started, release } = gate!
            gate!.calls++
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(release)
            return yield* signer.signTransaction(request)
          })
          : signer.signTransaction(request)
    }))
).pipe(Layer.provide(Signer.layerLocalHd(Redacted.make(testMnemonic))))

const layer = OutgoingSends.layer.pipe(
  Layer.provideMerge(clientsLayer),
  Layer.provideMerge(SimulatedChain.layer),
  Layer.provideMerge(Catalog.layer),
  Layer.provideMerge(refusingSigner),
  // The fees of sends that are final are booked through the ledger (OutgoingSends.markFinal).
  Layer.provideMerge(Ledger.layer),
  Layer.provideMerge(Ids.layer),
  Layer.provideMerge(Entropy.layer),
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.provideMerge(AppConfig.layerTest()),
  Layer.orDie
)

/** A sending address of its own per test, so its nonce sequence starts here. */
const freshAddress = Effect.map(uuidV7, (id) => `0x${id.replaceAll("-", "").padEnd(40, "0").slice(0, 40)}`)

const signFrom = (
  from: string,
  ownerId: string,
  amount: bigint,
  hooks: { readonly guard?: Effect.Effect<boolean>; readonly onSigned?: (signed: FirstSignature) => Statement.Fragment } = {}
) =>
  Effect.flatMap(Effect.service(OutgoingSends), (sends) =>
    sends.sign({
      purpose: "WITHDRAWAL",
      ownerId,
      networkKey: "ETH_SEPOLIA",
      key: platformKey("HOT"),
      transfer: { withdrawalId: ownerId, from, to: "0x00000000000000000000000000000000000000b1", assetId: "ETH_SEPOLIA_ETH", amount }
    }, { guard: hooks.guard ?? Effect.succeed(true), onSigned: hooks.onSigned }))

/**
 * Starts a signing of `gatedAmount` whose signature waits in the signer (`gate`): answers its fiber once the signer
 * has it, with `release` to let it go on and `calls` to read how often the signer was asked.
 */
const signGated = (from: string, ownerId: string, hooks: { readonly guard?: Effect.Effect<boolean> } = {}) =>
  Effect.gen(function*() {
    const opened = { started: yield* Deferred.make<void>(), release: yield* Deferred.make<void>(), calls: 0 }
    gate = opened
    const signing = yield* Effect.forkChild(signFrom(from, ownerId, gatedAmount, hooks))
    yield* Deferred.await(opened.started)
    return {
      release: Deferred.succeed(opened.release, undefined),
      /** The signing's outcome, and the gate closed again. */
      outcome: Effect.ensuring(Fiber.join(signing), Effect.sync(() => {
        gate = undefined
      })),
      calls: () => opened.calls
    }
  })

const nonceOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isSuccess(exit) && (exit.value as { _tag: string })._tag === "Signed"
    ? BigInt((exit.value as { send: Send }).send.nonce!)
    : undefined

const storedOwners = (owners: ReadonlyArray<string>) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql<{ owner_id: string; tx: string }>`
      SELECT owner_id, xmin::text AS tx FROM outgoing_sends WHERE owner_id IN (SELECT unnest(${`{${owners.join(",")}}`}::uuid[]))`)

describe("signing batches", () => {
  it.effect("12 signings at once from one address: consecutive nonces from the node's count, none for the refused or the superseded, in fewer transactions than signatures", () =>
    Effect.gen(function*() {
      const from = yield* freshAddress
      const owners = yield* Effect.forEach(Array.from({ length: 12 }), () => uuidV7)
      const exits = yield* Effect.all(
        owners.map((owner, index) =>
          Effect.exit(signFrom(from, owner, index === 3 ? refusedAmount : 1000n + BigInt(index), {
            guard: Effect.succeed(index !== 5)
          }))
        ),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(exits[3], Exit.succeed({ _tag: "Refused", message: "refused by the test" }))
      assert.deepStrictEqual(exits[5], Exit.succeed({ _tag: "Superseded" }))
      const nonces = exits.flatMap((exit) => {
        const nonce = nonceOf(exit)
        return nonce === undefined ? [] : [nonce]
      }).sort((a, b) => a < b ? -1 : a > b ? 1 : 0)
      assert.deepStrictEqual(nonces, Array.from({ length: 10 }, (_, index) => nodeCount + BigInt(index)))

      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ next: string }>`
        SELECT next_nonce::text AS next FROM evm_nonces WHERE network_key = 'ETH_SEPOLIA' AND address = ${from}`
      assert.strictEqual(row?.next, (nodeCount + 10n).toString())
      const stored = yield* storedOwners(owners)
      assert.sameMembers(stored.map((send) => send.owner_id), owners.filter((_, index) => index !== 3 && index !== 5))
      // One transaction each would give ten.
      assert.isBelow(new Set(stored.map((send) => send.tx)).size, 10)

      // Later signings go on from the sequence, whatever the node's count says.
      for (const expected of [17n, 18n]) {
        assert.strictEqual(nonceOf(yield* Effect.exit(signFrom(from, yield* uuidV7, 3000n))), expected)
      }
    }).pipe(Effect.provide(layer)))

  it.effect("a batch that fails is tried again one by one: the owner whose record fails dies alone (its statement fails), the others are signed with consecutive nonces", () =>
    Effect.gen(function*() {
      const from = yield* freshAddress
      const owners = yield* Effect.forEach(Array.from({ length: 6 }), () => uuidV7)
      const poisoned = owners[2]!
      const sql = yield* SqlClient.SqlClient
      const exits = yield* Effect.all(
        owners.map((owner, index) =>
          Effect.exit(signFrom(from, owner, 2000n + BigInt(index), {
            // The owner's record cannot be written: its statement fails, and with it the statement storing the send.
            ...(owner === poisoned ? { onSigned: () => sql`UPDATE no_such_table SET x = 1` } : {})
          }))
        ),
        { concurrency: "unbounded" }
      )
      const failed = exits[2]!
      assert.isTrue(Exit.isFailure(failed) && Cause.hasDies(failed.cause))
      const nonces = exits.flatMap((exit) => {
        const nonce = nonceOf(exit)
        return nonce === undefined ? [] : [nonce]
      }).sort((a, b) => a < b ? -1 : a > b ? 1 : 0)
      assert.deepStrictEqual(nonces, Array.from({ length: 5 }, (_, index) => nodeCount + BigInt(index)))
      const stored = yield* storedOwners(owners)
      assert.sameMembers(stored.map((send) => send.owner_id), owners.filter((owner) => owner !== poisoned))
    }).pipe(Effect.provide(layer)))

  it.effect("the signer works with no row locked and no transaction open: the address's nonce row and the owner's row can be locked meanwhile", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const from = yield* freshAddress
      assert.strictEqual(nonceOf(yield* Effect.exit(signFrom(from, yield* uuidV7, 4000n))), nodeCount)
      // The owner's row: a row of its own, locked by the guard as a withdrawal's guard locks its transaction row.
      yield* sql`CREATE TABLE IF NOT EXISTS signing_owners (id uuid PRIMARY KEY)`
      const owner = yield* uuidV7
      yield* sql`INSERT INTO signing_owners (id) VALUES (${owner})`
      const guard = sql`SELECT id FROM signing_owners WHERE id = ${owner} FOR UPDATE`.pipe(
        Effect.map((rows) => rows.length === 1),
        Effect.orDie
      )
      const signing = yield* signGated(from, owner, { guard })
      // Each fails at once (55P03) if a transaction holds the row.
      const nonceRow = yield* sql`
        SELECT next_nonce FROM evm_nonces WHERE network_key = 'ETH_SEPOLIA' AND address = ${from} FOR UPDATE NOWAIT`
      assert.lengthOf(nonceRow, 1)
      assert.lengthOf(yield* sql`SELECT id FROM signing_owners WHERE id = ${owner} FOR UPDATE NOWAIT`, 1)
      const [open] = yield* sql<{ count: number }>`
        SELECT count(*)::int AS count FROM pg_stat_activity
        WHERE datname = current_database() AND state LIKE 'idle in transaction%'`
      assert.strictEqual(open!.count, 0)
      yield* signing.release
      const outcome = yield* signing.outcome
      assert.strictEqual(outcome._tag, "Signed")
      assert.strictEqual(nonceOf(Exit.succeed(outcome)), nodeCount + 1n)
    }).pipe(Effect.provide(layer)))

  it.effect("a nonce taken elsewhere while the signer worked: nothing of the first signature is stored, the signing is made again on the fresh sequence, no gap", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const from = yield* freshAddress
      assert.strictEqual(nonceOf(yield* Effect.exit(signFrom(from, yield* uuidV7, 5000n))), nodeCount)
      const owner = yield* uuidV7
      const signing = yield* signGated(from, owner)
      // Another process (its own OutgoingSends: its own signing queues) signs from the address meanwhile and takes
      // the nonce this signature was made with.
      const other = Context.get(yield* Layer.build(Layer.fresh(OutgoingSends.layer)), OutgoingSends)
      const taken = yield* signFrom(from, yield* uuidV7, 5001n).pipe(Effect.provideService(OutgoingSends, other))
      assert.strictEqual(nonceOf(Exit.succeed(taken)), nodeCount + 1n)
      yield* signing.release
      // The second round's signature waits on the gate too: it is released already.
      const outcome = yield* signing.outcome
      assert.strictEqual(signing.calls(), 2)
      assert.strictEqual(nonceOf(Exit.succeed(outcome)), nodeCount + 2n)
      const versions = yield* sql<{ nonce: string; count: number }>`
        SELECT s.nonce::text AS nonce, count(v.*)::int AS count FROM outgoing_sends s
        JOIN outgoing_versions v ON v.send_id = s.id WHERE s.owner_id = ${owner} GROUP BY s.nonce`
      assert.deepStrictEqual(versions.map((row) => ({ ...row })), [{ nonce: (nodeCount + 2n).toString(), count: 1 }])
      const [row] = yield* sql<{ next: string }>`
        SELECT next_nonce::text AS next FROM evm_nonces WHERE network_key = 'ETH_SEPOLIA' AND address = ${from}`
      assert.strictEqual(row?.next, (nodeCount + 3n).toString())
    }).pipe(Effect.scoped, Effect.provide(layer)))
})
