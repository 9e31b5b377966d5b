import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber, Layer, Redacted } from "effect"
import * as Database from "../../src/db/Database.ts"
import { MachineId, MessageStorage, Snowflake, TestRunner } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { ClusterLayer, purgeProcessedMessages } from "../../src/entities/Cluster.ts"
import { AppConfig } from "../../src/Config.ts"
import { WalletEntity, WalletEntityLayer } from "../../src/entities/WalletEntity.ts"
import { askAtStart, sweepStuckWallets } from "../../src/wallets/ProvisioningSupervisor.ts"
import { derivationPath } from "../../src/chains/Derivation.ts"
import {
  crashingOnceSigner,
  flakySigner,
  insertProvisioningWallet,
  provisionerLayer,
  walletRow
} from "./fixtures/WalletFixtures.ts"
import { holdShardOf } from "../support/Shards.ts"

const realSleep = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))

describe("wallet entity", () => {
  it.effect("provisions through a signer that fails twice, backing off on the TestClock, exactly once", () => {
    const signerState = { remaining: 2, calls: 0 }
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000a001",
      userId: "01a20190-0000-7000-8000-00000000b001",
      walletId: "01a20190-0000-7000-8000-00000000c001"
    }
    return Effect.gen(function*() {
      const tenantSeq = yield* insertProvisioningWallet(ids)
      const client = (yield* WalletEntity.client)(ids.walletId)
      const sent = yield* Effect.forkChild(client.Provision({ attempt: "initial" }))
      for (let step = 0; step < 100 && sent.pollUnsafe() === undefined; step++) {
        yield* TestClock.adjust("250 millis")
        yield* realSleep(10)
      }
      assert.strictEqual(yield* Fiber.join(sent), "ACTIVATED")
      assert.strictEqual(signerState.calls, 3)
      const row = yield* walletRow(ids.walletId)
      assert.strictEqual(row.status, "ACTIVE")
      // Deterministic from (tenant, user, wallet) indexes (chains notes, HD scheme): W = seq - 1 = 0.
      assert.strictEqual(row.derivation_path, derivationPath({ family: "EVM", tenantIndex: tenantSeq, userIndex: 0, walletIndex: 0 }))
      // The first tenant of this database has T = 1: the chains notes' scheme vector (1,0,0) for the test mnemonic.
      assert.strictEqual(tenantSeq, 1)
      assert.strictEqual(row.address, "0x4624b645E51eecba35ab1227eAdC41Eab50f7aD7".toLowerCase())
      // A second request (another attempt key) runs the handler again and changes nothing.
      const again = yield* Effect.forkChild(client.Provision({ attempt: "again" }))
      for (let step = 0; step < 100 && again.pollUnsafe() === undefined; step++) {
        yield* TestClock.adjust("250 millis")
        yield* realSleep(10)
      }
      assert.strictEqual(yield* Fiber.join(again), "ALREADY_PROVISIONED")
      assert.deepStrictEqual(yield* walletRow(ids.walletId), row)
    }).pipe(
      Effect.provide(WalletEntityLayer.pipe(
        Layer.provideMerge(TestRunner.layer),
        Layer.provideMerge(provisionerLayer(flakySigner(signerState)))
      ))
    )
  })

  it.effect("a defect fails that message only: the entity is not restarted forever, the next message works", () => {
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000a003",
      userId: "01a20190-0000-7000-8000-00000000b003",
      walletId: "01a20190-0000-7000-8000-00000000c003"
    }
    return Effect.gen(function*() {
      yield* insertProvisioningWallet(ids)
      const client = (yield* WalletEntity.client)(ids.walletId)
      const failed = yield* Effect.exit(client.Provision({ attempt: "initial" }))
      assert.isTrue(Exit.hasDies(failed))
      assert.strictEqual((yield* walletRow(ids.walletId)).status, "PROVISIONING")
      // What the provisioning supervisor does: ask again under a new attempt key.
      assert.strictEqual(yield* client.Provision({ attempt: "supervisor:1" }), "ACTIVATED")
      assert.strictEqual((yield* walletRow(ids.walletId)).status, "ACTIVE")
    }).pipe(
      Effect.provide(WalletEntityLayer.pipe(
        Layer.provideMerge(TestRunner.layer),
        Layer.provideMerge(provisionerLayer(crashingOnceSigner({ crashed: false })))
      ))
    )
  })

  it.live("the retention job deletes processed messages and their replies past the retention period only", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const now = yield* Clock.currentTimeMillis
      const old = Snowflake.make({ timestamp: now - 8 * 86_400_000, machineId: MachineId.MachineId.make(1), sequence: 1 })
      const recent = Snowflake.make({ timestamp: now - 86_400_000, machineId: MachineId.MachineId.make(1), sequence: 2 })
      for (const [id, processed] of [[old, true], [recent, true], [old + 1n, false]] as const) {
        yield* sql`INSERT INTO cluster_messages (id, shard_id, entity_type, entity_id, kind, processed, request_id)
          VALUES (${id.toString()}::bigint, 'default:1', 'Wallet', 'w', 0, ${processed}, ${id.toString()}::bigint)`
        yield* sql`INSERT INTO cluster_replies (id, kind, request_id, payload, sequence)
          VALUES (${(id + 100n).toString()}::bigint, 0, ${id.toString()}::bigint, '{}', 0)`
      }
      assert.strictEqual(yield* purgeProcessedMessages, 1)
      const left = yield* sql<{ id: string }>`SELECT id::text FROM cluster_messages ORDER BY id`
      assert.deepStrictEqual(left.map((row) => row.id), [(old + 1n).toString(), recent.toString()])
      const replies = yield* sql<{ request_id: string }>`SELECT request_id::text FROM cluster_replies ORDER BY request_id`
      assert.deepStrictEqual(replies.map((row) => row.request_id), [(old + 1n).toString(), recent.toString()])
    }).pipe(Effect.provide(ClusterLayer.pipe(Layer.provide(AppConfig.layerTest()), Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))))), Effect.orDie))

  it.live("a process killed -9 mid-provisioning: the persisted message is redelivered after a restart", () => {
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000a002",
      userId: "01a20190-0000-7000-8000-00000000b002",
      walletId: "01a20190-0000-7000-8000-00000000c002"
    }
    return Effect.gen(function*() {
      yield* insertProvisioningWallet(ids)
      const script = fileURLToPath(new URL("./fixtures/provision-and-hang.ts", import.meta.url))
      yield* Effect.promise(() =>
        new Promise<void>((resolve, reject) => {
          const child = spawn(process.execPath, [script, ids.walletId], {
            env: { ...process.env },
            stdio: ["ignore", "pipe", "inherit"]
          })
          let output = ""
          const timer = setTimeout(() => {
            child.kill("SIGKILL")
            reject(new Error(`the child never reached the signer: ${output}`))
          }, 20_000)
          child.stdout.on("data", (chunk) => {
            output += String(chunk)
            if (output.includes("handler-started")) {
              clearTimeout(timer)
              child.kill("SIGKILL")
              child.once("exit", () => resolve())
            }
          })
        })
      )
      assert.strictEqual((yield* walletRow(ids.walletId)).status, "PROVISIONING")
      // A new "process": the same entity on the same storage, with a working signer.
      const row = yield* Effect.gen(function*() {
        for (let attempt = 0; attempt < 150; attempt++) {
          const current = yield* walletRow(ids.walletId)
          if (current.status === "ACTIVE") return current
          yield* realSleep(100)
        }
        return yield* walletRow(ids.walletId)
      }).pipe(
        Effect.provide(WalletEntityLayer.pipe(
          Layer.provideMerge(ClusterLayer.pipe(Layer.provide(AppConfig.layerTest()))),
          Layer.provideMerge(provisionerLayer(flakySigner({ remaining: 0, calls: 0 })))
        ))
      )
      assert.strictEqual(row.status, "ACTIVE")
      assert.match(row.address!, /^0x[0-9a-f]{40}$/)
    }).pipe(Effect.provide(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))), Effect.orDie)
  }, 60_000)

  it.effect("at start every PROVISIONING wallet is asked, however recent, in memory: it is provisioned and no message is stored; the periodic sweep would not have asked it yet", () => {
    const ids = {
      tenantId: "01a20190-0000-7000-8000-00000000a004",
      userId: "01a20190-0000-7000-8000-00000000b004",
      walletId: "01a20190-0000-7000-8000-00000000c004"
    }
    return Effect.gen(function*() {
      // Its request lost with the process that held it in memory: committed PROVISIONING a moment ago, asked by nobody.
      yield* insertProvisioningWallet(ids)
      const stored = yield* MessageStorage.MemoryDriver
      assert.isTrue(yield* holdShardOf(WalletEntity, ids.walletId))
      const storedBefore = stored.requests.size
      // Other wallets of this database may be asked too (the sweep's unregistered networks); this one is not the sweep's.
      yield* sweepStuckWallets
      assert.strictEqual((yield* walletRow(ids.walletId)).status, "PROVISIONING", "created under a minute ago: not the sweep's")
      const storedAfterSweep = stored.requests.size
      assert.isAtLeast(yield* askAtStart, 1)
      for (let step = 0; step < 200 && (yield* walletRow(ids.walletId)).status !== "ACTIVE"; step++) {
        yield* realSleep(10)
      }
      assert.strictEqual((yield* walletRow(ids.walletId)).status, "ACTIVE")
      assert.strictEqual(stored.requests.size, storedAfterSweep, "ProvisionNow, not the persisted Provision")
      assert.isAtLeast(storedAfterSweep, storedBefore)
    }).pipe(
      Effect.provide(WalletEntityLayer.pipe(
        Layer.provideMerge(TestRunner.layer),
        Layer.provideMerge(provisionerLayer(flakySigner({ remaining: 0, calls: 0 })))
      ))
    )
  })
})
