/**
 * What the benchmark phases share: a tenant with API keys made through the operator interface, signed calls for
 * setting up (fetch, a bounded number in flight), request bytes for the raw-socket load client, and a connection pool
 * of our own on the service's embedded PostgreSQL (its URL is in `<DATA_DIR>/pg-conn.json`) for arranging data in
 * bulk, observing progress, and the raw baselines the service is compared against.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { FetchHttpClient } from "effect/http"
import { SqlClient } from "effect/sql"
import { generateKeyPairSync, type KeyObject, randomUUID } from "node:crypto"
import { readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { rawPublicKeyHex } from "../../src/auth/Ed25519.ts"
import { makeOpsClient } from "../../src/client/OpsClient.ts"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { cpuSeconds, postgresPids } from "../e2e/ServiceProcess.ts"

export const log = (line: string) => process.stderr.write(`${line}\n`)
export const rate = (perSecond: number) => Math.round(perSecond).toLocaleString("en-US")
export const seconds = (millis: number) => `${(millis / 1000).toFixed(2)} s`

export interface BenchKey {
  readonly keyId: string
  readonly privateKey: KeyObject
}

export interface BenchTenant {
  readonly tenantId: string
  readonly keys: ReadonlyArray<BenchKey>
}

/** One tenant with `keyCount` keys at `rateLimitPerSecond` each, made through the operator interface. */
export const provisionTenant = (
  opsUrl: string,
  token: string,
  name: string,
  keyCount: number,
  rateLimitPerSecond: number
): Promise<BenchTenant> =>
  Effect.gen(function*() {
    const ops = yield* makeOpsClient({ baseUrl: opsUrl, token: Redacted.make(token) })
    const tenant = yield* ops.tenants.create({ payload: { name } })
    const keys: Array<BenchKey> = []
    for (let index = 0; index < keyCount; index++) {
      const { privateKey, publicKey } = generateKeyPairSync("ed25519")
      const key = yield* ops.tenants.createApiKey({
        params: { tenantId: tenant.id },
        payload: { name: `${name} ${index}`, publicKey: rawPublicKeyHex(publicKey), rateLimitPerSecond }
      })
      keys.push({ keyId: key.keyId, privateKey })
    }
    return { tenantId: tenant.id, keys }
  }).pipe(Effect.provide(FetchHttpClient.layer), Effect.runPromise)

/** `--perf-map`: the service's node writes a map of its compiled JavaScript functions for Linux `perf`. */
export const perfMapArgs: ReadonlyArray<string> = ["--perf-basic-prof-only-functions"]

