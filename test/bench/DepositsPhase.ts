/**
 * Deposits: one simulated block carrying `transferCount` transfers to `walletCount` watched addresses, mined through
 * the operator interface and then scanned, recorded and credited by the service's own deposit watcher, ledger and
 * outbox; against the same database's raw rate for inserting as many journal rows in batches (journalInsertMillis:
 * the ledger's own tables with their invariants enforced; a plain scratch-table figure is printed for context).
 *
 *   deposits/raw-insert ratio = raw seconds / service seconds (1.00: crediting a deposit costs one plain row)
 *
 * The wallets are made through the tenant interface (users, then BTC wallets, addresses provisioned by the service);
 * the transfers are written straight into the simulated chain's mempool (one INSERT: arranging, not measured). The
 * clock runs from the mining call to the moment every deposit is COMPLETED, credited, with its events recorded.
 * The funded wallets are what the transfers phase spends.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import {
  type CpuMeter,
  type Database,
  log,
  mapLimit,
  monotonicMicros,
  rate,
  seconds,
  type SignedFetch,
  uniqueKey,
  waitUntil
} from "./BenchSupport.ts"

export const depositNetwork = "BTC_TESTNET"
export const depositAsset = "BTC_TESTNET_BTC"
/** Each deposit: 1 BTC, far above the minimum; a wallet gets transferCount / walletCount of them. */
export const depositAmount = 100_000_000n
const setupConcurrency = 16
const provisioningTimeoutMs = 180_000
const creditTimeoutMs = 600_000
const rawBatchRows = 1_000

export interface FundedWallet {
  readonly walletId: string
  readonly address: string
}

export interface DepositsResult {
  readonly wallets: ReadonlyArray<FundedWallet>
  readonly ratio: number
  /** The measured part, for the profile. */
  readonly window: readonly [number, number]
}

/** 1,000 users, each with a BTC wallet whose BTC_TESTNET address the service has provisioned. */
const makeWallets = async (signedFetch: SignedFetch, db: Database, tenantId: string, count: number) => {
  const runId = randomBytes(3).toString("hex")
  const started = performance.now()
  await mapLimit(Array.from({ length: count }, (_, index) => index), setupConcurrency, async (index) => {
    const customerRefId = `bench-${runId}-${index}`
    await signedFetch("POST", "/v1/users", { customerRefId })
    await signedFetch("POST", "/v1/wallets", { customerRefId, chainFamily: "BTC" }, { "idempotency-key": uniqueKey() })
  })
  const addresses = () =>
    db.run(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ wallet_id: string; address: string }>`
        SELECT wallet_id, address FROM wallet_addresses
        WHERE tenant_id = ${tenantId} AND network_key = ${depositNetwork} ORDER BY address`
    }))
  await waitUntil("wallet addresses", async () => (await addresses()).length >= count, provisioningTimeoutMs, 250)
  const rows = await addresses()
  log(`  deposits: ${count} users and BTC wallets made and provisioned in ${seconds(performance.now() - started)}`)
  return rows.map((row) => ({ walletId: row.wallet_id, address: row.address }))
}

/** The transfers, round-robin over the addresses, into the simulated mempool (the next block takes them all). */
const queueTransfers = (db: Database, wallets: ReadonlyArray<FundedWallet>, count: number) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const addresses = wallets.map((wallet) => wallet.address)
    yield* sql`
      INSERT INTO devnet_transfers (network_key, tx_hash, output_index, from_address, to_address, asset_id, amount,
        block_height, created_at)
      SELECT ${depositNetwork}, encode(sha256(convert_to(${randomBytes(8).toString("hex")} || n::text, 'UTF8')), 'hex'), 0,
        NULL, (${JSON.stringify(addresses)}::jsonb ->> ((n % ${addresses.length})::int)), ${depositAsset},
        ${depositAmount.toString()}, NULL, now()
      FROM generate_series(0, ${count - 1}) AS n`
  }))

const depositCounts = (db: Database, tenantId: string) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ recorded: number; completed: number; credited: number }>`
      SELECT count(*)::int AS recorded, count(*) FILTER (WHERE status = 'COMPLETED')::int AS completed,
        count(*) FILTER (WHERE status = 'COMPLETED' AND sub_status IS NULL)::int AS credited
      FROM transactions WHERE tenant_id = ${tenantId} AND kind = 'DEPOSIT'`
    return row!
  }))

/**
 * Plain rows for context: as many rows shaped like journal entries (uuid key, a unique (kind, reference)) as there
 * are deposits, in multi-row INSERTs of `rawBatchRows`, each batch its own transaction, into a scratch table.
 */
