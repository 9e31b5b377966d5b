/**
 * The withdrawal's cluster entity (entities/WithdrawalEntity.ts) under the cluster's TestRunner and the TestClock, as
 * test/entities/WalletEntity.test.ts does for wallets: the withdrawal is inserted directly (SUBMITTED, funds frozen),
 * the entity is sent `Process`, and its reply and the database are checked. A signer that fails ends the withdrawal
 * FAILED / SIGNING_FAILED with its funds released, never signed; a working signer takes it to CONFIRMING, and
 * another attempt neither signs again nor broadcasts a second time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Redacted } from "effect"
import { MessageStorage, TestRunner } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { keccak256, parseTransaction, recoverTransactionAddress } from "viem"
import { ConfigChanges } from "../../src/auth/ConfigChanges.ts"
import { Switches } from "../../src/catalog/Switches.ts"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { ChainClients } from "../../src/chains/ChainClient.ts"
import { chainClientsLayer } from "../../src/chains/ChainClientsLayer.ts"
import { SimulatedChain } from "../../src/chains/simulated/SimulatedChain.ts"
import { AppConfig, type ConfigInvalid } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { SignerUnavailable } from "../../src/domain/ApiError.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids } from "../../src/domain/Ids.ts"
import { Outbox } from "../../src/outbox/Outbox.ts"
import { TransactionEvents } from "../../src/transactions/TransactionEvents.ts"
import { WithdrawalEntity, WithdrawalEntityLayer } from "../../src/entities/WithdrawalEntity.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { Postings } from "../../src/ledger/Postings.ts"
import { OutgoingSends } from "../../src/sending/OutgoingSends.ts"
import { Signer, SignerRefused } from "../../src/signer/Signer.ts"
import { Tenants } from "../../src/tenants/Tenants.ts"
import { TransactionRepository } from "../../src/transactions/TransactionRepository.ts"
import { PlatformAddresses } from "../../src/wallets/PlatformAddresses.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { askOpenWithdrawals, sweepStuckWithdrawals } from "../../src/withdrawals/WithdrawalSupervisor.ts"
import { testMnemonic } from "../support/TestApp.ts"
import { holdShardOf } from "../support/Shards.ts"

const realSleep = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))

const eth = "ETH_SEPOLIA_ETH"
const ethTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
const amount = 10n ** 16n
const fee = 1000n
const funded = 10n ** 18n

/** The test mnemonic's signer with `signTransaction` replaced (given the real one), counting its calls. */
const signerWith = (state: { calls: number }, sign: (real: Signer["Service"]) => Signer["Service"]["signTransaction"]) =>
  Layer.effect(
    Signer,
    Effect.map(Effect.service(Signer), (real) =>
      Signer.of({
        ...real,
        signTransaction: (request) => Effect.suspend(() => {
          state.calls++
          return sign(real)(request)
        })
      }))
  ).pipe(Layer.provide(Signer.layerLocalHd(Redacted.make(testMnemonic))), Layer.orDie)

/** The chain clients with each withdrawal client's `inclusion` counting its questions per transaction hash. */
const countingInclusions = (asked: Map<string, number>) =>
  Layer.effect(
    ChainClients,
    Effect.map(Effect.service(ChainClients), (real) =>
      ChainClients.of({
        ...real,
        get: (networkKey) => {
          const client = real.get(networkKey)
          if (client?.withdrawals === undefined) return client
          const withdrawals = client.withdrawals
          return {
            ...client,
            withdrawals: {
              ...withdrawals,
              inclusion: (txHash: string) => Effect.suspend(() => {
                asked.set(txHash, (asked.get(txHash) ?? 0) + 1)
                return withdrawals.inclusion(txHash)
              })
            }
          }
        }
      }))
  ).pipe(Layer.provide(chainClientsLayer))