/** Runs `task` over `items` with at most `limit` in flight; results in input order. */
export const mapLimit = async <A, B>(
  items: ReadonlyArray<A>,
  limit: number,
  task: (item: A, index: number) => Promise<B>
): Promise<Array<B>> => {
  const results = new Array<B>(items.length)
  let next = 0
  const worker = async () => {
    for (let index = next++; index < items.length; index = next++) results[index] = await task(items[index]!, index)
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

/** Signed tenant calls for arranging a phase (not measured); keys are used in turn to stay under their caps. */
export const makeSignedFetch = (baseUrl: string, tenant: BenchTenant) => {
  let turn = 0
  return async (method: "GET" | "POST" | "PATCH", target: string, body?: unknown, extraHeaders: Record<string, string> = {}) => {
    const key = tenant.keys[turn++ % tenant.keys.length]!
    const bytes = body === undefined ? "" : JSON.stringify(body)
    const headers = signRequest({
      keyId: key.keyId,
      privateKey: key.privateKey,
      target,
      body: bytes,
      nowSeconds: Math.floor(Date.now() / 1000)
    })
    const response = await fetch(`${baseUrl}${target}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }), ...extraHeaders },
      ...(body === undefined ? {} : { body: bytes })
    })
    const text = await response.text()
    if (response.status >= 300) throw new Error(`${method} ${target} answered ${response.status}: ${text}`)
    return text === "" ? undefined : JSON.parse(text)
  }
}

export type SignedFetch = ReturnType<typeof makeSignedFetch>

/** A complete HTTP/1.1 request as bytes, for the raw-socket load client. */
export const requestBytes = (
  hostHeader: string,
  method: "GET" | "POST",
  target: string,
  headers: Record<string, string> = {},
  body = ""
) =>
  Buffer.from(
    `${method} ${target} HTTP/1.1\r\nHost: ${hostHeader}\r\n` +
      Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("") +
      (method === "POST" ? `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` : "") +
      `\r\n${body}`,
    "latin1"
  )

/** A signed POST with a JSON body, as bytes. */
export const signedPostBytes = (
  hostHeader: string,
  key: BenchKey,
  target: string,
  body: unknown,
  nowSeconds: number,
  nonce: string,
  extraHeaders: Record<string, string> = {}
) => {
  const text = JSON.stringify(body)
  const headers = signRequest({ keyId: key.keyId, privateKey: key.privateKey, target, body: text, nowSeconds, nonce })
  return requestBytes(hostHeader, "POST", target, { ...headers, ...extraHeaders }, text)
}

export const uniqueKey = () => randomUUID()

/** The service's database URL, as the embedded PostgreSQL left it in DATA_DIR for tools. */
export const databaseUrl = (dataDir: string): string =>
  JSON.parse(readFileSync(join(dataDir, "pg-conn.json"), "utf8")).url

/**
 * A pool of our own on the service's database. `maxConnections` defaults to the service's own pool size
 * (src/db/Database.ts), so a raw baseline gets the same number of connections as the service.
 */
const benchApplicationName = "coffer-bench"

export const makeDatabase = (dataDir: string, maxConnections = 10) => {
  const runtime = ManagedRuntime.make(
    // Named, so the activity sampler leaves the bench's own connections out.
    PgClient.layer({ url: Redacted.make(databaseUrl(dataDir)), maxConnections, applicationName: benchApplicationName })
      .pipe(Layer.orDie)
  )
  return {
    run: <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>): Promise<A> => runtime.runPromise(effect),
    dispose: () => runtime.dispose()
  }
}

export type Database = ReturnType<typeof makeDatabase>

/** Polls `probe` until it answers true; resolves with the milliseconds it took, or throws after `timeoutMs`. */
export const waitUntil = async (
  what: string,
  probe: () => Promise<boolean>,
  timeoutMs: number,
  intervalMs = 50
): Promise<number> => {
  const started = performance.now()
  for (;;) {
    if (await probe()) return performance.now() - started
    if (performance.now() - started > timeoutMs) throw new Error(`${what}: not done within ${timeoutMs / 1000} s`)
    await new Promise((resolvePromise) => setTimeout(resolvePromise, intervalMs))
  }
}

/** CPU use of the service, its PostgreSQL and this process between `start` and `end` (bench.ts makes them). */
export interface CpuMeter {
  readonly start: () => void
  /** The line to print, and the service's CPU seconds since `start`. */
  readonly end: (name: string) => {
    readonly serviceCpuSeconds: number
    readonly postgresCpuSeconds: number
    readonly line: string
  }
}

/** CPU seconds spread over `count` units of work, as `N µs` (the bench's per-delivery and per-transfer lines). */
export const microsEach = (cpuSeconds: number, count: number) => `${Math.round((cpuSeconds * 1e6) / Math.max(1, count))} µs`

/** Now on the system's monotonic clock in microseconds: the clock of `--cpu-prof` timestamps. */
export const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n)

/**
 * `--statements`: the service's PostgreSQL runs with pg_stat_statements loaded (COFFER_PG_STATEMENTS, Postmaster.ts),
 * and a phase prints the statements that took the most time, with their calls, while it ran: where the database's
 * share of a figure goes. `startStatements` clears the counters, `printStatements` prints the top ones.
 */
export const startStatements = (db: Database) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`
    yield* sql`SELECT pg_stat_statements_reset()`
    // The WAL flushes of the load too (`printStatements`): the commit's WAL flush is serial.
    yield* sql`SELECT pg_stat_reset_shared('wal')`
    yield* sql`SELECT pg_stat_reset_shared('io')`
  }))

export const printStatements = async (db: Database, phase: string, top = 45) => {
  const rows = await db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ calls: string; ms: string; mean: string; plans: string; plan: string; text: string }>`
      SELECT calls::text AS calls, round(total_exec_time)::text AS ms,
        round(mean_exec_time::numeric, 3)::text AS mean, plans::text AS plans,
        round(mean_plan_time::numeric, 3)::text AS plan, left(regexp_replace(query, '\\s+', ' ', 'g'), 150) AS text
      FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_stat_activity%'
      ORDER BY total_exec_time + total_plan_time DESC LIMIT ${top}`
  }))
  const [sum] = await db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Top level are the clients' statements and also the statements of constraint triggers deferred to COMMIT
    // (the ledger's checks, sql/0003): those are told apart by their trigger's `NEW.` and counted on their own.
    return yield* sql<{ calls: string; deferred: string }>`
      SELECT coalesce(sum(calls) FILTER (WHERE query NOT LIKE '%NEW.%'), 0)::text AS calls,
        coalesce(sum(calls) FILTER (WHERE query LIKE '%NEW.%'), 0)::text AS deferred
      FROM pg_stat_statements
      WHERE toplevel AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_stat_activity%'`
  }))
  log(`  ${phase}: ${sum!.calls} statements from clients, each a round trip (and ${sum!.deferred} of deferred ` +
    `constraint triggers at COMMIT)`)
  const [wal] = await db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Counted by the cumulative statistics, which backends report about once a second: approximate.
    // PostgreSQL 18 counts WAL fsyncs in pg_stat_io (pg_stat_wal lost its wal_sync column).
    return yield* sql<{ syncs: string; mb: string; records: string; fpi: string; checkpoints: string }>`
      SELECT (SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal')::text AS syncs,
        round(wal_bytes / 1048576.0, 1)::text AS mb, wal_records::text AS records, wal_fpi::text AS fpi,
        (SELECT num_timed + num_requested FROM pg_stat_checkpointer)::text AS checkpoints
      FROM pg_stat_wal`
  }))
  log(`  ${phase}: about ${wal!.syncs} WAL flushes (fsync) of ${wal!.mb} MB of WAL (${wal!.records} records, ` +
    `${wal!.fpi} full-page images), ${wal!.checkpoints} checkpoints since the server started`)
  log(`  ${phase}: statements by total time (pg_stat_statements; calls, total ms, mean ms, plans, mean plan ms, statement)`)
  for (const row of rows) {
    log(`    ${row.calls.padStart(7)} ${row.ms.padStart(6)} ${row.mean.padStart(8)} ${row.plans.padStart(6)} ${row.plan.padStart(7)}  ${row.text}`)
  }
}

