/**
 * The ledger's one door: every movement of funds is a journal entry posted here, inside the database transaction
 * of the state change it books (a deposit credited, a withdrawal frozen), so the two commit or roll back together.
 * sql/0003_ledger.sql enforces the invariants in PostgreSQL itself; this service states the same rules in code so a
 * caller's bug fails loudly before it reaches the database, and turns "not enough available" into the spec's
 * INSUFFICIENT_BALANCE.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { decodeRows, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { InsufficientBalance } from "../domain/ApiError.ts"
import { makeBoundedCache } from "../domain/BoundedCache.ts"
import { Ids } from "../domain/Ids.ts"
import { LedgerFaults } from "./LedgerFaults.ts"

export type AccountKind = "WALLET" | "FEES" | "NETWORK_FEES" | "CHAIN"
export type Bucket = "AVAILABLE" | "FROZEN"

export const EntryKind = [
  "DEPOSIT_CREDIT",
  "DEPOSIT_REVERSAL",
  "MANUAL_DEPOSIT_CREDIT",
  "WITHDRAWAL_FREEZE",
  "WITHDRAWAL_RELEASE",
  "WITHDRAWAL_SETTLE",
  "NETWORK_FEE",
  "TRANSFER",
  "TRANSFER_FREEZE",
  "TRANSFER_RELEASE",
  "TRANSFER_SETTLE",
  "SEND_NETWORK_FEE"
] as const
export type EntryKind = (typeof EntryKind)[number]

/** A user wallet's account, or one of the tenant's own (see sql/0003_ledger.sql for what each holds). */
export type AccountRef =
  | { readonly kind: "WALLET"; readonly walletId: string }
  | { readonly kind: "FEES" | "NETWORK_FEES" | "CHAIN" }

export interface Posting {
  readonly account: AccountRef
  readonly assetId: string
  readonly bucket: Bucket
  /** Signed: positive adds to the bucket, negative takes from it. Never zero. */
  readonly amount: bigint
}

export interface EntryRequest {
  readonly tenantId: string
  readonly kind: EntryKind
  /** The transaction the entry books; with `kind`, it names the entry: posting it again changes nothing. */
  readonly referenceId: string
  readonly postings: ReadonlyArray<Posting>
}

export type PostResult =
  | { readonly _tag: "Posted"; readonly entryId: string }
  /** This (kind, reference) was booked before: nothing was posted now. */
  | { readonly _tag: "AlreadyPosted"; readonly entryId: string }

/** Entries whose accounts are resolved (`Ledger.prepare`), ready to be written by `Ledger.postPreparedAfter`. */
export interface PreparedEntries {
  readonly requests: ReadonlyArray<EntryRequest>
  readonly entryIds: ReadonlyArray<string>
  readonly at: Date
  /** Account id by `${tenantId}/${accountKey(posting)}`. */
  readonly accountIds: ReadonlyMap<string, string>
}

/**
 * Several callers' prepared entries as one (`Ledger.postPreparedAfter` writes them in one statement), in their order;
 * the entries' time is the first's.
 */
export const mergePrepared = (list: ReadonlyArray<PreparedEntries>): PreparedEntries => ({
  requests: list.flatMap((prepared) => prepared.requests),
  entryIds: list.flatMap((prepared) => prepared.entryIds),
  at: list[0]!.at,
  accountIds: new Map(list.flatMap((prepared) => [...prepared.accountIds]))
})

export interface Balance {
  readonly assetId: string
  /**
   * What can be spent, never below 0: the spec's raw amounts are unsigned (docs/ledger.md "Choices"). The account's
   * own balance is negative only after a deposit reversal took back funds already spent (decisions.md, Deposits);
   * that debt is `overdrawn`.
   */
  readonly available: bigint
  /** How far the available balance is below 0 (0 when it is not); over a user's wallets, the sum of their debts. */
  readonly overdrawn: bigint
  readonly frozen: bigint
}