/** The entity, its processor and the simulated chain over the test database, on the cluster's TestRunner. */
const entityLayer = (signer: Layer.Layer<Signer>, clients: Layer.Layer<ChainClients, ConfigInvalid, any> = chainClientsLayer) =>
  WithdrawalEntityLayer.pipe(
    Layer.provideMerge(TestRunner.layer),
    Layer.provideMerge(WithdrawalProcessor.layer),
    Layer.provideMerge(OutgoingSends.layer),
    Layer.provideMerge(TransactionEvents.layer),
    Layer.provideMerge(Switches.layer),
    Layer.provideMerge(clients),
    Layer.provideMerge(SimulatedChain.layer),
    Layer.provideMerge(Layer.mergeAll(PlatformAddresses.layer, Ledger.layer, TransactionRepository.layer)),
    Layer.provideMerge(Layer.mergeAll(Tenants.layer, Catalog.layer)),
    Layer.provideMerge(ConfigChanges.layer),
    Layer.provideMerge(signer),
    Layer.provideMerge(Outbox.layer),
    Layer.provideMerge(Ids.layer),
    Layer.provideMerge(Entropy.layer),
    Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
    Layer.provideMerge(AppConfig.layerTest({ serviceEnv: "preproduction" })),
    Layer.orDie
  )

/** A tenant, a user, an EVM wallet (its status and address play no part in sending) funded with 1 ETH, and a withdrawal SUBMITTED with amount + fee frozen. */
const insertSubmittedWithdrawal = (ids: { tenantId: string; userId: string; uid: string; walletId: string; withdrawalId: string }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    yield* sql`INSERT INTO tenants (id, name, networks, created_at) VALUES (${ids.tenantId}, 'entity', '{}', now())`
    yield* sql`INSERT INTO users (id, tenant_id, seq, uid, customer_ref_id, source, created_at, updated_at)
      VALUES (${ids.userId}, ${ids.tenantId}, 0, ${ids.uid}, ${ids.userId}, 'B_API', now(), now())`
    // ACTIVE, as a wallet that submitted is: the QUEUED step holds a withdrawal whose wallet may not send.
    yield* sql`INSERT INTO wallets (id, tenant_id, user_id, chain_family, seq, name, is_default, status, address,
        derivation_path, created_at, updated_at)
      VALUES (${ids.walletId}, ${ids.tenantId}, ${ids.userId}, 'EVM', 1, 'EVM 1', true, 'ACTIVE',
        '0x00000000000000000000000000000000000000e1', 'm/44''/60''/0''/0/1', now(), now())`
    yield* ledger.post({
      tenantId: ids.tenantId,
      kind: "DEPOSIT_CREDIT",
      referenceId: ids.tenantId,
      postings: [
        { account: { kind: "CHAIN" }, assetId: eth, bucket: "AVAILABLE", amount: -funded },
        { account: { kind: "WALLET", walletId: ids.walletId }, assetId: eth, bucket: "AVAILABLE", amount: funded }
      ]
    })
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`INSERT INTO transactions (id, tenant_id, kind, settlement, status, asset_id, network_key, amount, fee,
          source_wallet_id, source_user_id, destination_address, created_at, updated_at)
        VALUES (${ids.withdrawalId}, ${ids.tenantId}, 'WITHDRAWAL', 'ON_CHAIN', 'SUBMITTED', ${eth}, 'ETH_SEPOLIA',
          ${amount.toString()}, ${fee.toString()}, ${ids.walletId}, ${ids.userId}, ${ethTo}, now(), now())`
      yield* sql`INSERT INTO withdrawals (transaction_id) VALUES (${ids.withdrawalId})`
      yield* ledger.post({
        tenantId: ids.tenantId,
        kind: "WITHDRAWAL_FREEZE",
        referenceId: ids.withdrawalId,
        postings: Postings.withdrawalFreeze({ walletId: ids.walletId, assetId: eth, amount, fee }).postings
      })
    }))
  }).pipe(Effect.orDie)

const walletBalance = (walletId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ available: string; frozen: string }>`
      SELECT available::text AS available, frozen::text AS frozen FROM ledger_accounts
      WHERE kind = 'WALLET' AND wallet_id = ${walletId} AND asset_id = ${eth}`
    return row!
  }).pipe(Effect.orDie)

