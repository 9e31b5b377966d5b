/**
 * What one internal transfer costs the database, counted rather than timed (issue 34, "Money by the batch"): the
 * service runs as a real process with its own embedded PostgreSQL, pg_stat_statements loaded (COFFER_PG_STATEMENTS,
 * src/db/postgres/Postmaster.ts), and takes signed `POST /v1/transactions` internal transfers 32 at a time. Over a
 * measured window after a warm-up:
 *
 *   statements per transfer  the clients' top-level statements (pg_stat_statements, the service's database; the
 *                            statements of constraint triggers deferred to COMMIT, told apart by their `NEW.`, are
 *                            counted on their own and printed)
 *   wal records per transfer the WAL records of those statements (pg_stat_statements' `wal_records`, nested
 *                            statements and triggers included) plus one commit record per commit
 *   commits per transfer     the calls of the writing statements among them, each its own implicit transaction
 *
 * The service's own background work (the simulated chains' watchers poll every second, heartbeats, the outbox
 * dispatcher) is left out: a statement that also runs in a window as long with nothing to do is the background's.
 * The whole server's WAL records (pg_stat_wal) and transaction ids assigned over the window are printed beside them,
 * background included. Sweeps are off (AUTO_SWEEPS=false): none is due here.
 *
 * A change that adds a statement, a row or a commit to the transfer's hot path moves these and fails here. The bounds
 * are the issue's where they hold today and the measured value with a margin where they do not (docs/benchmarks.md,
 * "Money by the batch"); each is printed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import pg from "pg"
import { afterAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { type BenchTenant, provisionTenant } from "../bench/BenchSupport.ts"
import { cleanUpNow, freePort, killHard, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

const network = "ETH_SEPOLIA"
const asset = "ETH_SEPOLIA_ETH"
const confirmationBlocks = 12
const payers = 16
const inFlight = 32
const warmUp = 128
const measured = 960

/**
 * The goals, and the bounds this test holds. Statements: the goal (1.34-1.44 measured on 2026-11-29 after the
 * idempotency record moved into the transfer's statement). Commits and WAL records: the goals are not met (0.27-0.29
 * commits: the signature's nonce is still a group commit of its own before the handler; 41-43 WAL records, whose
 * making is printed below), so the bounds are the measured values with a margin: one more statement per transfer
 * (1.0) or one more group commit per request (about 0.13 statements and commits) fails here (docs/benchmarks.md,
 * "Transfer counts, this stop").
 */
const goals = { statements: 1.5, walRecords: 35, commits: 0.2 }
const bounds = { statements: 1.5, walRecords: 46, commits: 0.34 }

const dataDir = makeDataDir("coffer-counts-")
let current: ServiceProcess | undefined
afterAll(() => cleanUpNow(current, dataDir))

/** A tenant of its own, its key's rate cap far above the load (the development tenant's would answer 429s). */
let tenant: BenchTenant | undefined
const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()

const tenantCall = async (service: ServiceProcess, method: string, target: string, body = "") => {
  const signed = signRequest({ ...tenant!.keys[0]!, target, body, nowSeconds: Math.floor(Date.now() / 1000) })
  const response = await fetch(`${service.publicUrl}${target}`, {
    method,
    headers: { ...(body.length > 0 ? { "content-type": "application/json" } : {}), ...signed },
    ...(method === "GET" ? {} : { body }),
    signal: AbortSignal.timeout(60_000)
  })
  return { status: response.status, text: await response.text() }
}