/**
 * Account ids remembered per process: an account is never deleted and never changes owner (sql/0003_ledger.sql,
 * `ledger_guard_account`), so an id once committed stays right, and a posting to known accounts needs no lookup.
 */
const knownAccountsMax = 50_000

/** PostgreSQL error raised by ledger_apply_posting when a debit would overdraw an account. */
const insufficientBalanceSqlState = "CF001"

export const sqlStateOf = (error: SqlError.SqlError): unknown => {
  const cause: unknown = error.reason.cause
  return typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined
}

/** The database's own words (which constraint, which entry): the SqlError's message alone says "Query failed". */
const refusedBy = (request: EntryRequest, error: SqlError.SqlError): Error => {
  const cause: unknown = error.reason.cause
  const detail = cause instanceof Error ? cause.message : error.message
  return new Error(`ledger entry ${request.kind} ${request.referenceId} refused by the database: ${detail}`, {
    cause: error
  })
}

const accountKey = (posting: Posting) =>
  `${posting.account.kind}/${posting.account.kind === "WALLET" ? posting.account.walletId : ""}/${posting.assetId}`

/**
 * The rules the database enforces, checked first so a bug names itself: at least two postings, none zero, no
 * account and bucket twice, and a zero sum per asset. Broken ones are defects, never a request error.
 */
export const assertBalanced = (request: EntryRequest): void => {
  if (request.postings.length < 2) throw new Error(`ledger entry ${request.kind} needs at least two postings`)
  const sums = new Map<string, bigint>()
  const seen = new Set<string>()
  for (const posting of request.postings) {
    if (posting.amount === 0n) throw new Error(`ledger entry ${request.kind} has a zero posting`)
    const key = `${accountKey(posting)}/${posting.bucket}`
    if (seen.has(key)) throw new Error(`ledger entry ${request.kind} posts to ${key} twice`)
    seen.add(key)
    sums.set(posting.assetId, (sums.get(posting.assetId) ?? 0n) + posting.amount)
  }
  for (const [assetId, sum] of sums) {
    if (sum !== 0n) throw new Error(`ledger entry ${request.kind} does not balance: ${assetId} sums to ${sum}`)
  }
}

export const BalanceRow = Schema.Struct({ asset_id: Text, available: Numeric, overdrawn: Numeric, frozen: Numeric })
export type BalanceRow = typeof BalanceRow.Type

const balanceFromRow = (row: BalanceRow): Balance => ({
  assetId: row.asset_id,
  available: row.available,
  overdrawn: row.overdrawn,
  frozen: row.frozen
})

// Each query's rows, decoded at this edge (db/RowSchemas.ts); compiled once here, not per call.
const EntryIdRow = Schema.Struct({ id: Text })
const createdEntries = decodeRows(EntryIdRow, "Ledger.postMany (insert entries)")
const guardedEntry = decodeRows(
  Schema.Struct({ first: Schema.Unknown, id: Nullable(Text) }),
  "Ledger.postPreparedAfter"
)
const existingEntries = decodeRows(
  Schema.Struct({ id: Text, tenant_id: Text, kind: Text, reference_id: Text }),
  "Ledger.postMany (existing entries)"
)
const batchAccounts = decodeRows(
  Schema.Struct({ id: Numeric, tenant_id: Text, kind: Text, wallet_id: Nullable(Text), asset_id: Text }),
  "Ledger.postMany (accounts)"
)
const walletBalanceRows = decodeRows(BalanceRow, "Ledger.walletBalances")
const userBalanceRows = decodeRows(BalanceRow, "Ledger.userBalances")