const withdrawalState = (id: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{
      status: string
      sub_status: string | null
      tx_hash: string | null
      signed_raw: string | null
      signed_tx_hash: string | null
      signed_at: Date | null
      broadcasts: number
    }>`
      SELECT t.status, t.sub_status, t.tx_hash, w.signed_raw, w.signed_tx_hash, w.signed_at, w.broadcasts
      FROM transactions t JOIN withdrawals w ON w.transaction_id = t.id WHERE t.id = ${id}`
    const entries = yield* sql<{ kind: string }>`SELECT kind FROM ledger_entries WHERE reference_id = ${id} ORDER BY created_at, id`
    const events = yield* sql<{ data: any }>`
      SELECT data FROM outbox_events WHERE subject_id = ${id} AND event_type = 'TRANSACTION_STATUS_UPDATED' ORDER BY created_at, id`
    return {
      ...row!,
      entries: entries.map((entry) => entry.kind),
      events: events.map((event) => `${event.data.status}/${event.data.subStatus ?? ""}`)
    }
  }).pipe(Effect.orDie)

/** Sends Process and drives the TestClock until the entity replies. */
const processOnce = (withdrawalId: string, attempt: string) =>
  Effect.gen(function*() {
    const client = (yield* WithdrawalEntity.client)(withdrawalId)
    const sent = yield* Effect.forkChild(client.Process({ attempt }))
    for (let step = 0; step < 200 && sent.pollUnsafe() === undefined; step++) {
      yield* TestClock.adjust("250 millis")
      yield* realSleep(10)
    }
    return yield* Fiber.join(sent)
  })