const opsCall = async (service: ServiceProcess, path: string, body: unknown) => {
  const response = await fetch(`${service.opsUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${opsToken()}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000)
  })
  assert.strictEqual(response.status, 200, `${path}: ${await response.text()}`)
}

describe("what a transfer costs the database (issue 34)", () => {
  it.live(`statements, WAL records and commits per transfer at ${inFlight} in flight`, () =>
    Effect.promise(async () => {
      const [port, opsPort] = [await freePort(), await freePort()]
      const service = spawnService({ dataDir, port, opsPort, env: { COFFER_PG_STATEMENTS: "1", AUTO_SWEEPS: "false" } })
      current = service
      while (!existsSync(join(dataDir, "ops-token"))) {
        if (service.child.exitCode !== null) throw new Error(`the service exited:\n${service.output()}`)
        await sleep(25)
      }
      await waitForHealth(service, opsToken(), 120_000)
      tenant = await provisionTenant(service.opsUrl, opsToken(), "counts", 1, 1000)

      const wallets: Array<string> = []
      for (let index = 0; index < payers; index++) {
        const reply = await tenantCall(service, "POST", `/v1/users/counts-${index}/deposit_address`,
          JSON.stringify({ networkKey: network }))
        assert.strictEqual(reply.status, 200, reply.text)
        const address = JSON.parse(reply.text)
        assert.strictEqual(address.status, "READY", reply.text)
        wallets.push(address.walletId)
        await opsCall(service, `/ops/devnet/${network}/transfers`, {
          to: address.address,
          assetId: asset,
          amountRaw: "1000000000000000000"
        })
      }
      await opsCall(service, `/ops/devnet/${network}/blocks`, { count: confirmationBlocks + 1 })
      const fundedBy = performance.now() + 60_000
      for (const walletId of wallets) {
        while (true) {
          const items = JSON.parse((await tenantCall(service, "GET", `/v1/wallets/${walletId}/assets`)).text)
          if (items.some((item: { assetId: string; available: string }) => item.assetId === asset && item.available !== "0")) break
          assert.isBelow(performance.now(), fundedBy, "a deposit was never credited")
          await sleep(200)
        }
      }

      let sent = 0
      const transfers = async (count: number, prefix: string) => {
        const statuses = new Map<number, number>()
        let next = 0
        await Promise.all(Array.from({ length: inFlight }, async () => {
          while (next < count) {
            const index = next++
            const payer = (sent + index) % payers
            const payee = (payer + 1 + (index % (payers - 1))) % payers
            const reply = await tenantCall(service, "POST", "/v1/transactions", JSON.stringify({
              assetId: asset,
              source: { type: "WALLET", id: wallets[payer] },
              destination: { type: "WALLET", id: wallets[payee] },
              amountRaw: "1000",
              externalTxId: `${prefix}-${index}`
            }))
            statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1)
          }
        }))
        sent += count
        assert.deepStrictEqual([...statuses], [[202, count]], `${prefix}: every transfer accepted`)
      }

      const url: string = JSON.parse(readFileSync(join(dataDir, "pg-conn.json"), "utf8")).url
      const db = new pg.Client({ connectionString: url })
      await db.connect()
      try {
        await db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        // What the WAL records are (printed, not held): by relation and record type over the measured window.
        await db.query("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        await transfers(warmUp, "warm")
        // The cumulative statistics are reported by each backend about once a second.
        const settled = async () => {
          await sleep(1_500)
          await db.query("SELECT pg_stat_clear_snapshot()")
        }
        /**
         * The counters of the statements since the last reset, and the server's WAL records and transaction ids ever,
         * settled first: each backend reports its statistics about once a second.
         */
        const statementRows = async () => {
          await settled()
          return (await db.query(`
            SELECT queryid::text AS id, calls::text AS calls, wal_records::text AS wal, query LIKE '%NEW.%' AS deferred,
              left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS text
            FROM pg_stat_statements
            WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND query NOT LIKE '%pg_stat_%' AND query NOT LIKE '%pg_current_snapshot%'
            ORDER BY calls DESC`)).rows as Array<{ id: string; calls: string; wal: string; deferred: boolean; text: string }>
        }
        const server = async () => {
          const { rows: [row] } = await db.query(
            "SELECT wal_records::text AS wal, pg_snapshot_xmax(pg_current_snapshot())::text AS xid FROM pg_stat_wal")
          return { wal: BigInt(row.wal), xid: BigInt(row.xid) }
        }
        // The background's statements: those that also run in a window as long with nothing to do (the watchers'
        // polls, heartbeats, the outbox dispatcher). Everything else in the measured window is the transfers' own.
        await settled()
        await db.query("SELECT pg_stat_statements_reset()")
        const serverBefore = await server()
        const lsn = async () => (await db.query("SELECT pg_current_wal_insert_lsn()::text AS lsn")).rows[0].lsn as string
        // A slot keeps the window's WAL from being recycled by a checkpoint before it is read.
        await db.query("SELECT pg_create_physical_replication_slot('transfer_counts', true)")
        const walFrom = await lsn()
        const startedAt = performance.now()
        await transfers(measured, "counted")
        const duration = performance.now() - startedAt
        const walTo = await lsn()
        const busy = await statementRows()
        const serverAfter = await server()
        await db.query("SELECT pg_stat_statements_reset()")
        await sleep(duration)
        const background = new Set((await statementRows()).map((row) => row.id))
        const own = busy.filter((row) => !background.has(row.id))
        const sum = (rows: typeof own, value: (row: (typeof own)[number]) => number) =>
          rows.reduce((total, row) => total + value(row), 0)
        const per = (value: number | bigint) => Number(value) / measured
        const clientStatements = own.filter((row) => !row.deferred)
        // Every writing statement of the transfers runs in its own implicit transaction (no BEGIN on their path): its
        // calls are its commits, and each commit writes one more WAL record (the commit record). A writing statement
        // writes at least one record per call; a read may write a few (pruning a page), far fewer than its calls.
        const commits = sum(own.filter((row) => Number(row.wal) >= Number(row.calls)), (row) => Number(row.calls))
        const counts = {
          statements: per(sum(clientStatements, (row) => Number(row.calls))),
          deferred: per(sum(own.filter((row) => row.deferred), (row) => Number(row.calls))),
          walRecords: per(sum(own, (row) => Number(row.wal)) + commits),
          commits: per(commits),
          serverWal: per(serverAfter.wal - serverBefore.wal),
          serverXids: per(serverAfter.xid - serverBefore.xid)
        }
        console.log(`statements per transfer: ${counts.statements.toFixed(2)} (goal ${goals.statements}; and ${counts.deferred.toFixed(2)} ` +
          `of deferred constraint triggers at COMMIT)`)
        console.log(`wal records per transfer: ${counts.walRecords.toFixed(1)} (goal ${goals.walRecords}; the whole server's, background ` +
          `included: ${counts.serverWal.toFixed(1)})`)
        console.log(`commits per transfer: ${counts.commits.toFixed(3)} (goal ${goals.commits}; transaction ids the whole server assigned: ` +
          `${counts.serverXids.toFixed(3)})`)
        console.log("the transfers' statements (calls, WAL records):")
        for (const row of own) console.log(`  ${row.calls.padStart(6)} ${row.wal.padStart(7)}  ${row.text}`)
        // The whole server's records of the window (background included) per relation and record type: a record
        // touching several blocks of one relation counts once; one without blocks (a commit) is under "-".
        const { rows: byRelation } = await db.query(`
          SELECT coalesce(c.relname, b.relfilenode::text) AS relation, b.resource_manager || '/' || b.record_type AS type,
            count(DISTINCT b.start_lsn)::int AS records
          FROM pg_get_wal_block_info($1::pg_lsn, $2::pg_lsn) b
          LEFT JOIN pg_class c ON c.relfilenode = b.relfilenode
          GROUP BY 1, 2 ORDER BY 3 DESC`, [walFrom, walTo])
        const { rows: byType } = await db.query(`
          SELECT "resource_manager/record_type" AS type, count::int AS records
          FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) WHERE count > 0 ORDER BY count DESC`, [walFrom, walTo])
        await db.query("SELECT pg_drop_replication_slot('transfer_counts')")
        console.log("the window's WAL records per transfer, by relation and record type (whole server):")
        for (const row of byRelation.filter((row) => row.records / measured >= 0.05)) {
          console.log(`  ${(row.records / measured).toFixed(2).padStart(6)}  ${row.relation} ${row.type}`)
        }
        console.log("the window's WAL records per transfer, by record type (whole server):")
        for (const row of byType.filter((row) => row.records / measured >= 0.05)) {
          console.log(`  ${(row.records / measured).toFixed(2).padStart(6)}  ${row.type}`)
        }
        assert.isAtMost(counts.statements, bounds.statements, "statements per transfer")
        assert.isAtMost(counts.walRecords, bounds.walRecords, "wal records per transfer")
        assert.isAtMost(counts.commits, bounds.commits, "commits per transfer")
      } finally {
        await db.end()
        await killHard(service)
      }
    }), 600_000)
})
