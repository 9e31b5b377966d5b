/**
 * Transfers: signed `POST /v1/transactions` internal transfers per second through the whole service (signature,
 * idempotency record, checks, ledger entry, outbox event), between the funded wallets of the deposits phase, and
 * again with every transfer paid from one wallet (each then waits for the one before it on the payer's account
 * row); against the raw two-row transfer through @effect/sql-pg on the same database with as many connections as the
 * service's pool: lock both rows in id order, update both, insert two journal rows, commit.
 *
 *   transfers/raw ratio, one-payer/raw ratio = service transfers/s ÷ raw transfers/s
 *
 * Afterwards the ledger is audited with `npm run ledger:check`'s checks (ledgerAudit below).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { auditLedger, reportLines } from "../../src/ledger/LedgerAudit.ts"
import {
  type BenchTenant,
  type CpuMeter,
  type Database,
  log,
  microsEach,
  printStatements,
  printTriggerCounts,
  explainMark,
  rate,
  sampleActivity,
  signedPostBytes,
  startStatements
} from "./BenchSupport.ts"
import { depositAsset, type FundedWallet } from "./DepositsPhase.ts"
import { type LoadResult, runLoad } from "./HttpLoad.ts"

/** Far above BTC's minimum withdrawal, so no rule of the quote refuses it; tiny next to a wallet's 10 BTC. */
const transferAmount = "60000"
const rawAccounts = 1_000
/** Pre-signed requests per phase at most (the load stops early, and says so, when they run out). */
const transfersMax = 20_000

const pick = (count: number, not: number) => {
  const index = Math.floor(Math.random() * (count - 1))
  return index >= not ? index + 1 : index
}

/** Every request of a run, signed now, `iat` a few seconds ahead so the last is still valid at the end. */
export const presignTransfers = (
  hostHeader: string,
  tenant: BenchTenant,
  wallets: ReadonlyArray<FundedWallet>,
  count: number,
  payerOf: (index: number) => number
) => {
  const nowSeconds = Math.floor(Date.now() / 1000) + 3
  const runId = randomBytes(4).toString("hex")
  return Array.from({ length: count }, (_, index) => {
    const payer = payerOf(index)
    const body = {
      assetId: depositAsset,
      source: { type: "WALLET", id: wallets[payer]!.walletId },
      destination: { type: "WALLET", id: wallets[pick(wallets.length, payer)]!.walletId },
      amountRaw: transferAmount
    }
    return signedPostBytes(hostHeader, tenant.keys[index % tenant.keys.length]!, "/v1/transactions", body, nowSeconds,
      `${runId}-${index}`, { "idempotency-key": `${runId}-${index}` })
  })
}

