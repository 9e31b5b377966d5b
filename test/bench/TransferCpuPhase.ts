/**
 * Transfers by CPU (issue 34, "Money by the batch"): what the machine spends per transfer rather than how many go per
 * second, which follows the raw baseline's 2-3x swings within a day more than the service.
 *
 *   transfers cpu/raw    (service + PostgreSQL CPU per transfer) / (bench client + PostgreSQL CPU per raw two-row
 *                        transfer); goal at most 2.0 (the aim is 1.0)
 *   fee-account cpu/raw  the same with the tenant charging an internal transfer fee on every transfer, so each one
 *                        also posts to the tenant's one FEES account; goal at most 2.2
 *
 * CPU is read from /proc (utime + stime) for the service's process and its PostgreSQL's processes (the postmaster's
 * children alive at the slice's start) around each measured slice; the raw transfer's client is this process
 * (process.cpuUsage). The service, the raw baseline and the service with fees run in alternating slices of one run
 * (`rounds` of each, each with a short warm-up), so the machine's load at any moment weighs on all three alike. The
 * raw transfer is TransfersPhase.ts's: lock both rows in id order, update both, insert two journal rows, commit, over
 * the same number of connections as the service's pool.
 */
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { FetchHttpClient } from "effect/http"
import { makeOpsClient } from "../../src/client/OpsClient.ts"
import { cpuSeconds, postgresPids } from "../e2e/ServiceProcess.ts"
import { type BenchTenant, type Database, log } from "./BenchSupport.ts"
import { clientCpuSeconds, microsPerUnit as microsEach, type Slice, startServiceCpu, sumSlices as sum } from "./CpuSlices.ts"
import { depositAsset, type FundedWallet } from "./DepositsPhase.ts"
import { runLoad } from "./HttpLoad.ts"
import { presignTransfers } from "./TransfersPhase.ts"

const rounds = 3
const sliceWarmupMs = 300
const sliceMs = 2_000
const rawAccounts = 1_000
const transferAmount = "60000"
/** The fee of the fee-account slices: small beside the wallets' balances, above zero so FEES is posted to. */
const internalTransferFee = "7"

