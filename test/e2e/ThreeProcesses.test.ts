/**
 * Three service processes on one PostgreSQL (the first's embedded server; the others by DATABASE_URL, with the same
 * signer and operator token) form one cluster (src/entities/Cluster.ts), measured from outside as an operator would:
 *
 * 1. `kill -9` of one process under a light load of signed reads: withdrawals submitted through the survivors right
 *    after the kill, some of them to entities on the dead process's shards, all reach CONFIRMING within 10 s of the
 *    kill (the survivors log the shards they took over).
 * 2. `SIGSTOP` of another right after withdrawals were submitted through it (their entities' work partly in its
 *    memory), then `SIGCONT`: the survivors take its shards and finish every withdrawal during the freeze, their
 *    request latency p99 meanwhile (signed reads of a wallet's balances and of the withdrawals' statuses, withdrawals
 *    submitted through them) is under 5 s,
 *    and after it wakes nothing is done twice: one signed version (one nonce, one transaction), one call to the node
 *    with its bytes, and one freeze entry per withdrawal, one credit per deposit. When the p99 misses, the test prints
 *    the slow requests and what the database (sessions, waits, blockers, locks) and the survivors' pools showed while
 *    one was stuck.
 *    What makes a freeze dangerous is its length against the fences: the shard lock (6 s, entities/Cluster.ts) and
 *    the broadcast claim's grace, here 5 s (BROADCAST_CLAIM_GRACE_MS, every process alike; 20 s by default). The
 *    freeze of 25 s outlasts both several times over, as issue 32's 40 s does the defaults, so the frozen process's
 *    shards and claims are taken over while it sleeps and it wakes to find them gone.
 *
 * The killed and the frozen process are DATABASE_URL ones: the first owns the embedded PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import pg from "pg"
import { afterAll } from "vitest"
import { makeCrashHarness } from "./SendingCrashHarness.ts"
import {
  cleanUpNow,
  freePort,
  makeDataDir,
  type ServiceProcess,
  spawnService,
  waitForHealth
} from "./ServiceProcess.ts"

/** The broadcast claim's grace of all three processes (see above): above a local broadcast, under the freeze. */
const claimGraceMillis = 5_000
/**
 * The cluster's shared secret: the runners speak TLS-PSK to each other (src/entities/RunnerTransport.ts), so the
 * takeover and the remote sends below run over the authenticated transport an operator uses across machines.
 */
const runnerSecret = "three-processes-cluster-secret-0123456789"
const harness = await makeCrashHarness("coffer-three-processes-", {
  BROADCAST_CLAIM_GRACE_MS: String(claimGraceMillis),
  RUNNER_SECRET: runnerSecret
})
const otherDataDirs = [makeDataDir("coffer-three-b-"), makeDataDir("coffer-three-c-")]
const others: Array<ServiceProcess> = []
afterAll(async () => {
  for (const [index, dataDir] of otherDataDirs.entries()) {
    const service = others[index]
    if (service?.child.pid !== undefined) {
      try {
        process.kill(service.child.pid, "SIGCONT")
      } catch {
        // Gone already.
      }
    }
    cleanUpNow(service, dataDir)
  }
  await harness.cleanUp()
})

const perPhase = 8
/** Issue 32: the dead process's work resumes on the others within 10 s with the default settings. */
const takeoverWithinMillis = 10_000
/** Past the shard lock's 6 s and the claim's grace several times over (see above). */
const freezeMillis = 25_000
/** After SIGCONT: what the frozen process had in memory runs on (its claims, looked at again, are gone). */
const afterWakeMillis = 2 * claimGraceMillis
const p99LimitMillis = 5_000

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0
}

/** One tenant request of the test: which process, which route, when (ms from the freeze), how long, how it ended. */
interface Sample {
  readonly service: string
  readonly route: string
  readonly startedAt: number
  readonly millis: number
  readonly outcome: string
}

