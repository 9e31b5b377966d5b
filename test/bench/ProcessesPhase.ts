/**
 * Several processes (issue 32, README "Several processes"): signed requests and transfers with 1, 2, ... `maxProcesses`
 * service processes on one PostgreSQL, forming one cluster. The first process owns an embedded PostgreSQL in a
 * DATA_DIR of this phase's own; each further one starts as an operator starts it on the same machine: its own
 * DATA_DIR and ports, the first one's `DATABASE_URL`, `SIGNER_MNEMONIC` and `OPS_TOKEN`. The processes are added one
 * at a time and stay up, so the load with N processes runs on the cluster of N (its runners all holding shards in
 * `/ops/health`) and on one database that has seen the loads before it.
 *
 * Each count runs two loads of the bench's connections, spread over the processes' tenant ports in turn
 * (HttpLoad.ts `ports`), as a load balancer in front of them would:
 *   signed req/s (N processes)   GET /v1/networks, a fresh JWT and nonce per request, over 32 keys (bench.ts signed)
 *   transfers/s (N processes)    signed POST /v1/transactions between wallets funded by a small deposits phase
 *                                (DepositsPhase.ts) in this phase's database (TransfersPhase.ts `presignTransfers`)
 * and prints each with its ratio to one process. The goal (issue 32): on the bench machine's 2 cores two processes
 * must not fall below 0.9 of one, for either load (`two processes/one, ...` lines, `missed` below). Two processes do
 * not get more CPU than one on 2 cores (PostgreSQL and the client share them); the goal holds that what the cluster
 * adds (runner health, shard locks, the rate cap counted in PostgreSQL, messages to the other process's entities)
 * costs little.
 */
import { readFileSync } from "node:fs"
import { randomBytes } from "node:crypto"
import { cpus, loadavg } from "node:os"
import { join } from "node:path"
import { signRequest } from "../../src/client/RequestSigner.ts"
import {
  cleanUpNow,
  cpuSeconds,
  freePort,
  makeDataDir,
  postgresPids,
  type ServiceProcess,
  spawnService,
  stopService,
  waitForHealth
} from "../e2e/ServiceProcess.ts"
import {
  type BenchTenant,
  type CpuMeter,
  databaseUrl,
  log,
  makeDatabase,
  makeSignedFetch,
  microsEach,
  provisionTenant,
  rate,
  requestBytes,
  waitUntil
} from "./BenchSupport.ts"
import { runDepositsPhase } from "./DepositsPhase.ts"
import { type LoadResult, runLoad } from "./HttpLoad.ts"
import { presignTransfers } from "./TransfersPhase.ts"

/** Issue 32: with two processes neither load falls below this share of one process's rate. */
export const twoProcessesGoal = 0.9
const apiKeyCount = 32
const rateLimitPerSecond = 1000
/** Funding for the transfers: 200 wallets with two deposits of 1 BTC each (a transfer spends 60,000 sat). */
const walletCount = 200
const depositCount = 400
/** Pre-signed requests per load: the first is sized by this, later ones by the rate before them. */
const signedFirstSupply = 45_000
const signedSupplyMax = 400_000
/** N processes might (on more cores) serve N times one's rate; never fewer than this. */
const signedSupplyMin = 10_000
const transfersSupply = 20_000
const supplyMargin = 1.5
/**
 * Signing stops after this long: a token is valid 25 s from its `iat` (3 s ahead), and the load after it takes the
 * warm-up and the window; on a loaded machine a large supply took longer than that to sign and every request was
 * refused as expired. A supply that runs out shortens the window instead, and the load says so.
 */
const signingBudgetMs = 10_000
const signingChunk = 2_000
const startTimeoutMs = 120_000
const clusterTimeoutMs = 60_000
const stopTimeoutMs = 20_000
const idleSampleMs = 3_000

export interface ProcessesPhaseOptions {
  readonly maxProcesses: number
  readonly opsToken: string
  readonly connections: number
  readonly warmupMs: number
  readonly durationMs: number
  readonly describe: (name: string, result: LoadResult) => void
}

export interface ProcessesCount {
  readonly processes: number
  readonly signed: number
  readonly transfers: number
}

const plural = (count: number) => `${count} process${count === 1 ? "" : "es"}`