/**
 * `--explain`: the service's PostgreSQL logs every statement's plan with the triggers and foreign-key checks it fired
 * (auto_explain, COFFER_PG_EXPLAIN in src/db/postgres/Postmaster.ts) to `path`. `explainMark` is where a load starts in
 * that file; `printTriggerCounts` counts, from there, how many times each trigger and foreign-key check ran, per
 * statement whose text holds `unit` (the load's own statement: one per request), nested statements included.
 */
export const explainMark = (path: string): number => {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

export const printTriggerCounts = (path: string, from: number, phase: string, unit: string) => {
  const text = readFileSync(path).subarray(from).toString("utf8")
  const units = text.split(unit).length - 1
  const counts = new Map<string, number>()
  for (const match of text.matchAll(/^\s*Trigger (for constraint )?([A-Za-z0-9_]+)( on [A-Za-z0-9_]+)?: calls=(\d+)/gm)) {
    const name = `${match[1] === undefined ? "trigger" : "foreign key"} ${match[2]}`
    counts.set(name, (counts.get(name) ?? 0) + Number(match[4]))
  }
  log(`  ${phase}: triggers and foreign-key checks per request (auto_explain, ${units} requests; calls per request, name)`)
  for (const [name, calls] of [...counts].sort((a, b) => b[1] - a[1])) {
    log(`    ${(units === 0 ? 0 : calls / units).toFixed(2).padStart(7)}  ${name}`)
  }
}

/**
 * Samples what the service's database connections are doing during a load (`--statements`): every few ms one row of
 * `pg_stat_activity` per connection other than the bench's own, as state and wait event. `stop` prints the average
 * number of connections in each, busiest first: idle connections mean the database waits for the service; a lock or
 * WAL wait names what the statements queue on. This is how the outbox's NOTIFY lock was found (src/outbox/OutboxSignal.ts).
 */
export const sampleActivity = (db: Database, phase: string) => {
  const samples: Array<ReadonlyArray<string>> = []
  let sampling = true
  const loop = (async () => {
    while (sampling) {
      const rows = await db.run(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ activity: string }>`
          SELECT coalesce(state, '-') || coalesce(' ' || wait_event_type || ':' || wait_event, '') AS activity
          FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND application_name <> ${benchApplicationName}`
      }))
      samples.push(rows.map((row) => row.activity))
      await new Promise((resolvePromise) => setTimeout(resolvePromise, 3))
    }
  })()
  return {
    stop: async () => {
      sampling = false
      await loop
      const counts = new Map<string, number>()
      for (const sample of samples) for (const activity of sample) counts.set(activity, (counts.get(activity) ?? 0) + 1)
      const average = [...counts].sort((a, b) => b[1] - a[1]).map(([activity, count]) =>
        `${activity} ${(count / Math.max(1, samples.length)).toFixed(2)}`
      )
      log(`  ${phase}: connections by activity (pg_stat_activity, average of ${samples.length} samples): ${average.join(", ")}`)
    }
  }
}

/**
 * CPU time each process of a load spends in a window, per unit of work: the service, its PostgreSQL (the postmaster
 * and the backends alive at the start, as bench.ts's CpuMeter samples them), a chain node, this bench. It says which
 * process binds a load, which the ratio alone does not; `stop` prints ms per unit (accurate to about 10 ms in all).
 */
export const measureCpu = (processes: { readonly service: number; readonly dataDir: string; readonly node?: number | undefined }) => {
  const postgres = postgresPids(processes.dataDir)
  const take = () => ({
    service: cpuSeconds(processes.service),
    postgres: postgres.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
    node: processes.node === undefined ? 0 : cpuSeconds(processes.node),
    bench: (process.cpuUsage().user + process.cpuUsage().system) / 1e6
  })
  const before = take()
  return {
    /** Prints the CPU per unit of each process and answers it in milliseconds. */
    stop: (phase: string, units: number, unit: string) => {
      const after = take()
      const millis = (seconds: number) => (seconds * 1000) / units
      const each = {
        service: millis(after.service - before.service),
        postgres: millis(after.postgres - before.postgres),
        node: millis(after.node - before.node),
        bench: millis(after.bench - before.bench)
      }
      log(`  ${phase}: CPU per ${unit} (ms): service ${each.service.toFixed(2)}, PostgreSQL ` +
        `${each.postgres.toFixed(2)}` +
        (processes.node === undefined ? "" : `, node ${each.node.toFixed(2)}`) +
        `, bench ${each.bench.toFixed(2)}`)
      return each
    }
  }
}
