/**
 * Two service processes on one PostgreSQL (the first's embedded server; the second by DATABASE_URL, with the same
 * signer and operator token), as a deployment with more than one process runs. Each holds part of the cluster's
 * shards. A withdrawal's entity is asked in memory when the submitting process holds its shard, and with the
 * persisted `Process` message otherwise (entities/WithdrawalEntity.ts): withdrawals submitted through both processes
 * all move on at once, both ways are taken, and none waits for the supervisor's sweep (10 s and more).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll } from "vitest"
import { makeCrashHarness } from "./SendingCrashHarness.ts"
import { cleanUpNow, freePort, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

const harness = await makeCrashHarness("coffer-two-processes-", {})
const secondDataDir = makeDataDir("coffer-two-processes-second-")
let second: ServiceProcess | undefined
afterAll(async () => {
  cleanUpNow(second, secondDataDir)
  await harness.cleanUp()
})

const count = 12
/** Under the supervisor's sweep, which asks a withdrawal again 10 s after its last change at the earliest. */
const withinMillis = 9_000

describe("two processes on one database", () => {
  it.live("withdrawals submitted through either process all reach CONFIRMING at once; entities of the other process's shards are asked through storage", () =>
    Effect.promise(async () => {
      const first = await harness.start()
      const url = JSON.parse(readFileSync(join(harness.dataDir, "pg-conn.json"), "utf8")).url as string
      second = spawnService({
        dataDir: secondDataDir,
        port: await freePort(),
        opsPort: await freePort(),
        env: {
          DATABASE_URL: url,
          SIGNER_MNEMONIC: readFileSync(join(harness.dataDir, "signer-mnemonic"), "utf8").trim(),
          OPS_TOKEN: harness.opsToken()
        }
      })
      await waitForHealth(second, harness.opsToken(), 60_000)
      const ops = (path: string, body: unknown) =>
        fetch(`${first.opsUrl}${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${harness.opsToken()}`, "content-type": "application/json" },
          body: JSON.stringify(body)
        }).then((response) => response.json())

      const payers: Array<{ walletId: string; address: string }> = []
      for (let index = 0; index < count; index++) {
        const payer = await harness.depositAddress(first, `two-${index}`, "ETH_SEPOLIA")
        payers.push(payer)
        await ops("/ops/devnet/ETH_SEPOLIA/transfers", { to: payer.address, assetId: "ETH_SEPOLIA_ETH", amountRaw: "50000000000000000" })
      }
      await ops("/ops/devnet/ETH_SEPOLIA/blocks", { count: 12 })
      for (const payer of payers) await harness.credited(first, payer.walletId, "ETH_SEPOLIA_ETH")

      const submittedAt = performance.now()
      const ids: Array<string> = []
      for (const [index, payer] of payers.entries()) {
        const submitted = await harness.tenantCall(
          index % 2 === 0 ? first : second,
          "POST",
          "/v1/transactions",
          JSON.stringify({
            assetId: "ETH_SEPOLIA_ETH",
            source: { type: "WALLET", id: payer.walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" } },
            amountRaw: "10000000000000000",
            externalTxId: `two-processes-${index}`
          })
        )
        assert.strictEqual(submitted.status, 202, submitted.text)
        ids.push(submitted.json.transactionId)
      }
      const statuses = await harness.poll("every withdrawal CONFIRMING", async () => {
        const read = await Promise.all(ids.map(async (id) => (await harness.tenantCall(first, "GET", `/v1/transactions/${id}`)).json.status as string))
        return read.every((status) => status === "CONFIRMING") ? read : undefined
      }, withinMillis)
      assert.strictEqual(statuses.length, count)
      assert.isBelow(performance.now() - submittedAt, withinMillis)

      // Both processes hold entities (each signed some), so submissions through one reached the other's entities:
      // through storage, or they would have waited for the sweep. All on one side is 1 in 2,048 for 12 withdrawals.
      const signedBy = [first, second].map((service) =>
        service.output().split("\n").filter((line) => /withdrawal \S+: signed /.test(line)).length
      )
      assert.strictEqual(signedBy[0]! + signedBy[1]!, count, `signed per process: ${signedBy.join(", ")}`)
      assert.isAbove(signedBy[0]!, 0, "the first process signed some")
      assert.isAbove(signedBy[1]!, 0, "the second process signed some")
    }), 180_000)
})