const plainInsertMillis = (db: Database, count: number) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP TABLE IF EXISTS bench_raw_journal`
    yield* sql`CREATE TABLE bench_raw_journal (LIKE ledger_entries INCLUDING ALL)`
    const tenant = "00000000-0000-7000-8000-000000000000"
    const started = performance.now()
    for (let offset = 0; offset < count; offset += rawBatchRows) {
      const size = Math.min(rawBatchRows, count - offset)
      yield* sql`
        INSERT INTO bench_raw_journal (id, tenant_id, kind, reference_id, created_at)
        SELECT gen_random_uuid(), ${tenant}::uuid, 'DEPOSIT_CREDIT', gen_random_uuid(), now()
        FROM generate_series(1, ${size})`
    }
    const elapsed = performance.now() - started
    yield* sql`DROP TABLE bench_raw_journal`
    return elapsed
  }))

/**
 * The floor the ratio uses: the journal rows of as many deposit credits, written straight into the ledger with
 * SQL, `rawBatchRows` entries per transaction (one INSERT of entries, one of their postings, CHAIN to WALLET over the
 * phase's wallets), so PostgreSQL enforces the ledger's invariants on them as on the service's (sql/0003_ledger.sql:
 * each posting applied to its account by a trigger, each entry checked to balance at commit). What the service adds
 * on top is everything else: reading the block, the deposit records, their statuses and events.
 *
 * Each batch is rolled back after its deferred checks ran (`SET CONSTRAINTS ALL IMMEDIATE`): these entries book no
 * deposit, so committing them would leave the ledger audit (run after the transfers phase) real discrepancies and
 * the wallets money nobody deposited. The floor thus lacks the commit's WAL flush, one per batch of 1,000 rows,
 * which only makes the ratio stricter.
 */
const journalInsertMillis = (db: Database, tenantId: string, count: number) =>
  db.run(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const accounts = yield* sql<{ id: string; kind: string }>`
      SELECT id::text AS id, kind FROM ledger_accounts
      WHERE tenant_id = ${tenantId} AND asset_id = ${depositAsset} AND kind IN ('CHAIN', 'WALLET') ORDER BY id`
    const chain = accounts.find((account) => account.kind === "CHAIN")!.id
    const wallets = accounts.filter((account) => account.kind === "WALLET").map((account) => account.id)
    const rolledBack = Symbol("rolled back")
    const started = performance.now()
    for (let offset = 0; offset < count; offset += rawBatchRows) {
      const size = Math.min(rawBatchRows, count - offset)
      yield* sql.withTransaction(Effect.gen(function*() {
        const entries = yield* sql<{ id: string }>`
          INSERT INTO ledger_entries (id, tenant_id, kind, reference_id, created_at)
          SELECT uuidv7(), ${tenantId}, 'DEPOSIT_CREDIT', gen_random_uuid(), now() FROM generate_series(1, ${size})
          RETURNING id`
        const postings = entries.flatMap((entry, index) => [
          { entry_id: entry.id, account_id: chain, amount: "-1" },
          { entry_id: entry.id, account_id: wallets[(offset + index) % wallets.length]!, amount: "1" }
        ])
        yield* sql`
          INSERT INTO ledger_postings (entry_id, account_id, bucket, amount)
          SELECT p.entry_id, p.account_id, 'AVAILABLE', p.amount
          FROM jsonb_to_recordset(${JSON.stringify(postings)}::jsonb) AS p(entry_id uuid, account_id bigint, amount numeric)
          ORDER BY p.account_id`
        yield* sql`SET CONSTRAINTS ALL IMMEDIATE`
        return yield* Effect.fail(rolledBack)
      })).pipe(Effect.catchIf((error) => error === rolledBack, () => Effect.void))
    }
    return performance.now() - started
  }))

export const runDepositsPhase = async (options: {
  readonly db: Database
  readonly signedFetch: SignedFetch
  readonly opsUrl: string
  readonly opsToken: string
  readonly tenantId: string
  readonly walletCount: number
  readonly transferCount: number
  readonly meter: () => CpuMeter
}): Promise<DepositsResult> => {
  const { db, tenantId, transferCount } = options
  const wallets = await makeWallets(options.signedFetch, db, tenantId, options.walletCount)
  await queueTransfers(db, wallets, transferCount)

  // BTC_TESTNET credits at 2 confirmations: one block with the transfers and one on top, in one call.
  const meter = options.meter()
  meter.start()
  const windowStart = monotonicMicros()
  const started = performance.now()
  const mined = await fetch(`${options.opsUrl}/ops/devnet/${depositNetwork}/blocks`, {
    method: "POST",
    headers: { authorization: `Bearer ${options.opsToken}`, "content-type": "application/json" },
    body: JSON.stringify({ count: 2 })
  })
  // The blocks commit before the call scans; a scan longer than the request limit (30 s, a 408) is interrupted and
  // rolled back step by step, and the background scan (every second) does the work instead: the clock keeps running.
  if (mined.status !== 200 && mined.status !== 408) throw new Error(`mining answered ${mined.status}: ${await mined.text()}`)
  const minedText = await mined.text()
  const minedMs = performance.now() - started
  if (mined.status === 408) log(`  deposits: the mining call's own scan hit the request limit: ${minedText}`)
  const afterMine = await depositCounts(db, tenantId)
  await waitUntil("deposits credited", async () => (await depositCounts(db, tenantId)).completed >= transferCount, creditTimeoutMs)
  const serviceMs = performance.now() - started
  const window = [windowStart, monotonicMicros()] as const
  log(meter.end("deposits").line)
  const counts = await depositCounts(db, tenantId)
  if (counts.credited !== transferCount) {
    throw new Error(`expected ${transferCount} credited deposits, found ${counts.credited} (${counts.completed} completed)`)
  }
  log(`  deposits: the mining call answered after ${seconds(minedMs)} with ${afterMine.recorded} recorded and ` +
    `${afterMine.completed} completed; all ${transferCount} credited after ${seconds(serviceMs)} ` +
    `(${rate(transferCount / (serviceMs / 1000))} deposits/s)`)

  const plainMs = await plainInsertMillis(db, transferCount)
  log(`  plain rows: ${transferCount} entry-shaped rows into a scratch table in batches of ${rawBatchRows} in ` +
    `${seconds(plainMs)} (${rate(transferCount / (plainMs / 1000))} rows/s; for context, not the ratio)`)
  const rawMs = await journalInsertMillis(db, tenantId, transferCount)
  log(`  raw journal: ${transferCount} deposit-credit entries (${2 * transferCount} postings) in batches of ` +
    `${rawBatchRows} in ${seconds(rawMs)} (${rate(transferCount / (rawMs / 1000))} entries/s)`)
  return { wallets, ratio: rawMs / serviceMs, window }
}
