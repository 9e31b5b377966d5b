/**
 * Deposit addresses for a burst of new users (issue 39): a tenant onboards `count` users (POST /v1/users), then asks
 * `POST /v1/users/{customerRefId}/deposit_address` for each, `inFlight` at a time, through signed /v1 calls only: one
 * new wallet (and its provisioning) per call. Each block of `blockSize` calls, in the order they were sent, gets its
 * p50 and p99; the line is the worst block's p99, so a stall that hits one stretch of the run (issue 39: 18.3 s
 * between the 10,000th and the 12,000th address, p50 210 ms) is not averaged away.
 *
 *   deposit_address p99 ms (20k) = the largest p99 over the blocks of 2,000 in a run of 20,000 at 32 in flight
 *
 * Then the service's resident memory (VmRSS) and its live heap: the V8 heap in use after a full collection, asked
 * through the inspector (the service runs with `--inspect` on a loopback port of its own for this). Its own service
 * process (own DATA_DIR), so neither figure carries another phase's work.
 *
 * The stored `Provision` messages are counted too: each is a wallet whose in-memory request the cluster refused
 * (entities/LocalFirstSend.ts), with the longest time from its row to its reply; both were what issue 39's stall
 * left behind. Diagnostics on request: `COFFER_SLOW_SPANS_MS=<n>` (the service's slow spans, grouped) and
 * `COFFER_BENCH_TRACE_GC=1` (the service runs with `--trace-gc`; its longest pauses are printed).
 */
import { readFileSync } from "node:fs"
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import {
  cleanUpNow,
  freePort,
  makeDataDir,
  type ServiceProcess,
  spawnService,
  stopService,
  waitForHealth
} from "../e2e/ServiceProcess.ts"
import { log, makeDatabase, makeSignedFetch, mapLimit, measureCpu, provisionTenant, rate, seconds } from "./BenchSupport.ts"

/** A BTC network: the simulated chain watches it, so a provisioned wallet's address is handed out. */
const addressNetwork = "BTC_TESTNET"
const apiKeyCount = 32
const rateLimitPerSecond = 1000
const startTimeoutMs = 120_000

export interface DepositAddressPhaseOptions {
  readonly count: number
  readonly inFlight: number
  readonly blockSize: number
  readonly opsToken: string
}

export interface DepositAddressResult {
  /** The largest p99 of any block, in ms. */
  readonly worstBlockP99Ms: number
  readonly residentBytes: number
  readonly liveHeapBytes: number
}

const percentile = (values: ReadonlyArray<number>, fraction: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))] ?? Number.NaN
}

/** VmRSS of a process, in bytes (Linux). */
const residentBytes = (pid: number): number => {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  if (match === null) throw new Error(`no VmRSS for pid ${pid}`)
  return Number(match[1]) * 1024
}

/**
 * The live heap of the process whose inspector listens on `port`: two full collections (HeapProfiler.collectGarbage),
 * then Runtime.getHeapUsage's used size. The inspector's own objects are a few hundred KB of it.
 */
const liveHeapBytes = async (port: number): Promise<number> => {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as Array<{ webSocketDebuggerUrl: string }>
  const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl)
  await new Promise((resolvePromise, reject) => {
    socket.addEventListener("open", resolvePromise, { once: true })
    socket.addEventListener("error", reject, { once: true })
  })
  let next = 0
  const pending = new Map<number, (result: any) => void>()
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data))
    pending.get(message.id)?.(message.result)
    pending.delete(message.id)
  })
  const call = (method: string) =>
    new Promise<any>((resolvePromise) => {
      const id = ++next
      pending.set(id, resolvePromise)
      socket.send(JSON.stringify({ id, method }))
    })
  try {
    await call("HeapProfiler.collectGarbage")
    await call("HeapProfiler.collectGarbage")
    return (await call("Runtime.getHeapUsage")).usedSize
  } finally {
    socket.close()
  }
}

/** The service's slow spans grouped by name (src/observability/SlowSpans.ts), and its longest GC pauses. */
const printDiagnostics = (lines: ReadonlyArray<string>, traceGc: boolean) => {
  if (process.env.COFFER_SLOW_SPANS_MS !== undefined) {
    const counts = new Map<string, { count: number; totalMillis: number; maxMillis: number }>()
    for (const line of lines) {
      const match = /^slow span (.+): ([0-9.]+) ms$/.exec(line)
      if (match === null) continue
      const entry = counts.get(match[1]!) ?? { count: 0, totalMillis: 0, maxMillis: 0 }
      entry.count++
      entry.totalMillis += Number(match[2])
      entry.maxMillis = Math.max(entry.maxMillis, Number(match[2]))
      counts.set(match[1]!, entry)
    }
    const top = [...counts].sort((a, b) => b[1].maxMillis - a[1].maxMillis).slice(0, 20)
    log(`  slow spans (count, avg, max, name):\n${top.map(([name, entry]) =>
      `    ${entry.count}× ${(entry.totalMillis / entry.count).toFixed(0)} ms avg ${entry.maxMillis.toFixed(0)} ms max  ${name}`)
      .join("\n")}`)
  }
  if (traceGc) {
    const pauses = lines.flatMap((line) => {
      const match = /(\d+) ms: (Scavenge|Mark-Compact|Mark-Compact \(reduce\)|Minor Mark-Sweep)[^,]*, .*?([0-9.]+) \/ [0-9.]+ ms/.exec(line)
      return match === null ? [] : [{ at: Number(match[1]), kind: match[2]!, millis: Number(match[3]), line }]
    })
    const longest = [...pauses].sort((a, b) => b.millis - a.millis).slice(0, 5)
    log(`  GC (--trace-gc): ${pauses.length} collections, ${pauses.reduce((sum, pause) => sum + pause.millis, 0).toFixed(0)} ms ` +
      `in all; the longest:\n${longest.map((pause) => `    ${pause.line.trim()}`).join("\n")}`)
  }
}