/** The raw transfer over `rawAccounts` accounts, for `durationMs` after `warmupMs`, `concurrency` at once. */
const rawTransfers = (db: Database, options: { warmupMs: number; durationMs: number; concurrency: number }) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP TABLE IF EXISTS bench_raw_postings, bench_raw_accounts`
    yield* sql`CREATE TABLE bench_raw_accounts (id bigint PRIMARY KEY, balance numeric(78, 0) NOT NULL)`
    yield* sql`CREATE TABLE bench_raw_postings (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, transfer_id uuid NOT NULL,
      account_id bigint NOT NULL REFERENCES bench_raw_accounts (id), amount numeric(78, 0) NOT NULL,
      created_at timestamptz NOT NULL)`
    yield* sql`INSERT INTO bench_raw_accounts (id, balance)
      SELECT n, 1000000000000 FROM generate_series(1, ${rawAccounts}) AS n`
    const transfer = (from: number, to: number) =>
      sql.withTransaction(Effect.gen(function*() {
        const [low, high] = from < to ? [from, to] : [to, from]
        yield* sql`SELECT id FROM bench_raw_accounts WHERE id IN (${low}, ${high}) ORDER BY id FOR UPDATE`
        yield* sql`UPDATE bench_raw_accounts SET balance = balance - ${transferAmount} WHERE id = ${from}`
        yield* sql`UPDATE bench_raw_accounts SET balance = balance + ${transferAmount} WHERE id = ${to}`
        yield* sql`INSERT INTO bench_raw_postings (transfer_id, account_id, amount, created_at)
          VALUES (gen_random_uuid(), ${from}, ${`-${transferAmount}`}, now()), (gen_random_uuid(), ${to}, ${transferAmount}, now())`
      }))
    const windowStart = performance.now() + options.warmupMs
    const windowEnd = windowStart + options.durationMs
    let counted = 0
    const worker = Effect.gen(function*() {
      while (performance.now() < windowEnd) {
        const from = 1 + Math.floor(Math.random() * rawAccounts)
        yield* transfer(from, 1 + pick(rawAccounts, from - 1))
        const now = performance.now()
        if (now >= windowStart && now < windowEnd) counted++
      }
    })
    yield* Effect.all(Array.from({ length: options.concurrency }, () => worker), { concurrency: "unbounded" })
    yield* sql`DROP TABLE bench_raw_postings, bench_raw_accounts`
    return counted / (options.durationMs / 1000)
  }))

/**
 * The ledger audit of `npm run ledger:check` (src/ledger/LedgerAudit.ts) on the bench's database, after the load:
 * answers its report lines when it finds a discrepancy (empty: the ledger is sound).
 */
export const ledgerAudit = (db: Database): Promise<ReadonlyArray<string>> =>
  db.run(Effect.map(auditLedger, (report) => report.ok ? [] : reportLines("bench database", report)))

export const runTransfersPhase = async (options: {
  readonly db: Database
  readonly tenant: BenchTenant
  readonly wallets: ReadonlyArray<FundedWallet>
  readonly host: string
  readonly port: number
  readonly connections: number
  readonly warmupMs: number
  readonly durationMs: number
  readonly describe: (name: string, result: LoadResult) => void
  readonly meter: () => CpuMeter
  /** Print the statements of each load (bench.ts `--statements`). */
  readonly statements?: boolean
  /** The service's auto_explain log, whose triggers each load prints per transfer (bench.ts `--explain`). */
  readonly explainLog?: string | undefined
}) => {
  const hostHeader = `${options.host}:${options.port}`
  const load = (name: string, requests: ReadonlyArray<Buffer>) => {
    let next = 0
    const meter = options.meter()
    let usage = { serviceCpuSeconds: 0, postgresCpuSeconds: 0, line: "" }
    return runLoad({
      host: options.host,
      port: options.port,
      connections: options.connections,
      warmupMs: options.warmupMs,
      durationMs: options.durationMs,
      nextRequest: () => requests[next++],
      onWindowStart: meter.start,
      onWindowEnd: () => {
        usage = meter.end(name)
      }
    }).then((result) => {
      options.describe(name, result)
      log(usage.line)
      const micros = (cpu: number) => microsEach(cpu, result.ok)
      log(`  ${name} CPU per transfer: service ${micros(usage.serviceCpuSeconds)}, postgres ${micros(usage.postgresCpuSeconds)}`)
      return result
    })
  }
  const count = transfersMax
  // `--statements`: what each load cost the database, and what its connections were doing meanwhile.
  // `--explain`: what each transfer's statements fired, from the service's auto_explain log.
  const observed = async (name: string, top: number, run: () => Promise<LoadResult>) => {
    const explainFrom = options.explainLog === undefined ? undefined : explainMark(options.explainLog)
    if (options.statements !== true) {
      const result = await run()
      if (explainFrom !== undefined) printTriggerCounts(options.explainLog!, explainFrom, name, "WITH movement_transactions AS")
      return result
    }
    await startStatements(options.db)
    const activity = sampleActivity(options.db, name)
    const result = await run()
    await activity.stop()
    await printStatements(options.db, name, top)
    return result
  }
  const many = await observed("transfers", 45, () =>
    load("transfers", presignTransfers(hostHeader, options.tenant, options.wallets, count, (index) => index % options.wallets.length)))
  const onePayer = await observed("one-payer", 20, () =>
    load("one-payer", presignTransfers(hostHeader, options.tenant, options.wallets, count, () => 0)))
  const raw = await rawTransfers(options.db, {
    warmupMs: options.warmupMs,
    durationMs: options.durationMs,
    concurrency: options.connections
  })
  log(`  raw two-row transfers: ${rate(raw)}/s (${options.connections} at once over a pool of 10 connections)`)
  const problems = await ledgerAudit(options.db)
  if (problems.length > 0) throw new Error(`ledger audit failed:\n  ${problems.join("\n  ")}`)
  log("  ledger audit (npm run ledger:check's checks): ledger ok")
  return {
    transfers: many.requestsPerSecond,
    onePayer: onePayer.requestsPerSecond,
    raw,
    window: many.windowMonotonicMicros
  }
}
