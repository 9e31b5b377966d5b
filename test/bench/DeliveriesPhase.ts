/**
 * Deliveries: `eventCount` events fanned out to `endpointCount` endpoints on a local receiver (a process of its own,
 * Receiver.ts) by the service's dispatcher and endpoint entities: each delivery claimed, signed, POSTed, recorded
 * and marked DELIVERED; against raw keep-alive POSTs per second from one process (this one) to the same receiver,
 * with as many in flight as the service allows (endpoints × per-endpoint concurrency).
 *
 *   deliveries/raw-post ratio = service deliveries/s ÷ raw POSTs/s
 *
 * One more endpoint of the same tenant answers only after 5 s and gets every event too: the ratio is measured with
 * it there, and its own progress is printed (it must slow no other endpoint).
 *
 * The events are written straight into the outbox (one INSERT, as a burst of committed changes would leave them);
 * the clock runs from that commit to the last fast delivery marked DELIVERED.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { deliveryConcurrencyPerEndpoint } from "../../src/webhooks/DeliverySettings.ts"
import { repositoryRoot } from "../e2e/ServiceProcess.ts"
import { type CpuMeter, type Database, log, monotonicMicros, rate, requestBytes, seconds, type SignedFetch, waitUntil } from "./BenchSupport.ts"
import { type LoadResult, runLoad } from "./HttpLoad.ts"

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

const startReceiver = async () => {
  const child = spawn(process.execPath, ["test/bench/Receiver.ts"], { cwd: repositoryRoot, stdio: ["ignore", "pipe", "inherit"] })
  const lines = createInterface({ input: child.stdout! })
  const port = await new Promise<number>((resolvePromise, reject) => {
    lines.once("line", (line) => resolvePromise(Number(line)))
    child.once("exit", (code) => reject(new Error(`the receiver exited (${code}) before listening`)))
  })
  return { port, stop: () => child.kill("SIGTERM") }
}

const deliveredCounts = (db: Database, tenantId: string) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ slow: boolean; delivered: number }>`
      SELECT w.url LIKE '%/slow/%' AS slow, count(*)::int AS delivered
      FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
      WHERE d.tenant_id = ${tenantId} AND d.status = 'DELIVERED' GROUP BY 1`
    return {
      fast: rows.find((row) => !row.slow)?.delivered ?? 0,
      slow: rows.find((row) => row.slow)?.delivered ?? 0
    }
  }))

export const runDeliveriesPhase = async (options: {
  readonly db: Database
  readonly signedFetch: SignedFetch
  readonly tenantId: string
  readonly eventCount: number
  readonly endpointCount: number
  readonly warmupMs: number
  readonly durationMs: number
  readonly describe: (name: string, result: LoadResult) => void
  readonly meter: () => CpuMeter
}) => {
  const { db, tenantId, eventCount, endpointCount } = options
  const receiver = await startReceiver()
  try {
    const base = `http://127.0.0.1:${receiver.port}`
    for (let index = 0; index < endpointCount; index++) {
      await options.signedFetch("POST", "/v1/webhooks", { url: `${base}/fast/${index}` })
    }
    const slow = await options.signedFetch("POST", "/v1/webhooks", { url: `${base}/slow/0` }) as { id: string }
    // Events must be younger than the endpoints' active_since (spec 6, rule 3: no back-fill).
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 1_100))

    const meter = options.meter()
    meter.start()
    const windowStart = monotonicMicros()
    const started = performance.now()
    await db.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
        SELECT uuidv7(), ${tenantId}, 'WALLET_CREATED', 'bench-' || n, 'created', ${JSON.stringify(sampleData)}::jsonb, now()
        FROM generate_series(1, ${eventCount}) AS n`
    }))
    const expected = eventCount * endpointCount
    await waitUntil("deliveries", async () => (await deliveredCounts(db, tenantId)).fast >= expected, deliveryTimeoutMs, 200)
    const serviceMs = performance.now() - started
    const window = [windowStart, monotonicMicros()] as const
    log(meter.end("deliveries").line)
    const counts = await deliveredCounts(db, tenantId)
    const perSecond = expected / (serviceMs / 1000)
    log(`  deliveries: ${expected} (${eventCount} events × ${endpointCount} endpoints) delivered in ${seconds(serviceMs)} ` +
      `(${rate(perSecond)}/s); meanwhile the endpoint answering after 5 s got ${counts.slow} delivered`)
    // Its remaining deliveries would keep going after the phase: the endpoint is switched off.
    await options.signedFetch("PATCH", `/v1/webhooks/${slow.id}`, { active: false })

    const body = JSON.stringify({
      eventId: "0194f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d10",
      type: "WALLET_CREATED",
      tenantId,
      createdAt: sampleData.createdAt,
      data: sampleData
    })
    const request = requestBytes(`127.0.0.1:${receiver.port}`, "POST", "/fast/raw", {
      "user-agent": "Coffer-Webhooks/1",
      "x-coffer-event-id": "0194f3c2-7b1e-7c3a-9d4e-5f6a7b8c9d10",
      "x-coffer-event-type": "WALLET_CREATED",
      "x-coffer-timestamp": "1800000000",
      "x-coffer-signature": `keyId=v1,sig=${"ab".repeat(64)}`
    }, body)
    const raw = await runLoad({
      host: "127.0.0.1",
      port: receiver.port,
      connections: endpointCount * deliveryConcurrencyPerEndpoint,
      warmupMs: options.warmupMs,
      durationMs: options.durationMs,
      nextRequest: () => request
    })
    options.describe("raw POSTs", raw)
    return { deliveries: perSecond, raw: raw.requestsPerSecond, window }
  } finally {
    receiver.stop()
  }
}