/** CPU of every service process, their PostgreSQL and this client over a load's window, in cores. */
const meterOver = (services: ReadonlyArray<ServiceProcess>, dataDir: string) => {
  const pids = () => services.map((service) => service.child.pid!)
  const sample = (postgres: ReadonlyArray<number>) => ({
    services: pids().map(cpuSeconds),
    postgres: postgres.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
    client: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
    at: performance.now()
  })
  let before: ReturnType<typeof sample> & { readonly postgres: number; readonly pids: ReadonlyArray<number> } | undefined
  return {
    start: () => {
      const postgres = postgresPids(dataDir)
      before = { ...sample(postgres), pids: postgres }
    },
    end: (name: string) => {
      const after = sample(before!.pids)
      const elapsed = (after.at - before!.at) / 1000
      const cores = (value: number) => (value / elapsed).toFixed(2)
      const services = after.services.map((value, index) => value - before!.services[index]!)
      return {
        serviceCpuSeconds: services.reduce((sum, value) => sum + value, 0),
        postgresCpuSeconds: after.postgres - before!.postgres,
        line: `  ${name} CPU in cores: services ${services.map(cores).join(" + ")}, postgres ` +
          `${cores(after.postgres - before!.postgres)}, client ${cores(after.client - before!.client)} ` +
          `(machine: ${cpus().length} cores, load average ${loadavg()[0]!.toFixed(1)})`
      }
    }
  } satisfies CpuMeter
}

/** `GET /v1/networks` signed with the keys in turn, a unique nonce each, `iat` a few seconds ahead. */
const presignSigned = (tenant: BenchTenant, hostHeader: string, count: number): Array<Buffer> => {
  const nowSeconds = Math.floor(Date.now() / 1000) + 3
  const runId = randomBytes(4).toString("hex")
  return Array.from({ length: count }, (_, index) => {
    const key = tenant.keys[index % tenant.keys.length]!
    const headers = signRequest({ keyId: key.keyId, privateKey: key.privateKey, target: "/v1/networks", body: "",
      nowSeconds, nonce: `${runId}-${index}` })
    return requestBytes(hostHeader, "GET", "/v1/networks", headers)
  })
}

/** Up to `count` requests from `sign`, in chunks, until `signingBudgetMs` has passed (the oldest must not expire). */
const presignWithin = (name: string, count: number, sign: (count: number) => Array<Buffer>): Array<Buffer> => {
  const started = performance.now()
  const requests: Array<Buffer> = []
  while (requests.length < count && performance.now() - started < signingBudgetMs) {
    requests.push(...sign(Math.min(signingChunk, count - requests.length)))
  }
  log(`  ${name}: pre-signed ${requests.length} of ${count} requests in ` +
    `${((performance.now() - started) / 1000).toFixed(1)} s`)
  return requests
}

/** Until the first process's `/ops/health` lists `count` runners, every one holding shards. */
const clusterOf = (opsUrl: string, opsToken: string, count: number) =>
  waitUntil(`a cluster of ${plural(count)}`, async () => {
    const response = await fetch(`${opsUrl}/ops/health`, { headers: { authorization: `Bearer ${opsToken}` } })
    if (response.status !== 200) return false
    const { cluster } = await response.json() as { cluster: { runners: Array<{ healthy: boolean; shards: string }> } }
    return cluster.runners.length === count &&
      cluster.runners.every((runner) => runner.healthy && runner.shards.length > 0)
  }, clusterTimeoutMs, 250)

