/**
 * The later versions of a send that are not EVM replacements (sending/OutgoingSends.ts; decisions.md "Sending on
 * real networks"): a TRON or SOL transaction is signed again, same payload on fresh parameters, only once its client
 * says the earlier bytes expired unincluded; a BTC transaction is replaced by fee when its client gives replacement
 * parameters. The chain here is the simulated one with those two answers controlled by the test, so each rule is
 * seen alone; the families' own tests show them on their nodes. A BTC send is Conflicted (never included, its owner
 * fails) only when its client proves it, and is asked only when the send is in no block and no mempool.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { type ChainClient, ChainClients, type ChainHead, type WithdrawalParameters } from "../../src/chains/ChainClient.ts"
import { SimulatedChain } from "../../src/chains/simulated/SimulatedChain.ts"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids } from "../../src/domain/Ids.ts"
import { OutgoingSends, type Send } from "../../src/sending/OutgoingSends.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { signedParameters } from "../../src/sending/SignedParameters.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { platformKey } from "../../src/signer/TransactionRequest.ts"
import { testMnemonic } from "../support/TestApp.ts"

/** What the test's clients answer beyond the simulated chain. */
const control = {
  expired: false,
  expiration: 1_900_000_000_000,
  replaceAfterBlocks: 3n,
  feeRaise: 500n,
  /** BTC: the node has the transaction in no block and no mempool (UNKNOWN), and what `conflicted` answers. */
  unknown: false,
  conflicted: false,
  conflictedAsked: [] as Array<{ readonly txHash: string; readonly versions: ReadonlyArray<string>; readonly twoConfirmations: boolean }>
}

/** The simulated client of the network, with `expired` (TRON/SOL) or `replacementParameters` (BTC) added. */
const controlled = (client: ChainClient): ChainClient => {
  const withdrawals = client.withdrawals!
  if (client.networkKey === "BTC_TESTNET") {
    return {
      ...client,
      transactionState: (txHash) => control.unknown ? Effect.succeed("UNKNOWN" as const) : client.transactionState(txHash),
      withdrawals: {
        ...withdrawals,
        conflicted: (signed, versions, final) =>
          Effect.sync(() => {
            // BTC_TESTNET's rule is 2 confirmations: a block at the head is not final, one below it is.
            const at: ChainHead = { height: 50n, hash: "h", finalizedHeight: 0n }
            control.conflictedAsked.push({ txHash: signed.txHash, versions, twoConfirmations: !final(at, 50n) && final(at, 49n) })
            return control.conflicted
          }),
        replacementParameters: (previous, blocksWaited) =>
          Effect.succeed(
            previous.family === "BTC" && blocksWaited >= control.replaceAfterBlocks
              ? { ...previous, networkFee: previous.networkFee + control.feeRaise }
              : undefined
          )
      }
    }
  }
  return {
    ...client,
    withdrawals: {
      ...withdrawals,
      // Each reading gives a later expiration, as a fresh reference block would: new bytes, a new hash.
      withdrawalParameters: (transfer) =>
        Effect.map(withdrawals.withdrawalParameters(transfer), (parameters): WithdrawalParameters =>
          parameters.family === "TRON" ? { ...parameters, expiration: ++control.expiration } : parameters),
      expired: () => Effect.succeed(control.expired)
    }
  }
}

const clientsLayer = Layer.effect(
  ChainClients,
  Effect.map(Effect.service(SimulatedChain), (chain) =>
    ChainClients.of({
      get: (networkKey) => controlled(chain.client(networkKey)),
      networkKeys: ["TRON_NILE", "BTC_TESTNET"],
      isSimulated: () => true
    }))
)

const layer = OutgoingSends.layer.pipe(
  Layer.provideMerge(clientsLayer),
  Layer.provideMerge(SimulatedChain.layer),
  Layer.provideMerge(Catalog.layer),
  Layer.provideMerge(Signer.layerLocalHd(Redacted.make(testMnemonic))),
  // The fees of sends that are final are booked through the ledger (OutgoingSends.markFinal).
  Layer.provideMerge(Ledger.layer),
  Layer.provideMerge(Ids.layer),
  Layer.provideMerge(Entropy.layer),
  Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
  Layer.provideMerge(AppConfig.layerTest()),
  Layer.orDie
)

const head = (height: bigint): ChainHead => ({ height, hash: "head", finalizedHeight: 0n })