const megabytes = (bytes: number) => `${Math.round(bytes / 1048576)} MB`

export const runDepositAddressPhase = async (options: DepositAddressPhaseOptions): Promise<DepositAddressResult> => {
  const dataDir = makeDataDir("coffer-bench-addresses-")
  const traceGc = process.env.COFFER_BENCH_TRACE_GC === "1"
  const diagnostics: Array<string> = []
  let service: ServiceProcess | undefined
  // bench.ts's signal handler exits the process, and knows only its own service: this one goes down with it too.
  const onExit = () => cleanUpNow(service, dataDir)
  process.once("exit", onExit)
  try {
    const [port, opsPort, inspectPort] = [await freePort(), await freePort(), await freePort()]
    service = spawnService({
      dataDir,
      port,
      opsPort,
      env: { OPS_TOKEN: options.opsToken },
      nodeArgs: [`--inspect=127.0.0.1:${inspectPort}`, ...(traceGc ? ["--trace-gc"] : [])]
    })
    // ServiceProcess keeps the last 200 lines only: the diagnostics' lines are kept here, all of them.
    const collect = (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.startsWith("slow span ") || / ms: (Scavenge|Mark-Compact|Minor Mark-Sweep)/.test(line)) diagnostics.push(line)
      }
    }
    service.child.stdout?.on("data", collect)
    service.child.stderr?.on("data", collect)
    await waitForHealth(service, options.opsToken, startTimeoutMs)
    const tenant = await provisionTenant(service.opsUrl, options.opsToken, "bench-addresses", apiKeyCount, rateLimitPerSecond)
    const signedFetch = makeSignedFetch(service.publicUrl, tenant)
    const runId = randomBytes(3).toString("hex")
    const refs = Array.from({ length: options.count }, (_, index) => `addr-${runId}-${index}`)

    const usersStarted = performance.now()
    await mapLimit(refs, options.inFlight, (customerRefId) => signedFetch("POST", "/v1/users", { customerRefId }))
    log(`  deposit_address: ${options.count} users made in ${seconds(performance.now() - usersStarted)}`)

    const cpu = measureCpu({ service: service.child.pid!, dataDir })
    const latencies = new Array<number>(options.count)
    let withoutAddress = 0
    // A failed call (issue 39's stall could pass the 30 s request limit: 408) counts with its time, and is reported.
    const failures = new Map<string, number>()
    const started = performance.now()
    await mapLimit(refs, options.inFlight, async (customerRefId, index) => {
      const sent = performance.now()
      try {
        const answer = await signedFetch("POST", `/v1/users/${customerRefId}/deposit_address`, { networkKey: addressNetwork })
        if (answer.address === null) withoutAddress++
      } catch (error) {
        const reason = String(error).replace(/.*answered (\d+).*/s, "HTTP $1")
        failures.set(reason, (failures.get(reason) ?? 0) + 1)
      }
      latencies[index] = performance.now() - sent
    })
    const elapsed = performance.now() - started
    cpu.stop("deposit_address", options.count, "call")
    log(`  deposit_address: ${options.count} calls in ${seconds(elapsed)} (${rate(options.count / (elapsed / 1000))}/s, ` +
      `${options.inFlight} in flight); ${withoutAddress} answered without an address (PROVISIONING after the wait)` +
      (failures.size === 0 ? "" : `; FAILED ${[...failures].map(([reason, count]) => `${count} × ${reason}`).join(", ")}`))
    let worst = 0
    for (let from = 0; from < options.count; from += options.blockSize) {
      const block = latencies.slice(from, from + options.blockSize)
      const p99 = percentile(block, 0.99)
      worst = Math.max(worst, p99)
      log(`    calls ${from + 1}-${from + block.length}: p50 ${percentile(block, 0.5).toFixed(0)} ms, ` +
        `p99 ${p99.toFixed(0)} ms, max ${Math.max(...block).toFixed(0)} ms`)
    }

    // What the cluster stored: a wallet whose in-memory request was refused went through a persisted Provision.
    const db = makeDatabase(dataDir, 1)
    try {
      const [stored] = await db.run(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ messages: number; longest: number | null }>`
          SELECT count(*)::int AS messages,
            max(((r.id >> 22) - (m.id >> 22)))::int AS longest
          FROM cluster_messages m LEFT JOIN cluster_replies r ON r.request_id = m.id
          WHERE m.entity_type = 'Wallet' AND m.tag = 'Provision'`
      }))
      log(`  deposit_address: ${stored!.messages} persisted Provision messages` +
        (stored!.longest === null ? "" : `, the longest from its row to its reply ${stored!.longest} ms`))
    } finally {
      await db.dispose()
    }

    const resident = residentBytes(service.child.pid!)
    const heap = await liveHeapBytes(inspectPort)
    log(`  deposit_address: the service's resident memory ${megabytes(resident)}, live heap ${megabytes(heap)}`)
    return { worstBlockP99Ms: worst, residentBytes: resident, liveHeapBytes: heap }
  } finally {
    printDiagnostics(diagnostics, traceGc)
    if (service !== undefined) await stopService(service, 20_000).catch(() => undefined)
    cleanUpNow(service, dataDir)
    process.removeListener("exit", onExit)
  }
}