/** The samples by process and route (count, p50, p99, max), and the slow (over 1 s) or failed ones one by one. */
const describeSamples = (samples: ReadonlyArray<Sample>) => {
  const groups = new Map<string, Array<number>>()
  for (const sample of samples) {
    const key = `${sample.service} ${sample.route}`
    groups.set(key, [...(groups.get(key) ?? []), sample.millis])
  }
  const lines = [...groups].map(([key, values]) =>
    `  ${key}: ${values.length} requests, p50 ${Math.round(percentile(values, 0.5))} ms, p99 ${
      Math.round(percentile(values, 0.99))} ms, max ${Math.round(Math.max(...values))} ms`
  )
  const slow = samples.filter((sample) => sample.millis > 1_000 || sample.outcome !== "ok").map((sample) =>
    `  ${sample.outcome === "ok" ? "slow" : "failed"}: ${sample.service} ${sample.route} started ${Math.round(sample.startedAt)} ms from the freeze, ${
      Math.round(sample.millis)} ms, ${sample.outcome}`
  )
  return ["samples by process and route:", ...lines, ...slow].join("\n")
}

/**
 * What survivors' requests could wait on, taken while one is stuck: every session of the database (state, wait,
 * transaction age, blockers, statement), the locks waited for, and each survivor's pool gauges from /metrics.
 */
const freezeDump = async (
  db: pg.Client,
  survivors: ReadonlyArray<readonly [name: string, service: ServiceProcess]>,
  opsToken: string,
  underWay: ReadonlyArray<{ readonly service: string; readonly route: string; readonly startedAt: number }>,
  frozenAt: number,
  now: number
) => {
  const lines = [`dump ${Math.round(now - frozenAt)} ms into the freeze; requests under way:`]
  for (const entry of underWay) lines.push(`  ${entry.service} ${entry.route} for ${Math.round(now - entry.startedAt)} ms`)
  const activity = await db.query(`
    SELECT pid, pg_blocking_pids(pid) AS blocked_by, backend_type, state, wait_event_type, wait_event, client_port,
      round(extract(epoch FROM clock_timestamp() - xact_start) * 1000)::int AS xact_ms,
      round(extract(epoch FROM clock_timestamp() - state_change) * 1000)::int AS state_ms,
      left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query
    FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
    ORDER BY xact_start NULLS LAST, pid`).catch((error) => ({ rows: [{ error: String(error) }] }))
  lines.push("pg_stat_activity:", ...activity.rows.map((row) => `  ${JSON.stringify(row)}`))
  const locks = await db.query(`
    SELECT pid, locktype, mode, relation::regclass::text AS relation, pg_blocking_pids(pid) AS blocked_by
    FROM pg_locks WHERE NOT granted`).catch((error) => ({ rows: [{ error: String(error) }] }))
  lines.push("pg_locks not granted:", ...locks.rows.map((row) => `  ${JSON.stringify(row)}`))
  for (const [name, service] of survivors) {
    const metrics = await fetch(`${service.opsUrl}/metrics`, {
      headers: { authorization: `Bearer ${opsToken}` },
      signal: AbortSignal.timeout(2_000)
    }).then((response) => response.text()).catch((error) => `metrics: ${String(error)}`)
    const pool = metrics.split("\n").filter((line) => line.startsWith("coffer_db_pool_") || line.startsWith("metrics:"))
    lines.push(`pool of ${name}: ${pool.join("; ")}`)
  }
  return lines.join("\n")
}