const signSend = (ownerId: string, networkKey: string, assetId: string, to: string, broadcast = true) =>
  Effect.gen(function*() {
    const sends = yield* OutgoingSends
    const signer = yield* Signer
    const network = (yield* Catalog).network(networkKey)!
    const hot = yield* signer.platformAddress({ role: "HOT", family: network.chainFamily, btcNetwork: network.btcNetwork ?? undefined })
    const outcome = yield* sends.sign(
      {
        purpose: "WITHDRAWAL",
        ownerId,
        networkKey,
        key: platformKey("HOT"),
        transfer: { withdrawalId: ownerId, from: hot.address, to, assetId, amount: 1_000_000n }
      },
      { guard: Effect.succeed(true) }
    )
    assert.strictEqual(outcome._tag, "Signed")
    const send = (outcome as { readonly send: Send }).send
    if (broadcast) assert.strictEqual(yield* sends.broadcast(send), "SENT")
    return send
  })

const reloaded = (send: Send) => Effect.flatMap(Effect.service(OutgoingSends), (sends) => sends.forOwner(send.purpose, send.owner_id)).pipe(Effect.map((fresh) => fresh!))

describe("later versions of TRON, SOL and BTC sends", () => {
  it.effect("TRON: not re-signed while the client says the bytes may still be included; once expired unincluded, the same payload is signed again on fresh parameters and broadcast", () =>
    Effect.gen(function*() {
      const sends = yield* OutgoingSends
      control.expired = false
      const send = yield* signSend("01a20190-0000-7000-8000-0000000e0001", "TRON_NILE", "TRON_NILE_TRX", "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7")
      assert.strictEqual((yield* sends.check(send, head(10n)))._tag, "Waiting")
      assert.strictEqual((yield* reloaded(send)).versions.length, 1, "no second signature before expiry")

      control.expired = true
      const first = (yield* reloaded(send)).versions[0]!
      assert.strictEqual((yield* sends.check(yield* reloaded(send), head(11n)))._tag, "Waiting")
      const after = yield* reloaded(send)
      assert.strictEqual(after.versions.length, 2)
      const second = after.versions[1]!
      assert.notStrictEqual(second.tx_hash, first.tx_hash)
      assert.strictEqual(second.kind, "PAYLOAD")
      assert.strictEqual(second.broadcasts, 1, "the new version is broadcast at once")
      const stored = signedParameters(second.parameters)
      assert.strictEqual(stored?.family, "TRON")
      assert.isTrue(stored?.family === "TRON" && stored.expiration! > (signedParameters(first.parameters) as { expiration: number }).expiration)
      // Same payload: recipient, asset and amount are the send's, whatever version.
      assert.deepStrictEqual([after.to_address, after.asset_id, after.amount], [send.to_address, send.asset_id, send.amount])
    }).pipe(Effect.provide(layer)))

  it.effect("TRON: a send that is no longer PENDING is never signed again, expired or not", () =>
    Effect.gen(function*() {
      const sends = yield* OutgoingSends
      const sql = yield* SqlClient.SqlClient
      control.expired = true
      const send = yield* signSend("01a20190-0000-7000-8000-0000000e0002", "TRON_NILE", "TRON_NILE_TRX", "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7")
      yield* sql`UPDATE outgoing_sends SET state = 'REJECTED' WHERE id = ${send.id}`
      yield* sends.check(yield* reloaded(send), head(12n))
      assert.strictEqual((yield* reloaded(send)).versions.length, 1)
    }).pipe(Effect.provide(layer)))

  it.effect("BTC: replaced by fee only when the client gives replacement parameters (after the blocks it waits), with the same inputs and the higher fee stored", () =>
    Effect.gen(function*() {
      const sends = yield* OutgoingSends
      const send = yield* signSend("01a20190-0000-7000-8000-0000000e0003", "BTC_TESTNET", "BTC_TESTNET_BTC", "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx")
      // The first check records the height it was first seen unincluded; 2 blocks later it still waits.
      yield* sends.check(send, head(100n))
      yield* sends.check(yield* reloaded(send), head(102n))
      assert.strictEqual((yield* reloaded(send)).versions.length, 1)
      yield* sends.check(yield* reloaded(send), head(103n))
      const after = yield* reloaded(send)
      assert.strictEqual(after.versions.length, 2)
      const [first, second] = [signedParameters(after.versions[0]!.parameters), signedParameters(after.versions[1]!.parameters)]
      assert.isTrue(first?.family === "BTC" && second?.family === "BTC")
      if (first?.family !== "BTC" || second?.family !== "BTC") return
      assert.deepStrictEqual(second.inputs, first.inputs, "replace-by-fee spends the same inputs")
      assert.strictEqual(second.networkFee, first.networkFee + control.feeRaise)
      assert.strictEqual(after.versions[1]!.network_fee_max, second.networkFee)
      assert.strictEqual(after.versions[1]!.broadcasts, 1)
    }).pipe(Effect.provide(layer)))

  it.effect("BTC: Conflicted only when the client proves no version can be included, asked only while the send is in no block and no mempool; the owner marks it REJECTED (decisions.md \"Sending on real networks\")", () =>
    Effect.gen(function*() {
      const sends = yield* OutgoingSends
      const send = yield* signSend("01a20190-0000-7000-8000-0000000e0004", "BTC_TESTNET", "BTC_TESTNET_BTC", "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx")
      control.conflictedAsked.length = 0
      // In the mempool: not asked, whatever the client would say.
      control.conflicted = true
      assert.strictEqual((yield* sends.check(send, head(200n)))._tag, "Waiting")
      assert.strictEqual(control.conflictedAsked.length, 0)
      // Gone from the mempool, no proof yet (the other spend not final): it waits, and the same bytes are offered again.
      control.unknown = true
      control.conflicted = false
      const broadcasts = (yield* reloaded(send)).versions[0]!.broadcasts
      assert.strictEqual((yield* sends.check(yield* reloaded(send), head(201n)))._tag, "Waiting")
      assert.strictEqual(control.conflictedAsked.length, 1)
      const asked = control.conflictedAsked[0]!
      assert.strictEqual(asked.txHash, send.versions[0]!.tx_hash)
      assert.deepStrictEqual(asked.versions, [send.versions[0]!.tx_hash])
      assert.isTrue(asked.twoConfirmations, "the pipeline's finality is the network's confirmation rule")
      assert.strictEqual((yield* reloaded(send)).versions[0]!.broadcasts, broadcasts + 1, "rebroadcast while it waits")
      // Proven: Conflicted, and the send stays PENDING until its owner records it in its own transaction.
      control.conflicted = true
      assert.strictEqual((yield* sends.check(yield* reloaded(send), head(201n)))._tag, "Conflicted")
      assert.strictEqual((yield* reloaded(send)).state, "PENDING")
      yield* sends.markRejected(yield* reloaded(send))
      assert.strictEqual((yield* reloaded(send)).state, "REJECTED")
      // A send no longer PENDING is never asked again.
      const before = control.conflictedAsked.length
      assert.strictEqual((yield* sends.check(yield* reloaded(send), head(202n)))._tag, "Waiting")
      assert.strictEqual(control.conflictedAsked.length, before)
      control.unknown = false
      control.conflicted = false
    }).pipe(Effect.provide(layer)))
})