export class Ledger extends Context.Service<Ledger, {
  /**
   * Posts one entry. Run it inside the transaction of the change it books; alone, it is its own transaction.
   * Fails with InsufficientBalance (and posts nothing) when a debit would overdraw a wallet's available balance.
   */
  readonly post: (request: EntryRequest) => Effect.Effect<PostResult, InsufficientBalance>
  /**
   * Posts many entries with a handful of statements whatever their number (a block's deposit credits): the same
   * rules and results as `post` for each, in request order, but one InsufficientBalance fails them all. Run it
   * inside the transaction of the changes it books.
   */
  readonly postMany: (requests: ReadonlyArray<EntryRequest>) => Effect.Effect<ReadonlyArray<PostResult>, InsufficientBalance>
  /**
   * `post` in two steps, for a statement that takes a contended lock just before the entry: `prepare` reads the
   * accounts' ids (opening missing ones, each committed on its own: an account at zero changes no balance) before
   * it, `postPreparedAfter` writes the entry; what is read before the lock is then not part of the time it is held
   * (transfers/Movements.ts).
   */
  readonly prepare: (request: EntryRequest) => Effect.Effect<PreparedEntries>
  /**
   * The prepared entries as the end of the caller's statement: `before` is the caller's part of its `WITH`, the
   * last of it a query named `first` answering at most one row. `first` runs before the entries are written (its
   * locks come first), and they are written only if it answered a row. Answers that row as JSON (undefined for none,
   * when nothing was posted) and the results in request order (none then). Alone, the statement is its own
   * transaction: a movement's rows, its hold and its entry in one round trip, or several movements' together
   * (transfers/Movements.ts; `mergePrepared`). One InsufficientBalance fails them all.
   */
  readonly postPreparedAfter: (
    prepared: PreparedEntries,
    before: Statement.Fragment
  ) => Effect.Effect<
    { readonly first: unknown; readonly results: ReadonlyArray<PostResult> },
    InsufficientBalance | SqlError.SqlError
  >
  /** A wallet's balances, one per asset that has had bookkeeping, by asset id. */
  readonly walletBalances: (walletId: string) => Effect.Effect<ReadonlyArray<Balance>>
  /** A user's balances summed over all the user's wallets, one per asset that has had bookkeeping, by asset id. */
  readonly userBalances: (userId: string) => Effect.Effect<ReadonlyArray<Balance>>
}>()("coffer/Ledger") {
  static readonly layer = Layer.effect(
    Ledger,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ids = yield* Ids
      // Empty unless a test planted a bug (LedgerFaults.ts); nothing in the service sets it.
      const dropped = new Set((yield* LedgerFaults).dropEntryKinds)
      const knownAccounts = makeBoundedCache<string>(knownAccountsMax)

      /** JSON text of a list, expanded by PostgreSQL: one parameter whatever the number of rows. */
      const json = (value: unknown) => JSON.stringify(value)

      /** An account's owner key, as the owner rows carry it to PostgreSQL. */
      type Owner = { tenant_id: string; kind: string; wallet_id: string | null; asset_id: string }
      const ownerRowKey = (row: Owner) =>
        `${row.tenant_id}/${row.kind}/${row.wallet_id ?? ""}/${row.asset_id}`

      // One probe of the owner key per account: `IS NOT DISTINCT FROM` cannot use an index, and a join on it scanned
      // every account of the tenant (1.5 ms a transfer with a few thousand wallets), so the wallet and the
      // tenant-level accounts (wallet_id NULL) are looked up by two exact conditions, each of which can.
      const findAccounts = (ownerRows: string) =>
        sql`
          SELECT a.id::text AS id, o.tenant_id, o.kind, o.wallet_id, o.asset_id
          FROM jsonb_to_recordset(${ownerRows}::jsonb) AS o(tenant_id uuid, kind text, wallet_id uuid, asset_id text)
          CROSS JOIN LATERAL (
            SELECT id FROM ledger_accounts
            WHERE o.wallet_id IS NOT NULL AND tenant_id = o.tenant_id AND kind = o.kind AND wallet_id = o.wallet_id
              AND asset_id = o.asset_id
            UNION ALL
            SELECT id FROM ledger_accounts
            WHERE o.wallet_id IS NULL AND tenant_id = o.tenant_id AND kind = o.kind AND wallet_id IS NULL
              AND asset_id = o.asset_id
          ) AS a`.pipe(Effect.flatMap(batchAccounts))

      /**
       * The account id of every owner, by `ownerRowKey`: one read when they all exist (the usual case); otherwise the
       * missing ones are opened at zero (in owner order, so concurrent openers take the unique index's locks in one
       * order) and read again.
       */
      const accountIds = (owners: ReadonlyArray<Owner>, now: Date) =>
        Effect.gen(function*() {
          const byOwner = new Map<string, string>()
          const unknown: Array<Owner> = []
          for (const owner of owners) {
            const key = ownerRowKey(owner)
            const id = knownAccounts.get(key)
            if (id === undefined) unknown.push(owner)
            else byOwner.set(key, id)
          }
          if (unknown.length === 0) return byOwner
          const ownerRows = json(unknown)
          let found = yield* findAccounts(ownerRows)
          if (found.length < unknown.length) {
            yield* sql`
              INSERT INTO ledger_accounts (tenant_id, kind, wallet_id, asset_id, created_at)
              SELECT o.tenant_id, o.kind, o.wallet_id, o.asset_id, ${now}
              FROM jsonb_to_recordset(${ownerRows}::jsonb) AS o(tenant_id uuid, kind text, wallet_id uuid, asset_id text)
              ORDER BY o.tenant_id, o.kind, o.wallet_id, o.asset_id
              ON CONFLICT ON CONSTRAINT ledger_accounts_owner_key DO NOTHING`
            found = yield* findAccounts(ownerRows)
          }
          const read = found.map((row) => [ownerRowKey(row), row.id.toString()] as const)
          for (const [key, id] of read) byOwner.set(key, id)
          // Remembered once committed: an account this transaction opened is gone again if it rolls back.
          yield* sql.afterCommit(Effect.sync(() => read.forEach(([key, id]) => knownAccounts.set(key, id))))
          return byOwner
        })

      const ownerKey = (tenantId: string, posting: Posting) => `${tenantId}/${accountKey(posting)}`

      /** The entries' ids and every account their postings touch (opened at zero on first use), by owner. */
      const prepareMany = (requests: ReadonlyArray<EntryRequest>) =>
        Effect.gen(function*() {
          yield* Effect.sync(() => requests.forEach(assertBalanced))
          const at = new Date(yield* Clock.currentTimeMillis)
          const entryIds: Array<string> = []
          for (let index = 0; index < requests.length; index++) {
            entryIds.push(yield* ids.uuidV7For("ledger-entry"))
          }
          const owners = new Map<string, Owner>()
          for (const request of requests) {
            for (const posting of request.postings) {
              owners.set(ownerKey(request.tenantId, posting), {
                tenant_id: request.tenantId,
                kind: posting.account.kind,
                wallet_id: posting.account.kind === "WALLET" ? posting.account.walletId : null,
                asset_id: posting.assetId
              })
            }
          }
          const accountIdsByOwner = yield* accountIds([...owners.values()], at)
          const prepared: PreparedEntries = { requests, entryIds, at, accountIds: accountIdsByOwner }
          return prepared
        })

      /**
       * The entries and their postings in one statement: a posting is written only for an entry this statement
       * created, so an entry booked before (same kind and reference) gets none. Accounts are locked (by the balance
       * update of each posting) in ascending id order across the whole batch, the order of the rows the SELECT hands
       * the INSERT, which is the order the row trigger runs in: two entries over the same accounts can never wait on
       * each other in a cycle.
       */
      const write = ({ accountIds: idOf, at, entryIds, requests }: PreparedEntries, before?: Statement.Fragment) =>
        Effect.gen(function*() {
          const postings = requests.flatMap((request, index) =>
            request.postings.map((posting) => ({
              entry_id: entryIds[index]!,
              account_id: idOf.get(ownerKey(request.tenantId, posting))!,
              bucket: posting.bucket,
              amount: posting.amount.toString()
            }))
          )
          postings.sort((a, b) => {
            const [x, y] = [BigInt(a.account_id), BigInt(b.account_id)]
            return x < y ? -1 : x > y ? 1 : a.bucket.localeCompare(b.bucket)
          })
          // With `before`: its `first` runs before the first entry row (the EXISTS is evaluated then), so its locks
          // come before the accounts' (taken by the postings' trigger at the statement's end).
          const statement = sql`
            WITH ${before === undefined ? sql`` : sql`${before},`} created AS (
              INSERT INTO ledger_entries (id, tenant_id, kind, reference_id, created_at)
              SELECT e.id, e.tenant_id, e.kind, e.reference_id, ${at}
              FROM jsonb_to_recordset(${json(requests.map((request, index) => ({
            id: entryIds[index],
            tenant_id: request.tenantId,
            kind: request.kind,
            reference_id: request.referenceId
          })))}::jsonb) AS e(id uuid, tenant_id uuid, kind text, reference_id uuid)
              ${before === undefined ? sql`` : sql`WHERE EXISTS (SELECT FROM first)`}
              ON CONFLICT ON CONSTRAINT ledger_entries_kind_reference_key DO NOTHING
              RETURNING id
            ), posted AS (
              INSERT INTO ledger_postings (entry_id, account_id, bucket, amount)
              SELECT p.entry_id, p.account_id, p.bucket, p.amount
              FROM jsonb_to_recordset(${json(postings.map((row, order) => ({ ...row, order })))}::jsonb)
                AS p(entry_id uuid, account_id bigint, bucket text, amount numeric, "order" integer)
              WHERE p.entry_id IN (SELECT id FROM created)
              ORDER BY p."order"
            )
            ${
            before === undefined
              ? sql`SELECT id FROM created`
              : sql`SELECT (SELECT to_jsonb(f) FROM first f) AS first, c.id FROM (VALUES (1)) AS one LEFT JOIN created c ON true`
          }`
          let firstRow: unknown = undefined
          let created: ReadonlyArray<{ readonly id: string }>
          if (before === undefined) {
            created = yield* Effect.flatMap(statement, createdEntries)
          } else {
            const rows = yield* Effect.flatMap(statement, guardedEntry)
            firstRow = rows[0]?.first ?? undefined
            // Nothing was posted: `first` answered no row.
            if (firstRow === undefined) return { first: undefined, results: [] }
            created = rows.flatMap((row) => row.id === null ? [] : [{ id: row.id }])
          }
          const posted = new Set(created.map((row) => row.id))
          const results: Array<PostResult> = requests.map((_, index) =>
            posted.has(entryIds[index]!)
              ? { _tag: "Posted", entryId: entryIds[index]! }
              : { _tag: "AlreadyPosted", entryId: "" }
          )
          if (posted.size < requests.length) {
            const existing = yield* sql`
              SELECT l.id, l.tenant_id, l.kind, l.reference_id FROM ledger_entries l
              JOIN jsonb_to_recordset(${json(requests.map((request) => ({ kind: request.kind, reference_id: request.referenceId })))
            }::jsonb) AS r(kind text, reference_id uuid) ON l.kind = r.kind AND l.reference_id = r.reference_id`.pipe(
              Effect.flatMap(existingEntries)
            )
            const byKey = new Map(existing.map((row) => [`${row.kind}/${row.reference_id}`, row]))
            requests.forEach((request, index) => {
              if (results[index]!._tag === "Posted") return
              const row = byKey.get(`${request.kind}/${request.referenceId}`)!
              if (row.tenant_id !== request.tenantId) {
                throw new Error(`ledger reference ${request.referenceId} belongs to another tenant`)
              }
              results[index] = { _tag: "AlreadyPosted", entryId: row.id }
            })
          }
          return { first: firstRow, results }
        })

      /** A database error of a write as the ledger's answer: an overdraft is InsufficientBalance, the rest defects. */
      const refused = (requests: ReadonlyArray<EntryRequest>) => (error: SqlError.SqlError) =>
        sqlStateOf(error) === insufficientBalanceSqlState
          ? Effect.fail(new InsufficientBalance({ message: "available balance below amount plus fee" }))
          : Effect.die(refusedBy(requests[0]!, error))

      /**
       * The one path that writes the journal (entries, postings, and the accounts they open): `post` is a batch of
       * one, so a single entry and a block's thousand credits take the same statements and the same lock order.
       */
      const book = (requests: ReadonlyArray<EntryRequest>): Effect.Effect<ReadonlyArray<PostResult>, InsufficientBalance> =>
        requests.length === 0
          ? Effect.succeed([])
          : Effect.flatMap(Effect.serviceOption(sql.transactionService), (outer) => {
            const booking = Effect.map(Effect.flatMap(prepareMany(requests), (prepared) => write(prepared)), (written) => written.results)
            // Inside the caller's transaction no savepoint: two round trips more, and no caller goes on after a refusal
            // (an overdraft or a defect fails its transaction whole).
            return (Option.isSome(outer) ? booking : sql.withTransaction(booking)).pipe(
              Effect.catchTag("SqlError", refused(requests))
            )
          })

      const prepare = Effect.fn("Ledger.prepare")(function*(request: EntryRequest) {
        return yield* prepareMany([request]).pipe(Effect.orDie)
      })

      const postPreparedAfter = Effect.fn("Ledger.postPreparedAfter")(function*(
        prepared: PreparedEntries,
        before: Statement.Fragment
      ) {
        if (prepared.requests.length === 0) return yield* Effect.die(new Error("postPreparedAfter needs an entry"))
        // The caller's part may refuse too (its own SQLSTATEs): any error but an overdraft is the caller's to read.
        const written = yield* write(prepared, before).pipe(
          Effect.catchTag("SqlError", (error): Effect.Effect<never, InsufficientBalance | SqlError.SqlError> =>
            sqlStateOf(error) === insufficientBalanceSqlState ? refused(prepared.requests)(error) : Effect.fail(error))
        )
        return { first: written.first, results: written.results }
      })

      const post = Effect.fn("Ledger.post")(function*(request: EntryRequest) {
        if (dropped.has(request.kind)) return { _tag: "Posted", entryId: "" } satisfies PostResult
        const [result] = yield* book([request])
        return result!
      })

      const postMany = Effect.fn("Ledger.postMany")(function*(requests: ReadonlyArray<EntryRequest>) {
        if (dropped.size === 0) return yield* book(requests)
        // A planted bug (LedgerFaults.ts): the dropped kinds are answered as posted, the rest booked as usual.
        const kept = requests.filter((request) => !dropped.has(request.kind))
        const results = kept.length === 0 ? [] : yield* book(kept)
        let next = 0
        return requests.map((request): PostResult =>
          dropped.has(request.kind) ? { _tag: "Posted", entryId: "" } : results[next++]!
        )
      })

      const walletBalances = Effect.fn("Ledger.walletBalances")(function*(walletId: string) {
        const rows = yield* sql`
          SELECT asset_id, greatest(available, 0)::text AS available, greatest(-available, 0)::text AS overdrawn,
            frozen::text AS frozen FROM ledger_accounts
          WHERE wallet_id = ${walletId} AND kind = 'WALLET'
          ORDER BY asset_id`.pipe(Effect.orDie, Effect.flatMap(walletBalanceRows))
        return rows.map(balanceFromRow)
      })

      const userBalances = Effect.fn("Ledger.userBalances")(function*(userId: string) {
        const rows = yield* sql`
          -- Per wallet first: one wallet's debt is not netted against another's spendable balance.
          SELECT a.asset_id, sum(greatest(a.available, 0))::text AS available,
            sum(greatest(-a.available, 0))::text AS overdrawn, sum(a.frozen)::text AS frozen
          FROM ledger_accounts a JOIN wallets w ON w.id = a.wallet_id
          WHERE w.user_id = ${userId} AND a.kind = 'WALLET'
          GROUP BY a.asset_id
          ORDER BY a.asset_id`.pipe(Effect.orDie, Effect.flatMap(userBalanceRows))
        return rows.map(balanceFromRow)
      })

      return { post, postMany, prepare, postPreparedAfter, walletBalances, userBalances }
    })
  )
}
