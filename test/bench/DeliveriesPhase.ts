/**
 * Deliveries: `eventCount` events fanned out to `endpointCount` endpoints on a local receiver (a process of its own,
 * Receiver.ts) by the service's dispatcher and endpoint entities: each delivery claimed, signed, POSTed, recorded
 * and marked DELIVERED; against raw keep-alive node:http POSTs per second from one process (this one) to the same receiver,
 * with as many in flight as the service allows (endpoints × per-endpoint concurrency).
 *
 *   deliveries/raw-post ratio = service deliveries/s ÷ raw POSTs/s
 *
 * One more endpoint, of another tenant (a tenant has at most 10 active endpoints), answers only after 5 s and gets
 * events of its own from the same outbox at the same time: the ratio is measured with it there, and its progress
 * is printed (it must slow no other endpoint).
 *
 * The events are written straight into the outbox (one INSERT, as a burst of committed changes would leave them);
 * the clock runs from that commit to the last fast delivery marked DELIVERED.
 *
 * Then by CPU (issue 34), with the slow endpoint switched off, in alternating slices (CpuSlices.ts):
 *
 *   deliveries cpu/raw = (service + PostgreSQL CPU per delivery) / (this client's CPU per raw POST), the receiver
 *                        excluded on both sides; goal at most 2.5
 *
 * A service slice is a burst of `cpuSliceEvents` events to the fast endpoints, from before its INSERT to its last
 * delivery marked DELIVERED (the INSERT and the completion polls, a few µs per delivery, are counted with it); a raw
 * slice is `rawPosts` for a short window, its CPU divided by every POST it made.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import http from "node:http"
import { createInterface } from "node:readline"
import { outboxChannel } from "../../src/outbox/OutboxSignal.ts"
import { deliveryConcurrencyPerEndpoint } from "../../src/webhooks/DeliverySettings.ts"
import { cpuSeconds, repositoryRoot } from "../e2e/ServiceProcess.ts"
import { clientCpuSeconds, microsPerUnit, type Slice, startServiceCpu, sumSlices } from "./CpuSlices.ts"
import {
  type CpuMeter,
  type Database,
  log,
  microsEach,
  monotonicMicros,
  printStatements,
  rate,
  seconds,
  type SignedFetch,
  startStatements,
  waitUntil
} from "./BenchSupport.ts"

const deliveryTimeoutMs = 600_000
/** A wallet object's size: what a WALLET_CREATED event carries. */
const sampleData = {
  id: "0194f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d0e",
  userId: "0194f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d0f",
  customerRefId: "bench-customer",
  chainFamily: "BTC",
  name: "Default",
  seq: 1,
  isDefault: true,
  status: "ACTIVE",
  address: "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx",
  createdAt: "2026-11-22T10:00:00.000Z"
}

/**
 * The floor: node:http POSTs of a delivery's body and headers from this process over a keep-alive agent, `inFlight`
 * at a time, counted in the window after a warm-up. node:http, not the raw-socket client, because the service
 * needs an HTTP client too: the baseline is what sending alone costs with Node's own.
 */
const rawPosts = (
  port: number,
  body: string,
  inFlight: number,
  options: { readonly warmupMs: number; readonly durationMs: number }
) =>
  new Promise<{ ok: number; failed: number; perSecond: number; total: number }>((resolvePromise) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: inFlight })
    const bytes = Buffer.from(body)
    const headers = {
      "content-type": "application/json",
      "content-length": String(bytes.byteLength),
      "user-agent": "Coffer-Webhooks/1",
      "x-coffer-event-id": "0194f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d10",
      "x-coffer-event-type": "WALLET_CREATED",
      "x-coffer-timestamp": "1800000000",
      "x-coffer-signature": `keyId=v1,sig=${"ab".repeat(64)}`
    }
    const windowStart = performance.now() + options.warmupMs
    const windowEnd = windowStart + options.durationMs
    let ok = 0
    let failed = 0
    let total = 0
    let running = inFlight
    const one = () => {
      if (performance.now() >= windowEnd) {
        if (--running === 0) {
          agent.destroy()
          resolvePromise({ ok, failed, perSecond: ok / (options.durationMs / 1000), total })
        }
        return
      }
      const request = http.request({ host: "127.0.0.1", port, path: "/fast/raw", method: "POST", agent, headers }, (response) => {
        response.on("data", () => undefined)
        response.on("end", () => {
          total++
          const now = performance.now()
          if (now >= windowStart && now < windowEnd) {
            if (response.statusCode === 200) ok++
            else failed++
          }
          one()
        })
      })
      request.on("error", () => {
        failed++
        one()
      })
      request.end(bytes)
    }
    for (let index = 0; index < inFlight; index++) one()
  })