describe("withdrawal entity on the TestRunner", () => {
  it.effect("a signer that refuses for good: FAILED / SIGNING_FAILED, funds released once, nothing signed or broadcast; asked again, nothing changes", () => {
    const signer = { calls: 0 }
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000d001",
      userId: "01a20190-0000-7000-8000-00000000d002",
      uid: "10000001",
      walletId: "01a20190-0000-7000-8000-00000000d003",
      withdrawalId: "01a20190-0000-7000-8000-00000000d004"
    }
    return Effect.gen(function*() {
      yield* insertSubmittedWithdrawal(ids)
      assert.deepStrictEqual(yield* walletBalance(ids.walletId), {
        available: (funded - amount - fee).toString(),
        frozen: (amount + fee).toString()
      })
      assert.strictEqual(yield* processOnce(ids.withdrawalId, "initial"), "FAILED")
      assert.strictEqual(signer.calls, 1)
      const state = yield* withdrawalState(ids.withdrawalId)
      assert.deepStrictEqual(
        [state.status, state.sub_status, state.tx_hash, state.signed_raw, state.signed_tx_hash, state.broadcasts],
        ["FAILED", "SIGNING_FAILED", null, null, null, 0]
      )
      assert.deepStrictEqual(state.entries, ["WITHDRAWAL_FREEZE", "WITHDRAWAL_RELEASE"])
      assert.deepStrictEqual(state.events, ["QUEUED/", "PENDING_SIGNATURE/", "FAILED/SIGNING_FAILED"])
      assert.deepStrictEqual(yield* walletBalance(ids.walletId), { available: funded.toString(), frozen: "0" })
      const sql = yield* SqlClient.SqlClient
      const broadcasts = yield* sql`SELECT 1 FROM devnet_broadcasts WHERE network_key = 'ETH_SEPOLIA'`
      assert.strictEqual(broadcasts.length, 0)

      // The supervisor's next attempt: the handler runs again on a terminal withdrawal and changes nothing.
      assert.strictEqual(yield* processOnce(ids.withdrawalId, "supervisor:1"), "FAILED")
      assert.strictEqual(signer.calls, 1, "never signed again")
      assert.deepStrictEqual(yield* withdrawalState(ids.withdrawalId), state)
      assert.deepStrictEqual(yield* walletBalance(ids.walletId), { available: funded.toString(), frozen: "0" })
    }).pipe(Effect.provide(entityLayer(signerWith(signer, () => () =>
      Effect.fail(new SignerRefused({ message: "no such key" }))))))
  })

  it.effect("a signer that is down (decisions.md): the withdrawal waits in PENDING_SIGNATURE, nothing stored, no nonce used; once it is back, signed and broadcast", () => {
    const signer = { calls: 0 }
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000f001",
      userId: "01a20190-0000-7000-8000-00000000f002",
      uid: "10000003",
      walletId: "01a20190-0000-7000-8000-00000000f003",
      withdrawalId: "01a20190-0000-7000-8000-00000000f004"
    }
    return Effect.gen(function*() {
      yield* insertSubmittedWithdrawal(ids)
      assert.strictEqual(yield* processOnce(ids.withdrawalId, "initial"), "PENDING_SIGNATURE")
      assert.strictEqual(signer.calls, 1)
      const waiting = yield* withdrawalState(ids.withdrawalId)
      assert.deepStrictEqual([waiting.status, waiting.sub_status, waiting.signed_raw, waiting.broadcasts], ["PENDING_SIGNATURE", null, null, 0])
      assert.deepStrictEqual(waiting.entries, ["WITHDRAWAL_FREEZE"])
      const sql = yield* SqlClient.SqlClient
      assert.strictEqual((yield* sql`SELECT 1 FROM outgoing_sends WHERE owner_id = ${ids.withdrawalId}`).length, 0)

      assert.strictEqual(yield* processOnce(ids.withdrawalId, "supervisor:1"), "CONFIRMING")
      assert.strictEqual(signer.calls, 2)
      const sent = yield* withdrawalState(ids.withdrawalId)
      assert.strictEqual(sent.tx_hash, sent.signed_tx_hash)
      assert.deepStrictEqual(sent.events, ["QUEUED/", "PENDING_SIGNATURE/", "CONFIRMING/"])
    }).pipe(Effect.provide(entityLayer(signerWith(signer, (real) => (request) =>
      signer.calls === 1 ? Effect.fail(new SignerUnavailable({ message: "the signer is down" })) : real.signTransaction(request)))))
  })

  it.effect("a working signer: CONFIRMING with the HOT address's signature stored and broadcast once; another attempt neither re-signs nor re-broadcasts", () => {
    const signer = { calls: 0 }
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000e001",
      userId: "01a20190-0000-7000-8000-00000000e002",
      uid: "10000002",
      walletId: "01a20190-0000-7000-8000-00000000e003",
      withdrawalId: "01a20190-0000-7000-8000-00000000e004"
    }
    return Effect.gen(function*() {
      yield* insertSubmittedWithdrawal(ids)
      assert.strictEqual(yield* processOnce(ids.withdrawalId, "initial"), "CONFIRMING")
      assert.strictEqual(signer.calls, 1)
      const state = yield* withdrawalState(ids.withdrawalId)
      assert.strictEqual(state.status, "CONFIRMING")
      assert.strictEqual(state.tx_hash, state.signed_tx_hash)
      assert.strictEqual(state.broadcasts, 1)
      const raw = state.signed_raw as `0x02${string}`
      assert.strictEqual(keccak256(raw), state.tx_hash)
      const parsed = parseTransaction(raw)
      assert.deepStrictEqual([parsed.to, parsed.value], [ethTo, amount])
      const platform = yield* PlatformAddresses
      const hot = (yield* platform.list).find((entry) => entry.networkKey === "ETH_SEPOLIA" && entry.role === "HOT")!.address
      assert.strictEqual((yield* Effect.promise(() => recoverTransactionAddress({ serializedTransaction: raw }))).toLowerCase(), hot)
      assert.deepStrictEqual(state.entries, ["WITHDRAWAL_FREEZE"])
      assert.deepStrictEqual(state.events, ["QUEUED/", "PENDING_SIGNATURE/", "CONFIRMING/"])
      assert.deepStrictEqual(yield* walletBalance(ids.walletId), {
        available: (funded - amount - fee).toString(),
        frozen: (amount + fee).toString()
      })

      assert.strictEqual(yield* processOnce(ids.withdrawalId, "supervisor:1"), "CONFIRMING")
      assert.strictEqual(signer.calls, 1, "never signed again")
      assert.deepStrictEqual(yield* withdrawalState(ids.withdrawalId), state)
    }).pipe(Effect.provide(entityLayer(signerWith(signer, (real) => real.signTransaction))))
  })

  it.effect("confirmations: a withdrawal seen included is not asked of the node again until its confirmations are due, or the block the deposit watcher scanned at its height changes", () => {
    const asked = new Map<string, number>()
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000c001",
      userId: "01a20190-0000-7000-8000-00000000c002",
      uid: "10000004",
      walletId: "01a20190-0000-7000-8000-00000000c003",
      withdrawalId: "01a20190-0000-7000-8000-00000000c004"
    }
    return Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const chain = yield* SimulatedChain
      const processor = yield* WithdrawalProcessor
      yield* insertSubmittedWithdrawal(ids)
      assert.strictEqual(yield* processOnce(ids.withdrawalId, "initial"), "CONFIRMING")
      const txHash = (yield* withdrawalState(ids.withdrawalId)).tx_hash!
      // What the deposit watcher records of the blocks it scans (chain_blocks), here copied from the chain itself.
      const scan = sql`INSERT INTO chain_blocks (network_key, height, hash)
        SELECT network_key, height, hash FROM devnet_blocks WHERE network_key = 'ETH_SEPOLIA'
        ON CONFLICT (network_key, height) DO UPDATE SET hash = EXCLUDED.hash`.pipe(Effect.orDie)
      const confirm = Effect.andThen(processor.confirm("ETH_SEPOLIA"), Effect.sync(() => asked.get(txHash) ?? 0))
      const included = yield* chain.mine("ETH_SEPOLIA", 1)
      yield* scan
      assert.strictEqual(yield* confirm, 1, "seen included at the first check")
      assert.strictEqual(yield* confirm, 1, "not asked again: its block is the scanned one, 1 of 12 confirmations")
      yield* chain.mine("ETH_SEPOLIA", 5)
      yield* scan
      assert.strictEqual(yield* confirm, 1, "6 of 12: still not asked")
      // A reorganization the watcher found replaced the block at that height: asked again at once.
      yield* sql`UPDATE chain_blocks SET hash = 'replaced' WHERE network_key = 'ETH_SEPOLIA' AND height = ${included.toString()}`
      assert.strictEqual(yield* confirm, 2)
      assert.strictEqual((yield* withdrawalState(ids.withdrawalId)).status, "CONFIRMING")
      assert.strictEqual(yield* confirm, 2, "remembered again with the block now scanned")
      yield* chain.mine("ETH_SEPOLIA", 6)
      yield* scan
      assert.strictEqual(yield* confirm, 3, "12 of 12: asked, and final")
      assert.strictEqual((yield* withdrawalState(ids.withdrawalId)).status, "COMPLETED")
    }).pipe(Effect.provide(entityLayer(signerWith({ calls: 0 }, (real) => real.signTransaction), countingInclusions(asked))))
  })

  it.effect("at start every open withdrawal is asked, however recent, in memory: it moves on and no message is stored; the periodic sweep would not have asked it yet", () => {
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000a001",
      userId: "01a20190-0000-7000-8000-00000000a002",
      uid: "10000005",
      walletId: "01a20190-0000-7000-8000-00000000a003",
      withdrawalId: "01a20190-0000-7000-8000-00000000a004"
    }
    return Effect.gen(function*() {
      // Its request lost with the process that held it in memory: committed SUBMITTED a moment ago, asked by nobody.
      yield* insertSubmittedWithdrawal(ids)
      const stored = yield* MessageStorage.MemoryDriver
      assert.isTrue(yield* holdShardOf(WithdrawalEntity, ids.withdrawalId))
      const storedBefore = stored.requests.size
      assert.strictEqual(yield* sweepStuckWithdrawals, 0, "updated under withdrawalStuckAfterMillis ago: not the sweep's")
      assert.strictEqual(yield* askOpenWithdrawals, 1)
      for (let step = 0; step < 200 && (yield* withdrawalState(ids.withdrawalId)).status !== "CONFIRMING"; step++) {
        yield* realSleep(10)
      }
      assert.strictEqual((yield* withdrawalState(ids.withdrawalId)).status, "CONFIRMING")
      assert.strictEqual(stored.requests.size, storedBefore, "ProcessNow, not the persisted Process")
    }).pipe(Effect.provide(entityLayer(signerWith({ calls: 0 }, (real) => real.signTransaction))))
  })
})