describe("what a sending address's sends no node has taken yet will spend (OutgoingSends.reserved)", () => {
  it.effect("each PENDING send none of whose versions was broadcast counts its amount and its first version's fee; a broadcast one, one whose later version was broadcast, or one no longer PENDING counts nothing (read from the unsent first versions, sql/0035)", () =>
    Effect.gen(function*() {
      const sends = yield* OutgoingSends
      const sql = yield* SqlClient.SqlClient
      const to = "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"
      const from = (yield* signSend("01a20190-0000-7000-8000-0000000e0101", "TRON_NILE", "TRON_NILE_TRX", to)).from_address
      // The file's other sends from this address (earlier tests) are the baseline.
      const before = (yield* sends.reserved("TRON_NILE", from)).get("TRON_NILE_TRX") ?? 0n
      const unsent = yield* signSend("01a20190-0000-7000-8000-0000000e0102", "TRON_NILE", "TRON_NILE_TRX", to, false)
      const rejected = yield* signSend("01a20190-0000-7000-8000-0000000e0103", "TRON_NILE", "TRON_NILE_TRX", to, false)
      const replaced = yield* signSend("01a20190-0000-7000-8000-0000000e0104", "TRON_NILE", "TRON_NILE_TRX", to, false)
      const each = (send: Send) => send.amount + send.versions[0]!.network_fee_max
      assert.strictEqual(
        (yield* sends.reserved("TRON_NILE", from)).get("TRON_NILE_TRX"),
        before + each(unsent) + each(rejected) + each(replaced)
      )
      yield* sql`UPDATE outgoing_sends SET state = 'REJECTED' WHERE id = ${rejected.id}`
      // A later version given to a node: the send is taken, whatever its first version's count.
      yield* sql`INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, network_fee_max,
          signed_at, parameters, broadcasts)
        SELECT send_id, 2, kind, network_key, tx_hash || '2', raw, network_fee_max, signed_at, parameters, 1
        FROM outgoing_versions WHERE send_id = ${replaced.id} AND version = 1`
      assert.strictEqual((yield* sends.reserved("TRON_NILE", from)).get("TRON_NILE_TRX"), before + each(unsent))
      assert.strictEqual(yield* sends.broadcast(unsent), "SENT")
      assert.strictEqual((yield* sends.reserved("TRON_NILE", from)).get("TRON_NILE_TRX") ?? 0n, before)
    }).pipe(Effect.provide(layer)))
})