const startReceiver = async () => {
  const child = spawn(process.execPath, ["test/bench/Receiver.ts"], { cwd: repositoryRoot, stdio: ["ignore", "pipe", "inherit"] })
  const lines = createInterface({ input: child.stdout! })
  const port = await new Promise<number>((resolvePromise, reject) => {
    lines.once("line", (line) => resolvePromise(Number(line)))
    child.once("exit", (code) => reject(new Error(`the receiver exited (${code}) before listening`)))
  })
  return { port, pid: child.pid!, stop: () => child.kill("SIGTERM") }
}

/** Events for the slow endpoint: more than it can take during the phase (4 per 5 s). */
const slowEventCount = 200

const deliveredCounts = (db: Database, tenantIds: ReadonlyArray<string>) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ slow: boolean; delivered: number }>`
      SELECT w.url LIKE '%/slow/%' AS slow, count(*)::int AS delivered
      FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
      WHERE d.tenant_id IN (${tenantIds[0]!}, ${tenantIds[1]!}) AND d.status = 'DELIVERED' GROUP BY 1`
    return {
      fast: rows.find((row) => !row.slow)?.delivered ?? 0,
      slow: rows.find((row) => row.slow)?.delivered ?? 0
    }
  }))

/** Alternating slices of the CPU lines: this many of each. */
const cpuRounds = 3
/** Events per service slice (each to every fast endpoint): about two seconds of deliveries. */
const cpuSliceEvents = 400
const rawSliceWarmupMs = 300
const rawSliceMs = 2_000

/**
 * `deliveries cpu/raw`: service slices (a burst to the fast endpoints, service and PostgreSQL CPU until its last
 * delivery is DELIVERED) alternating with raw slices (`rawPosts`, this client's CPU); answers the ratio of their CPU
 * per unit.
 */
