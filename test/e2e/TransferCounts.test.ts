/**
 * What one internal transfer costs the database, counted rather than timed (issue 34, "Money by the batch"): the
 * service runs as a real process with its own embedded PostgreSQL, pg_stat_statements loaded (COFFER_PG_STATEMENTS,
 * src/db/postgres/Postmaster.ts), and takes signed `POST /v1/transactions` internal transfers 32 at a time. Over a
 * measured window after a warm-up:
 *
 *   statements per transfer  the clients' top-level statements (pg_stat_statements, the service's database; the
 *                            statements of constraint triggers deferred to COMMIT, told apart by their `NEW.`, are
 *                            counted on their own and printed)
 *   wal records per transfer pg_stat_wal's records (the whole server: the service is its only client)
 *   commits per transfer     transaction ids assigned (pg_current_snapshot's xmax moved): every transaction that
 *                            wrote, i.e. every commit that flushes WAL; read-only statements take none
 *
 * A change that adds a statement, a row or a commit to the transfer's hot path moves these and fails here. The bounds
 * are the issue's where they hold today and the measured value with a margin where they do not (docs/benchmarks.md,
 * "Money by the batch"); each is printed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createPrivateKey } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import pg from "pg"
import { afterAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { cleanUpNow, freePort, killHard, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

const network = "ETH_SEPOLIA"
const asset = "ETH_SEPOLIA_ETH"
const confirmationBlocks = 12
const payers = 16
const inFlight = 32
const warmUp = 128
const measured = 960

/** The bounds this test holds (see the module comment). */
export const transferCountBounds = { statements: 1.5, walRecords: 35, commits: 0.2 }

const dataDir = makeDataDir("coffer-counts-")
let current: ServiceProcess | undefined
afterAll(() => cleanUpNow(current, dataDir))

const devKey = () => ({
  keyId: JSON.parse(readFileSync(join(dataDir, "dev-tenant.json"), "utf8")).keyId as string,
  privateKey: createPrivateKey(readFileSync(join(dataDir, "dev-api-key.pem")))
})
const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()

const tenantCall = async (service: ServiceProcess, method: string, target: string, body = "") => {
  const signed = signRequest({ ...devKey(), target, body, nowSeconds: Math.floor(Date.now() / 1000) })
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
      const service = spawnService({ dataDir, port, opsPort, env: { COFFER_PG_STATEMENTS: "1" } })
      current = service
      while (!existsSync(join(dataDir, "ops-token"))) {
        if (service.child.exitCode !== null) throw new Error(`the service exited:\n${service.output()}`)
        await sleep(25)
      }
      await waitForHealth(service, opsToken(), 120_000)

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
        await transfers(warmUp, "warm")
        // The cumulative statistics are reported by each backend about once a second.
        const settled = async () => {
          await sleep(1_500)
          await db.query("SELECT pg_stat_clear_snapshot()")
        }
        await settled()
        await db.query("SELECT pg_stat_statements_reset()")
        const before = (await db.query(
          "SELECT wal_records::text AS wal, pg_snapshot_xmax(pg_current_snapshot())::text AS xid FROM pg_stat_wal"
        )).rows[0]
        await transfers(measured, "counted")
        await settled()
        const after = (await db.query(
          "SELECT wal_records::text AS wal, pg_snapshot_xmax(pg_current_snapshot())::text AS xid FROM pg_stat_wal"
        )).rows[0]
        const statements = (await db.query(`
          SELECT coalesce(sum(calls) FILTER (WHERE query NOT LIKE '%NEW.%'), 0)::text AS calls,
            coalesce(sum(calls) FILTER (WHERE query LIKE '%NEW.%'), 0)::text AS deferred
          FROM pg_stat_statements
          WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND query NOT LIKE '%pg_stat_%' AND query NOT LIKE '%pg_current_snapshot%'`)).rows[0]
        const top = (await db.query(`
          SELECT calls::text AS calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS text
          FROM pg_stat_statements
          WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND query NOT LIKE '%pg_stat_%' AND query NOT LIKE '%pg_current_snapshot%'
          ORDER BY calls DESC LIMIT 12`)).rows
        const per = (value: string | number | bigint) => Number(value) / measured
        const counts = {
          statements: per(statements.calls),
          deferred: per(statements.deferred),
          walRecords: per(BigInt(after.wal) - BigInt(before.wal)),
          commits: per(BigInt(after.xid) - BigInt(before.xid))
        }
        console.log(`statements per transfer: ${counts.statements.toFixed(2)} (and ${counts.deferred.toFixed(2)} ` +
          `of deferred constraint triggers at COMMIT)`)
        console.log(`wal records per transfer: ${counts.walRecords.toFixed(1)}`)
        console.log(`commits per transfer: ${counts.commits.toFixed(3)}`)
        for (const row of top) console.log(`  ${row.calls.padStart(6)}  ${row.text}`)
        assert.isAtMost(counts.statements, transferCountBounds.statements, "statements per transfer")
        assert.isAtMost(counts.walRecords, transferCountBounds.walRecords, "wal records per transfer")
        assert.isAtMost(counts.commits, transferCountBounds.commits, "commits per transfer")
      } finally {
        await db.end()
        await killHard(service)
      }
    }), 600_000)
})