export const runProcessesPhase = async (options: ProcessesPhaseOptions): Promise<ReadonlyArray<ProcessesCount>> => {
  const dataDirs = [makeDataDir("coffer-bench-processes-")]
  const services: Array<ServiceProcess> = []
  const cleanUp = () => services.forEach((service, index) => cleanUpNow(service, dataDirs[index]))
  process.once("exit", cleanUp)
  let db: ReturnType<typeof makeDatabase> | undefined
  try {
    const first = spawnService({
      dataDir: dataDirs[0]!,
      port: await freePort(),
      opsPort: await freePort(),
      env: { OPS_TOKEN: options.opsToken }
    })
    services.push(first)
    await waitForHealth(first, options.opsToken, startTimeoutMs)
    // What every further process needs to join the first one's database and cluster (README "Several processes").
    const joinEnv = {
      DATABASE_URL: databaseUrl(dataDirs[0]!),
      SIGNER_MNEMONIC: readFileSync(join(dataDirs[0]!, "signer-mnemonic"), "utf8").trim(),
      OPS_TOKEN: options.opsToken
    }
    const tenant = await provisionTenant(first.opsUrl, options.opsToken, "bench-processes", apiKeyCount, rateLimitPerSecond)
    db = makeDatabase(dataDirs[0]!)
    log(`  funding the transfers: ${walletCount} BTC wallets, ${depositCount} deposits (the deposits phase, small)`)
    const { wallets } = await runDepositsPhase({
      db,
      signedFetch: makeSignedFetch(first.publicUrl, tenant),
      opsUrl: first.opsUrl,
      opsToken: options.opsToken,
      tenantId: tenant.tenantId,
      walletCount,
      transferCount: depositCount,
      meter: () => meterOver([first], dataDirs[0]!)
    })

    const load = async (name: string, requests: ReadonlyArray<Buffer>) => {
      const meter = meterOver(services, dataDirs[0]!)
      let usage = { serviceCpuSeconds: 0, postgresCpuSeconds: 0, line: "" }
      let next = 0
      const result = await runLoad({
        host: "127.0.0.1",
        port: 0,
        ports: services.map((service) => Number(new URL(service.publicUrl).port)),
        connections: options.connections,
        warmupMs: options.warmupMs,
        durationMs: options.durationMs,
        nextRequest: () => requests[next++],
        onWindowStart: meter.start,
        onWindowEnd: () => {
          usage = meter.end(name)
        }
      })
      options.describe(name, result)
      log(usage.line)
      // Per request, the processes' CPU does not depend on how much of the machine they got, unlike the rate: a
      // cluster cost shows here even on a loaded machine (each process's fixed background work included).
      log(`  ${name} CPU per request: services ${microsEach(usage.serviceCpuSeconds, result.ok)}, postgres ` +
        `${microsEach(usage.postgresCpuSeconds, result.ok)}`)
      return result.requestsPerSecond
    }

    const counts: Array<ProcessesCount> = []
    for (let processes = 1; processes <= options.maxProcesses; processes++) {
      if (processes > 1) {
        const dataDir = makeDataDir("coffer-bench-processes-")
        dataDirs.push(dataDir)
        const joining = spawnService({ dataDir, port: await freePort(), opsPort: await freePort(), env: joinEnv })
        services.push(joining)
        await waitForHealth(joining, options.opsToken, startTimeoutMs)
      }
      const formedMs = await clusterOf(first.opsUrl, options.opsToken, processes)
      log(`\n  ${plural(processes)} on one PostgreSQL (cluster formed, every runner holding shards, after ` +
        `${(formedMs / 1000).toFixed(1)} s)`)
      // What the cluster costs with no load (runner health, shard locks, storage polls, the duties): the fixed part of
      // each process's CPU, which the loads' CPU per request carries too.
      const idle = meterOver(services, dataDirs[0]!)
      idle.start()
      await new Promise((resolvePromise) => setTimeout(resolvePromise, idleSampleMs))
      log(idle.end(`idle (${plural(processes)})`).line)
      // The host header is the first process's for every request: the service does not route by it.
      const hostHeader = new URL(first.publicUrl).host
      const window = (options.warmupMs + options.durationMs) / 1000
      const signedSupply = counts.length === 0
        ? signedFirstSupply
        : Math.min(signedSupplyMax, Math.max(signedSupplyMin,
          Math.ceil(Math.max(...counts.map((count) => count.signed)) * processes * window * supplyMargin)))
      const signedName = `signed (${plural(processes)})`
      const signed = await load(signedName,
        presignWithin(signedName, signedSupply, (count) => presignSigned(tenant, hostHeader, count)))
      const transfersName = `transfers (${plural(processes)})`
      let payer = 0
      const transfers = await load(transfersName, presignWithin(transfersName, transfersSupply, (count) =>
        presignTransfers(hostHeader, tenant, wallets, count, () => payer++ % wallets.length)))
      counts.push({ processes, signed, transfers })
    }
    return counts
  } finally {
    if (db !== undefined) await db.dispose()
    await Promise.all(services.slice(1).map((service) => stopService(service, stopTimeoutMs)))
    if (services[0] !== undefined) await stopService(services[0], stopTimeoutMs)
    cleanUp()
    process.off("exit", cleanUp)
  }
}

/**
 * The lines of the phase on stdout: each count's rates with their share of one process's, then the goal lines for
 * two processes (`missed` below 0.9). Answers whether a goal was missed.
 */
export const printProcessesFigures = (counts: ReadonlyArray<ProcessesCount>, figure: (line: string) => void): boolean => {
  const one = counts[0]!
  for (const count of counts) {
    const of = (value: number, base: number) => count.processes === 1 ? "" : `, ${(value / base).toFixed(2)} of one`
    figure(`signed req/s (${plural(count.processes)}): ${rate(count.signed)}${of(count.signed, one.signed)}`)
    figure(`transfers/s (${plural(count.processes)}): ${rate(count.transfers)}${of(count.transfers, one.transfers)}`)
  }
  const two = counts.find((count) => count.processes === 2)
  if (two === undefined) return false
  let missed = false
  for (const [name, value] of [["signed", two.signed / one.signed], ["transfers", two.transfers / one.transfers]] as const) {
    const below = value < twoProcessesGoal
    missed ||= below
    figure(`two processes/one, ${name}: ${value.toFixed(2)} (goal ${twoProcessesGoal.toFixed(2)}${below ? ", missed" : ""})`)
  }
  return missed
}