const deliveryCpuSlices = async (options: {
  readonly db: Database
  readonly dataDir: string
  readonly servicePid: number
  readonly receiverPort: number
  readonly tenantId: string
  readonly endpointCount: number
  readonly body: string
}) => {
  const { db, tenantId } = options
  const expected = cpuSliceEvents * options.endpointCount
  const serviceSlice = async (round: number): Promise<Slice> => {
    // Only this slice's deliveries are counted: ids above the last one before it (the tenant-status index's range).
    const [last] = await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ id: string }>`SELECT coalesce(max(id), 0)::text AS id FROM webhook_deliveries`
    }))
    const spent = startServiceCpu(options)
    await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
        SELECT uuidv7(), ${tenantId}::uuid, 'WALLET_CREATED', 'cpu-' || ${round} || '-' || n, 'created',
          ${JSON.stringify(sampleData)}::jsonb, now()
        FROM generate_series(1, ${cpuSliceEvents}) AS n ORDER BY n`
      yield* sql`SELECT pg_notify(${outboxChannel}, '')`
    }))
    await waitUntil("deliveries of a CPU slice", async () => {
      const [row] = await db.run(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ delivered: number }>`
          SELECT count(*)::int AS delivered FROM webhook_deliveries
          WHERE tenant_id = ${tenantId} AND status = 'DELIVERED' AND id > ${last!.id}::bigint`
      }))
      return row!.delivered >= expected
    }, deliveryTimeoutMs, 50)
    return { units: expected, cpuSeconds: spent() }
  }
  const rawSlice = async (): Promise<Slice> => {
    const before = clientCpuSeconds()
    const raw = await rawPosts(options.receiverPort, options.body, options.endpointCount * deliveryConcurrencyPerEndpoint, {
      warmupMs: rawSliceWarmupMs,
      durationMs: rawSliceMs
    })
    if (raw.failed > 0) throw new Error(`raw POSTs: ${raw.failed} failed`)
    return { units: raw.total, cpuSeconds: clientCpuSeconds() - before }
  }
  const service: Array<Slice> = []
  const raw: Array<Slice> = []
  for (let round = 0; round < cpuRounds; round++) {
    service.push(await serviceSlice(round))
    raw.push(await rawSlice())
  }
  const [delivered, posted] = [sumSlices(service), sumSlices(raw)]
  log(`  deliveries by CPU, ${cpuRounds} alternating slices: service + PostgreSQL ${microsPerUnit(delivered).toFixed(0)} µs ` +
    `per delivery (${delivered.units}); raw client ${microsPerUnit(posted).toFixed(0)} µs per POST (${posted.units}); ` +
    `per slice ${service.map((slice) => microsPerUnit(slice).toFixed(0)).join("/")} against ` +
    `${raw.map((slice) => microsPerUnit(slice).toFixed(0)).join("/")}`)
  return microsPerUnit(delivered) / microsPerUnit(posted)
}

export const runDeliveriesPhase = async (options: {
  readonly db: Database
  readonly dataDir: string
  readonly servicePid: number
  readonly signedFetch: SignedFetch
  /** The tenant of the slow endpoint. */
  readonly slowSignedFetch: SignedFetch
  readonly slowTenantId: string
  readonly tenantId: string
  readonly eventCount: number
  readonly endpointCount: number
  readonly warmupMs: number
  readonly durationMs: number
  readonly meter: () => CpuMeter
  /** Print the statements of the fan-out (bench.ts `--statements`). */
  readonly statements?: boolean
}) => {
  const { db, tenantId, eventCount, endpointCount } = options
  const receiver = await startReceiver()
  try {
    const base = `http://127.0.0.1:${receiver.port}`
    for (let index = 0; index < endpointCount; index++) {
      await options.signedFetch("POST", "/v1/webhooks", { url: `${base}/fast/${index}` })
    }
    const slow = await options.slowSignedFetch("POST", "/v1/webhooks", { url: `${base}/slow/0` }) as { id: string }
    const tenants = [tenantId, options.slowTenantId] as const
    // Events must be younger than the endpoints' active_since (spec 6, rule 3: no back-fill).
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 1_100))

    if (options.statements === true) await startStatements(db)
    const meter = options.meter()
    meter.start()
    const receiverCpuBefore = cpuSeconds(receiver.pid)
    const windowStart = monotonicMicros()
    const started = performance.now()
    await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
        SELECT uuidv7(), CASE WHEN n <= ${eventCount} THEN ${tenantId}::uuid ELSE ${options.slowTenantId}::uuid END,
          'WALLET_CREATED', 'bench-' || n, 'created', ${JSON.stringify(sampleData)}::jsonb, now()
        FROM generate_series(1, ${eventCount + slowEventCount}) AS n ORDER BY n`
      // A writer without a dispatcher of its own wakes the service's after its commit (src/outbox/OutboxSignal.ts).
      yield* sql`SELECT pg_notify(${outboxChannel}, '')`
    }))
    const expected = eventCount * endpointCount
    await waitUntil("deliveries", async () => (await deliveredCounts(db, tenants)).fast >= expected, deliveryTimeoutMs, 200)
    const serviceMs = performance.now() - started
    const window = [windowStart, monotonicMicros()] as const
    const usage = meter.end("deliveries")
    const receiverCpu = cpuSeconds(receiver.pid) - receiverCpuBefore
    log(usage.line)
    const micros = (cpu: number) => microsEach(cpu, expected)
    log(`  deliveries CPU per delivery: service ${micros(usage.serviceCpuSeconds)}, postgres ${micros(usage.postgresCpuSeconds)}, ` +
      `receiver ${micros(receiverCpu)}`)
    if (options.statements === true) {
      await printStatements(db, "deliveries")
      // Claims take their lease in a heap-only update (sql/0024_delivery_lease_column.sql); the records cannot be.
      const [table] = await db.run(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`SELECT pg_stat_force_next_flush()`
        return yield* sql<{ updates: string; hot: string }>`
          SELECT n_tup_upd::text AS updates, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables
          WHERE relname = 'webhook_deliveries'`
      }))
      log(`  deliveries: webhook_deliveries rows updated ${table?.updates}, of which heap-only ${table?.hot} (since the server started)`)
    }
    const counts = await deliveredCounts(db, tenants)
    const perSecond = expected / (serviceMs / 1000)
    log(`  deliveries: ${expected} (${eventCount} events × ${endpointCount} endpoints) delivered in ${seconds(serviceMs)} ` +
      `(${rate(perSecond)}/s); meanwhile the endpoint answering after 5 s got ${counts.slow} delivered`)
    // Its remaining deliveries would keep going after the phase: the endpoint is switched off.
    await options.slowSignedFetch("PATCH", `/v1/webhooks/${slow.id}`, { active: false })

    const body = JSON.stringify({
      eventId: "0194f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d10",
      type: "WALLET_CREATED",
      tenantId,
      createdAt: sampleData.createdAt,
      data: sampleData
    })
    const clientBefore = process.cpuUsage()
    const receiverBefore = cpuSeconds(receiver.pid)
    const raw = await rawPosts(receiver.port, body, endpointCount * deliveryConcurrencyPerEndpoint, options)
    const client = process.cpuUsage(clientBefore)
    const perPost = (cpu: number) => microsEach(cpu, raw.total)
    log(`  raw POSTs: ${raw.ok} ok in ${seconds(options.durationMs)} (node:http, keep-alive agent, ` +
      `${endpointCount * deliveryConcurrencyPerEndpoint} in flight): ${rate(raw.perSecond)}/s`)
    log(`  raw POSTs CPU per POST (warm-up included): client ${perPost((client.user + client.system) / 1e6)}, ` +
      `receiver ${perPost(cpuSeconds(receiver.pid) - receiverBefore)}`)
    if (raw.failed > 0) throw new Error(`raw POSTs: ${raw.failed} failed`)
    const cpuRatio = await deliveryCpuSlices({
      db,
      dataDir: options.dataDir,
      servicePid: options.servicePid,
      receiverPort: receiver.port,
      tenantId,
      endpointCount,
      body
    })
    return { deliveries: perSecond, raw: raw.perSecond, window, cpuRatio }
  } finally {
    receiver.stop()
  }
}