export const runTransferCpuPhase = async (options: {
  readonly db: Database
  readonly dataDir: string
  readonly servicePid: number
  readonly opsUrl: string
  readonly opsToken: string
  readonly tenant: BenchTenant
  readonly wallets: ReadonlyArray<FundedWallet>
  readonly host: string
  readonly port: number
  readonly connections: number
}) => {
  const hostHeader = `${options.host}:${options.port}`
  const setFee = (fee: string | undefined) =>
    Effect.gen(function*() {
      const ops = yield* makeOpsClient({ baseUrl: options.opsUrl, token: Redacted.make(options.opsToken) })
      yield* ops.tenants.update({
        params: { tenantId: options.tenant.tenantId },
        payload: { settings: { internalTransferFees: fee === undefined ? {} : { [depositAsset]: fee } } }
      })
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.runPromise)

  /** One slice of signed transfers through the service: transfers answered in the window, service + PostgreSQL CPU. */
  const serviceSlice = async (): Promise<Slice> => {
    const requests = presignTransfers(hostHeader, options.tenant, options.wallets, 20_000,
      (index) => index % options.wallets.length)
    let next = 0
    let spent = () => 0
    let cpu = 0
    const result = await runLoad({
      host: options.host,
      port: options.port,
      connections: options.connections,
      warmupMs: sliceWarmupMs,
      durationMs: sliceMs,
      nextRequest: () => requests[next++],
      onWindowStart: () => {
        spent = startServiceCpu(options)
      },
      onWindowEnd: () => {
        cpu = spent()
      }
    })
    return { units: result.ok, cpuSeconds: cpu }
  }

  await options.db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP TABLE IF EXISTS bench_cpu_postings, bench_cpu_accounts`
    yield* sql`CREATE TABLE bench_cpu_accounts (id bigint PRIMARY KEY, balance numeric(78, 0) NOT NULL)`
    yield* sql`CREATE TABLE bench_cpu_postings (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, transfer_id uuid NOT NULL,
      account_id bigint NOT NULL REFERENCES bench_cpu_accounts (id), amount numeric(78, 0) NOT NULL,
      created_at timestamptz NOT NULL)`
    yield* sql`INSERT INTO bench_cpu_accounts (id, balance)
      SELECT n, 1000000000000 FROM generate_series(1, ${rawAccounts}) AS n`
  }))

  /** One slice of raw two-row transfers: transfers in the window, this client's + PostgreSQL CPU. */
  const rawSlice = (): Promise<Slice> =>
    options.db.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const transfer = (from: number, to: number) =>
        sql.withTransaction(Effect.gen(function*() {
          const [low, high] = from < to ? [from, to] : [to, from]
          yield* sql`SELECT id FROM bench_cpu_accounts WHERE id IN (${low}, ${high}) ORDER BY id FOR UPDATE`
          yield* sql`UPDATE bench_cpu_accounts SET balance = balance - ${transferAmount} WHERE id = ${from}`
          yield* sql`UPDATE bench_cpu_accounts SET balance = balance + ${transferAmount} WHERE id = ${to}`
          yield* sql`INSERT INTO bench_cpu_postings (transfer_id, account_id, amount, created_at)
            VALUES (gen_random_uuid(), ${from}, ${`-${transferAmount}`}, now()),
              (gen_random_uuid(), ${to}, ${transferAmount}, now())`
        }))
      const windowStart = performance.now() + sliceWarmupMs
      const windowEnd = windowStart + sliceMs
      let counted = 0
      let start: { client: number; postgres: number; pids: ReadonlyArray<number> } | undefined
      const clientSeconds = clientCpuSeconds
      let cpu = 0
      const worker = Effect.gen(function*() {
        while (performance.now() < windowEnd) {
          const from = 1 + Math.floor(Math.random() * rawAccounts)
          const to = 1 + ((from + Math.floor(Math.random() * (rawAccounts - 1))) % rawAccounts)
          yield* transfer(from, to)
          const now = performance.now()
          if (now >= windowStart && start === undefined) {
            // The pool's connections are all open by now: their backends are among the pids sampled.
            const pids = postgresPids(options.dataDir)
            start = { client: clientSeconds(), postgres: pids.reduce((s, pid) => s + cpuSeconds(pid), 0), pids }
          }
          if (start !== undefined && now < windowEnd) counted++
        }
      })
      yield* Effect.all(Array.from({ length: options.connections }, () => worker), { concurrency: "unbounded" })
      if (start !== undefined) {
        cpu = clientSeconds() - start.client + start.pids.reduce((s, pid) => s + cpuSeconds(pid), 0) - start.postgres
      }
      return { units: counted, cpuSeconds: cpu }
    }))

  const plain: Array<Slice> = []
  const raw: Array<Slice> = []
  const withFee: Array<Slice> = []
  try {
    for (let round = 0; round < rounds; round++) {
      plain.push(await serviceSlice())
      raw.push(await rawSlice())
      await setFee(internalTransferFee)
      withFee.push(await serviceSlice())
      await setFee(undefined)
    }
  } finally {
    await options.db.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`DROP TABLE IF EXISTS bench_cpu_postings, bench_cpu_accounts`
    }))
  }
  const [service, baseline, fees] = [sum(plain), sum(raw), sum(withFee)]
  log(`  transfers by CPU, ${rounds} alternating slices of ${sliceMs / 1000} s each: service + PostgreSQL ` +
    `${microsEach(service).toFixed(0)} µs per transfer (${service.units}), with a fee ${microsEach(fees).toFixed(0)} µs ` +
    `(${fees.units}); raw client + PostgreSQL ${microsEach(baseline).toFixed(0)} µs per two-row transfer (${baseline.units})`)
  return {
    transfersCpuRatio: microsEach(service) / microsEach(baseline),
    feeAccountCpuRatio: microsEach(fees) / microsEach(baseline)
  }
}