describe("three processes, one cluster", () => {
  it.live("kill -9 of one: its work resumes on the others within 10 s; SIGSTOP of another past its shard lock and broadcast claims: p99 under 5 s, nothing done twice", () =>
    Effect.promise(async () => {
      const first = await harness.start()
      const url = JSON.parse(readFileSync(join(harness.dataDir, "pg-conn.json"), "utf8")).url as string
      const env = {
        DATABASE_URL: url,
        SIGNER_MNEMONIC: readFileSync(join(harness.dataDir, "signer-mnemonic"), "utf8").trim(),
        OPS_TOKEN: harness.opsToken(),
        BROADCAST_CLAIM_GRACE_MS: String(claimGraceMillis),
        RUNNER_SECRET: runnerSecret
      }
      for (const dataDir of otherDataDirs) {
        others.push(spawnService({ dataDir, port: await freePort(), opsPort: await freePort(), env }))
      }
      await Promise.all(others.map((service) => waitForHealth(service, harness.opsToken(), 90_000)))
      const [second, third] = others as [ServiceProcess, ServiceProcess]
      const db = new pg.Client({ connectionString: url })
      await db.connect()
      try {
        const ops = (path: string, body: unknown) =>
          fetch(`${first.opsUrl}${path}`, {
            method: "POST",
            headers: { authorization: `Bearer ${harness.opsToken()}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          }).then((response) => response.json())

        const payers = await Promise.all(
          Array.from({ length: perPhase * 2 }, (_, index) => harness.depositAddress(first, `three-${index}`, "ETH_SEPOLIA"))
        )
        for (const payer of payers) {
          await ops("/ops/devnet/ETH_SEPOLIA/transfers", { to: payer.address, assetId: "ETH_SEPOLIA_ETH", amountRaw: "50000000000000000" })
        }
        await ops("/ops/devnet/ETH_SEPOLIA/blocks", { count: 12 })
        await Promise.all(payers.map((payer) => harness.credited(first, payer.walletId, "ETH_SEPOLIA_ETH")))

        const submit = async (service: ServiceProcess, index: number, externalTxId = `three-processes-${index}`) => {
          const submitted = await harness.tenantCall(service, "POST", "/v1/transactions", JSON.stringify({
            assetId: "ETH_SEPOLIA_ETH",
            source: { type: "WALLET", id: payers[index]!.walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" } },
            amountRaw: "10000000000000000",
            externalTxId
          }))
          assert.strictEqual(submitted.status, 202, submitted.text)
          return submitted.json.transactionId as string
        }
        const statusOf = async (service: ServiceProcess, id: string) =>
          (await timed(service, "GET /v1/transactions/{id}", () => harness.tenantCall(service, "GET", `/v1/transactions/${id}`)))
            ?.json.status as string | undefined
        const allConfirming = (service: ServiceProcess, ids: ReadonlyArray<string>) => async () => {
          const read = await Promise.all(ids.map((id) => statusOf(service, id)))
          return read.every((status) => status === "CONFIRMING" || status === "COMPLETED") ? read : undefined
        }

        // Every tenant request of the load and of the status reads, timed and named by process and route, with those
        // under way at any instant (the freeze's watchdog below looks at them).
        const names = new Map<ServiceProcess, string>([[first, "first"], [second, "second"], [third, "third"]])
        const samples: Array<Sample> = []
        const underWay = new Set<{ readonly service: string; readonly route: string; readonly startedAt: number }>()
        let clockZero = performance.now()
        const timed = async <A>(service: ServiceProcess, route: string, call: () => Promise<A>): Promise<A | undefined> => {
          const entry = { service: names.get(service) ?? "?", route, startedAt: performance.now() }
          underWay.add(entry)
          let status = "error"
          try {
            const answer = await call()
            status = "ok"
            return answer
          } catch (error) {
            status = error instanceof Error ? `${error.name}: ${error.message.slice(0, 300)}` : String(error)
            return undefined
          } finally {
            underWay.delete(entry)
            samples.push({
              service: entry.service,
              route,
              startedAt: entry.startedAt - clockZero,
              millis: performance.now() - entry.startedAt,
              outcome: status
            })
          }
        }
        const readAssets = (service: ServiceProcess) =>
          timed(service, "GET /v1/wallets/{id}/assets", () => harness.tenantCall(service, "GET", `/v1/wallets/${payers[0]!.walletId}/assets`))

        // A light load of signed reads on the processes that stay up, with each request's latency.
        let loading = true
        const load = Promise.all([first, second].map(async (service) => {
          while (loading) {
            await readAssets(service)
            await sleep(100)
          }
        }))

        // /ops/health lists the three runners, the shards the ring gives each (all of them, once), and the cluster's
        // oldest unprocessed message.
        const clusterOf = async (service: ServiceProcess) => {
          const response = await fetch(`${service.opsUrl}/ops/health`, { headers: { authorization: `Bearer ${harness.opsToken()}` } })
          return (await response.json()).cluster as {
            runners: Array<{ address: string; healthy: boolean; self: boolean; shards: string }>
            heldHere: string
            oldestUnprocessedMessageSeconds: number | null
          }
        }
        const three = await harness.poll("three runners in /ops/health", async () => {
          const cluster = await clusterOf(first)
          return cluster.runners.length === 3 && cluster.runners.every((runner) => runner.shards.length > 0) ? cluster : undefined
        }, 30_000)
        assert.strictEqual(three.runners.filter((runner) => runner.self).length, 1)
        for (const service of [first, second, third]) assert.match(service.output(), /TLS with RUNNER_SECRET/)
        assert.isTrue(three.oldestUnprocessedMessageSeconds === null || three.oldestUnprocessedMessageSeconds >= 0)

        // 1. kill -9 of the third process.
        third.child.kill("SIGKILL")
        await third.exited
        const killedAt = performance.now()
        const killIds: Array<string> = []
        for (let index = 0; index < perPhase; index++) killIds.push(await submit(index % 2 === 0 ? first : second, index))
        const submittedMillis = performance.now() - killedAt
        await harness.poll("the withdrawals after the kill CONFIRMING", allConfirming(first, killIds), 60_000)
        const resumedMillis = performance.now() - killedAt
        const tookOver = [first, second].some((service) => /took over shards/.test(service.output()))
        assert.isTrue(tookOver, "a survivor took over the dead process's shards")
        assert.isBelow(resumedMillis, takeoverWithinMillis, `resumed ${Math.round(resumedMillis)} ms after the kill (the submissions took ${Math.round(submittedMillis)} ms)`)
        const two = await harness.poll("the dead runner gone from /ops/health", async () => {
          const cluster = await clusterOf(first)
          return cluster.runners.length === 2 ? cluster : undefined
        }, 15_000)
        assert.isTrue(two.runners.every((runner) => runner.healthy && runner.shards.length > 0))

        // Back to three: the killed process restarts (its runner port is reused: the same runner).
        const restarted = spawnService({ dataDir: otherDataDirs[1]!, port: await freePort(), opsPort: await freePort(), env })
        others[1] = restarted
        await waitForHealth(restarted, harness.opsToken(), 90_000)
        await sleep(3_000)

        // 2. SIGSTOP of the second process right after withdrawals were submitted through it. The first load ends
        // before, with every process up: its request to the second process, had it been under way at the SIGSTOP,
        // would wait for the client's 30 s abort (the process sleeps), and awaiting it held up the survivors' load
        // below for all of the freeze. That request, counted as a survivor's, was the 30 s p99 of the runs that missed
        // (issue 32), not anything the survivors waited on.
        loading = false
        await load
        const stopIds: Array<string> = []
        for (let index = perPhase; index < perPhase * 2; index++) stopIds.push(await submit(second, index))
        names.set(restarted, "restarted")
        samples.length = 0
        process.kill(second.child.pid!, "SIGSTOP")
        const frozenAt = performance.now()
        clockZero = frozenAt
        loading = true
        // While frozen, a watchdog looks at the survivors' requests under way every second; one older than 3 s has the
        // database and the survivors' pools dumped at that instant (printed only when the p99 misses below).
        const dumps: Array<string> = []
        let watching = true
        const watchdog = (async () => {
          while (watching) {
            await sleep(1_000)
            const now = performance.now()
            const stuck = [...underWay].filter((entry) => entry.service !== "second" && now - entry.startedAt > 3_000)
            if (stuck.length > 0 && dumps.length < 3) {
              dumps.push(await freezeDump(db, [["first", first], ["restarted", restarted]], harness.opsToken(), [...underWay], frozenAt, now))
            }
          }
        })()
        // Two clients per process: the freeze is short enough that one each would leave too few samples for a p99.
        const freezeLoad = Promise.all([first, restarted, first, restarted].map(async (service) => {
          while (loading) {
            await readAssets(service)
            await sleep(100)
          }
        }))
        let freezeIds: Array<string> = []
        try {
          // Withdrawals submitted through the survivors during the freeze, a second one from each of the first phase's
          // payers: some of their entities are on the frozen process's shards until the survivors take them.
          const submittedDuringFreeze = await Promise.all(
            [first, restarted, first, restarted].map((service, index) =>
              timed(service, "POST /v1/transactions", () => submit(service, index, `three-processes-frozen-${index}`)))
          )
          freezeIds = submittedDuringFreeze.filter((id): id is string => id !== undefined)
          assert.strictEqual(freezeIds.length, submittedDuringFreeze.length,
            `the survivors accepted every withdrawal during the freeze\n${describeSamples(samples)}`)
          await harness.poll(
            "the frozen process's withdrawals and those submitted during the freeze CONFIRMING through the others",
            allConfirming(first, [...stopIds, ...freezeIds]),
            freezeMillis - 2_000
          )
          await sleep(Math.max(0, freezeMillis - (performance.now() - frozenAt)))
        } finally {
          loading = false
          watching = false
          await Promise.all([freezeLoad, watchdog])
        }
        // Every request of the freeze went to a survivor: the load, the submissions and the status reads.
        const survivors = samples.filter((sample) => sample.service !== "second")
        const p99 = percentile(survivors.map((sample) => sample.millis), 0.99)
        process.kill(second.child.pid!, "SIGCONT")
        console.log(`survivors' p99 ${Math.round(p99)} ms over ${survivors.length} requests during the freeze`)
        // On a miss, what the slow requests were (process, route, when) and what the database and the survivors' pools
        // showed while one was stuck, so that a failing CI run names the cause.
        const diagnosis = () => `${describeSamples(samples)}\n${dumps.length > 0 ? dumps.join("\n") : "no request stuck over 3 s"}`
        if (survivors.length <= 50 || p99 >= p99LimitMillis) console.log(diagnosis())
        assert.isAbove(survivors.length, 50, "enough requests during the freeze for a p99")
        assert.isBelow(p99, p99LimitMillis, "the survivors' p99 during the freeze (issue 32)")

        // Awake again: whatever it had in memory runs on, and must find everything done.
        await sleep(afterWakeMillis)
        const ids = [...killIds, ...stopIds, ...freezeIds]
        const versions = await db.query(
          `SELECT s.owner_id::text AS id, count(v.*)::int AS versions
           FROM outgoing_sends s JOIN outgoing_versions v ON v.send_id = s.id
           WHERE s.owner_id::text = ANY($1) GROUP BY s.owner_id`,
          [ids]
        )
        assert.strictEqual(versions.rows.length, ids.length, "one send per withdrawal")
        for (const row of versions.rows) assert.strictEqual(row.versions, 1, `versions of ${row.id}`)
        const broadcasts = await db.query(
          `SELECT s.owner_id::text AS id, v.tx_hash, b.broadcasts, v.broadcast_claims
           FROM outgoing_sends s JOIN outgoing_versions v ON v.send_id = s.id
           JOIN devnet_broadcasts b ON b.tx_hash = v.tx_hash WHERE s.owner_id::text = ANY($1)`,
          [ids]
        )
        assert.strictEqual(broadcasts.rows.length, ids.length, "each withdrawal's transaction reached the node")
        // One call to the node per transaction: every broadcast is claimed in the database (sql/0030), and the claim is
        // looked at again right before the bytes leave, so a process that claimed, froze and woke after another took
        // the version over sends nothing (src/sending/OutgoingSends.ts; test/sending/BroadcastClaims.test.ts).
        // On a miss: which phase the withdrawal was of, its claims, and what the processes logged about it.
        const phaseOf = (id: string) =>
          killIds.includes(id) ? "after the kill" : stopIds.includes(id) ? "through the frozen process" : "during the freeze"
        const logged = (id: string, txHash: string) =>
          [["first", first], ["second", second], ["restarted", restarted]].flatMap(([name, service]) =>
            (service as ServiceProcess).output().split("\n").filter((line) => line.includes(id) || line.includes(txHash))
              .map((line) => `  ${name as string}: ${line.slice(0, 400)}`))
        for (const row of broadcasts.rows) {
          assert.strictEqual(row.broadcasts, 1, `broadcasts of ${row.tx_hash}, withdrawal ${row.id} ${phaseOf(row.id)}, ${
            row.broadcast_claims} claims\n${logged(row.id, row.tx_hash).join("\n")}`)
        }
        const freezes = await db.query(
          `SELECT reference_id::text AS id, count(*)::int AS n FROM ledger_entries
           WHERE kind = 'WITHDRAWAL_FREEZE' AND reference_id::text = ANY($1) GROUP BY reference_id`,
          [ids]
        )
        assert.strictEqual(freezes.rows.length, ids.length)
        for (const row of freezes.rows) assert.strictEqual(row.n, 1)
        const credits = await db.query(`SELECT count(*)::int AS n FROM ledger_entries WHERE kind = 'DEPOSIT_CREDIT'`)
        assert.strictEqual(credits.rows[0].n, payers.length, "one credit per deposit")
        const finalStatuses = await Promise.all(ids.map((id) => statusOf(first, id)))
        for (const status of finalStatuses) assert.oneOf(status, ["CONFIRMING", "COMPLETED"])
      } finally {
        await db.end()
      }
    }), 400_000)
})
