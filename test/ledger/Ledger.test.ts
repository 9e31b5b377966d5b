/**
 * The ledger (sql/0003_ledger.sql, src/ledger/Ledger.ts): entries through the service, balances over HTTP, and the
 * invariants the database enforces on its own, tried with raw SQL that bypasses the service.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { assertBalanced, type EntryRequest, Ledger, type Posting } from "../../src/ledger/Ledger.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const eth = "ETH_SEPOLIA_ETH"
const usdt = "ETH_SEPOLIA_USDT"
const trx = "TRON_NILE_TRX"

const get = (tenant: TestTenant, target: string) => rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target, tenant })
const post = (tenant: TestTenant, target: string, body: unknown, headers: Record<string, string> = {}) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target, body: JSON.stringify(body), tenant, headers })

/** A user's default wallet on `networkKey`, allocated (READY). */
const walletFor = (tenant: TestTenant, customerRefId: string, networkKey = "ETH_SEPOLIA") =>
  Effect.gen(function*() {
    const response = yield* post(tenant, `/v1/users/${customerRefId}/deposit_address`, { networkKey })
    assert.strictEqual(response.status, 200, response.text)
    assert.strictEqual(response.json.status, "READY")
    return response.json.walletId as string
  })

const wallet = (walletId: string) => ({ kind: "WALLET", walletId }) as const
const chain = { kind: "CHAIN" } as const
const fees = { kind: "FEES" } as const

const available = (account: Posting["account"], assetId: string, amount: bigint): Posting => ({
  account,
  assetId,
  bucket: "AVAILABLE",
  amount
})
const frozen = (account: Posting["account"], assetId: string, amount: bigint): Posting => ({
  account,
  assetId,
  bucket: "FROZEN",
  amount
})

/** A deposit of `amount` with `fee` to the tenant: the shape decisions.md describes (credited net of the fee). */
const depositCredit = (tenantId: string, walletId: string, assetId: string, amount: bigint, fee = 0n) =>
  Effect.map(uuidV7, (referenceId): EntryRequest => ({
    tenantId,
    kind: "DEPOSIT_CREDIT",
    referenceId,
    postings: [
      available(chain, assetId, -amount),
      available(wallet(walletId), assetId, amount - fee),
      ...(fee > 0n ? [available(fees, assetId, fee)] : [])
    ]
  }))

/** Sends `amount` out of a wallet's available to the chain: a debit that can overdraw. */
const debit = (tenantId: string, walletId: string, assetId: string, amount: bigint, kind: EntryRequest["kind"] = "TRANSFER") =>
  Effect.map(uuidV7, (referenceId): EntryRequest => ({
    tenantId,
    kind,
    referenceId,
    postings: [available(wallet(walletId), assetId, -amount), available(chain, assetId, amount)]
  }))

const defectOf = (exit: Exit.Exit<unknown, unknown>): string => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  if (!Exit.isFailure(exit)) return ""
  assert.isTrue(Cause.hasDies(exit.cause), `expected a defect, got ${Cause.pretty(exit.cause)}`)
  return String(exit.cause.reasons.find(Cause.isDieReason)?.defect)
}

/** Raw SQL in its own transaction; returns the database's complaint (the service is bypassed on purpose). */
const refusal = <A, E, R>(statement: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const exit = yield* Effect.exit(sql.withTransaction(statement))
    assert.isTrue(Exit.isFailure(exit), "the database accepted it")
    return Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
  })

const walletBalances = (tenant: TestTenant, walletId: string) =>
  Effect.map(get(tenant, `/v1/wallets/${walletId}/assets`), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("ledger", (it) => {
  describe("balances over HTTP", () => {
    it.effect("wallet assets list what was booked per asset; user balances sum over the user's wallets", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const tenant = yield* provisionTenant()
        const first = yield* walletFor(tenant, "alice")
        const second = (yield* post(tenant, "/v1/wallets", { customerRefId: "alice", chainFamily: "EVM" }, {
          "idempotency-key": "second"
        })).json.id as string
        const tron = yield* walletFor(tenant, "alice", "TRON_NILE")
        assert.deepStrictEqual(yield* walletBalances(tenant, first), [], "no bookkeeping, no rows")

        yield* ledger.post(yield* depositCredit(tenant.tenantId, first, eth, 10n ** 18n, 10n ** 15n))
        yield* ledger.post(yield* depositCredit(tenant.tenantId, first, usdt, 2n ** 200n))
        yield* ledger.post(yield* depositCredit(tenant.tenantId, second, eth, 5n))
        yield* ledger.post(yield* depositCredit(tenant.tenantId, tron, trx, 7_000_000n))

        assert.deepStrictEqual(yield* walletBalances(tenant, first), [
          { assetId: eth, available: (10n ** 18n - 10n ** 15n).toString(), frozen: "0" },
          { assetId: usdt, available: (2n ** 200n).toString(), frozen: "0" }
        ])
        const user = yield* get(tenant, "/v1/users/alice/balances")
        assert.strictEqual(user.status, 200)
        assert.deepStrictEqual(user.json, {
          customerRefId: "alice",
          items: [
            { assetId: eth, availableRaw: (10n ** 18n - 10n ** 15n + 5n).toString(), frozenRaw: "0" },
            { assetId: usdt, availableRaw: (2n ** 200n).toString(), frozenRaw: "0" },
            { assetId: trx, availableRaw: "7000000", frozenRaw: "0" }
          ]
        })
        // Another tenant sees neither the wallet nor the user.
        const other = yield* provisionTenant()
        assert.strictEqual((yield* get(other, `/v1/wallets/${first}/assets`)).status, 404)
        assert.strictEqual((yield* get(other, "/v1/users/alice/balances")).status, 404)
      }))
  })

  describe("entries through the service", () => {
    it.effect("the same (kind, reference) books once: AlreadyPosted, also under 20 concurrent posts", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "bob")
        const credit = yield* depositCredit(tenant.tenantId, walletId, eth, 100n, 1n)
        const results = yield* Effect.all(Array.from({ length: 20 }, () => ledger.post(credit)), { concurrency: "unbounded" })
        assert.strictEqual(results.filter((result) => result._tag === "Posted").length, 1)
        assert.isTrue(results.every((result) => result.entryId === results[0]!.entryId))
        assert.strictEqual((yield* ledger.post(credit))._tag, "AlreadyPosted")
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "99", frozen: "0" }])
        const entries = yield* sql`SELECT 1 FROM ledger_entries WHERE reference_id = ${credit.referenceId}`
        assert.lengthOf(entries, 1)
      }))

    it.effect("postMany books many entries as post would: new accounts opened, a repeat AlreadyPosted, one overdraft fails all", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const first = yield* walletFor(tenant, "mia")
        const second = yield* walletFor(tenant, "noah")
        const credits = [
          yield* depositCredit(tenant.tenantId, first, eth, 100n, 1n),
          yield* depositCredit(tenant.tenantId, second, eth, 50n),
          yield* depositCredit(tenant.tenantId, first, usdt, 7n)
        ]
        const results = yield* ledger.postMany(credits)
        assert.deepStrictEqual(results.map((result) => result._tag), ["Posted", "Posted", "Posted"])
        assert.deepStrictEqual(yield* walletBalances(tenant, first), [
          { assetId: eth, available: "99", frozen: "0" },
          { assetId: usdt, available: "7", frozen: "0" }
        ])
        assert.deepStrictEqual(yield* walletBalances(tenant, second), [{ assetId: eth, available: "50", frozen: "0" }])

        // Decisions.md "one entry per (kind, reference)": a repeat books nothing and names the existing entry.
        const another = yield* depositCredit(tenant.tenantId, second, eth, 5n)
        const again = yield* ledger.postMany([credits[0]!, another])
        assert.deepStrictEqual(again, [{ _tag: "AlreadyPosted", entryId: results[0]!.entryId }, again[1]!])
        assert.strictEqual(again[1]!._tag, "Posted")
        assert.deepStrictEqual(yield* walletBalances(tenant, first), [
          { assetId: eth, available: "99", frozen: "0" },
          { assetId: usdt, available: "7", frozen: "0" }
        ])

        // One entry that would overdraw: INSUFFICIENT_BALANCE and none of the batch is booked.
        const fine = yield* debit(tenant.tenantId, first, eth, 9n)
        const tooMuch = yield* debit(tenant.tenantId, second, eth, 56n)
        const error = yield* Effect.flip(ledger.postMany([fine, tooMuch]))
        assert.strictEqual(error._tag, "InsufficientBalance")
        const references = [fine.referenceId, tooMuch.referenceId]
        assert.lengthOf(yield* sql`SELECT 1 FROM ledger_entries WHERE reference_id IN ${sql.in(references)}`, 0)
        assert.deepStrictEqual(yield* walletBalances(tenant, second), [{ assetId: eth, available: "55", frozen: "0" }])
      }))

    it.effect("a debit beyond available is INSUFFICIENT_BALANCE and leaves no trace; 30 concurrent debits of 1 from 20: 20 pass", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "carol")
        yield* ledger.post(yield* depositCredit(tenant.tenantId, walletId, eth, 20n))

        const tooMuch = yield* debit(tenant.tenantId, walletId, eth, 21n)
        const error = yield* Effect.flip(ledger.post(tooMuch))
        assert.strictEqual(error._tag, "InsufficientBalance")
        assert.lengthOf(yield* sql`SELECT 1 FROM ledger_entries WHERE reference_id = ${tooMuch.referenceId}`, 0)
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "20", frozen: "0" }])

        const debits = yield* Effect.forEach(Array.from({ length: 30 }), () => debit(tenant.tenantId, walletId, eth, 1n))
        const outcomes = yield* Effect.all(debits.map((request) => Effect.result(ledger.post(request))), {
          concurrency: "unbounded"
        })
        assert.strictEqual(outcomes.filter((outcome) => outcome._tag === "Success").length, 20)
        assert.strictEqual(outcomes.filter((outcome) => outcome._tag === "Failure").length, 10)
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "0", frozen: "0" }])
      }))

    it.effect("prepare then postPreparedAfter, as one statement, books as post does: a new account opened, a repeat AlreadyPosted, an overdraft InsufficientBalance", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "frank")
        const credit = yield* depositCredit(tenant.tenantId, walletId, eth, 30n)
        // No transaction around it: the statement is its own.
        const inOneTransaction = (request: EntryRequest) =>
          Effect.flatMap(ledger.prepare(request), (prepared) =>
            Effect.map(ledger.postPreparedAfter(prepared, sql`first AS MATERIALIZED (SELECT 1 AS one)`), (written) => {
              assert.deepStrictEqual(written.first, { one: 1 })
              return written.results[0]!
            }))
        // The wallet's account does not exist before: prepare opens it, postPreparedAfter books on it.
        assert.strictEqual((yield* inOneTransaction(credit))._tag, "Posted")
        assert.strictEqual((yield* inOneTransaction(credit))._tag, "AlreadyPosted")
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "30", frozen: "0" }])

        const tooMuch = yield* debit(tenant.tenantId, walletId, eth, 31n)
        const error = yield* Effect.flip(inOneTransaction(tooMuch))
        assert.strictEqual(error._tag, "InsufficientBalance")
        assert.lengthOf(yield* sql`SELECT 1 FROM ledger_entries WHERE reference_id = ${tooMuch.referenceId}`, 0)
        assert.strictEqual((yield* inOneTransaction(yield* debit(tenant.tenantId, walletId, eth, 30n)))._tag, "Posted")
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "0", frozen: "0" }])
      }))

    it.effect("an account opened by a transaction that rolled back is not remembered: the next posting opens it again", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "gina")
        const credit = yield* depositCredit(tenant.tenantId, walletId, usdt, 5n)
        // The account is opened and posted to, then the transaction fails: both are gone.
        const failed = yield* Effect.exit(sql.withTransaction(Effect.andThen(ledger.post(credit), Effect.fail("abort" as const))))
        assert.isTrue(Exit.isFailure(failed))
        assert.lengthOf(yield* sql`SELECT 1 FROM ledger_accounts WHERE wallet_id = ${walletId} AND asset_id = ${usdt}`, 0)
        // Had the rolled-back id been remembered, this posting would name an account that does not exist (a defect).
        assert.strictEqual((yield* ledger.post(credit))._tag, "Posted")
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: usdt, available: "5", frozen: "0" }])
      }))

    it.effect("postPreparedAfter writes the entry only when the query before it answers a row, and answers that row; the caller's own errors come back as SqlError", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "hugo")
        const guarded = (request: EntryRequest, answers: boolean) =>
          Effect.flatMap(
            ledger.prepare(request),
            (prepared) =>
              ledger.postPreparedAfter(prepared, sql`first AS (SELECT 'held' AS word, 7 AS n WHERE ${answers})`)
          )
        const credit = yield* depositCredit(tenant.tenantId, walletId, eth, 9n)
        const none = yield* guarded(credit, false)
        assert.isUndefined(none.first)
        assert.deepStrictEqual(none.results, [])
        assert.lengthOf(yield* sql`SELECT 1 FROM ledger_entries WHERE reference_id = ${credit.referenceId}`, 0)

        // A refusal the caller's part raises (here a division by zero) is the caller's to read, and nothing is booked.
        const failed = yield* ledger.prepare(credit).pipe(
          Effect.flatMap((prepared) => ledger.postPreparedAfter(prepared, sql`first AS (SELECT 1 / 0 AS n)`)),
          Effect.flip
        )
        assert.strictEqual(failed._tag, "SqlError")
        assert.lengthOf(yield* sql`SELECT 1 FROM ledger_entries WHERE reference_id = ${credit.referenceId}`, 0)

        const held = yield* guarded(credit, true)
        assert.deepStrictEqual(held.first, { word: "held", n: 7 })
        assert.strictEqual(held.results[0]?._tag, "Posted")
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "9", frozen: "0" }])
      }))

    it.effect("40 concurrent transfers in both directions between two wallets all book: accounts lock in one order", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const tenant = yield* provisionTenant()
        const [left, right] = [yield* walletFor(tenant, "lena"), yield* walletFor(tenant, "rudi")]
        yield* ledger.post(yield* depositCredit(tenant.tenantId, left, eth, 1000n))
        yield* ledger.post(yield* depositCredit(tenant.tenantId, right, eth, 1000n))
        // Each entry names its accounts in the opposite order to the one before: were the balance rows locked in the
        // order given, two of them would wait on each other and PostgreSQL would abort one as a deadlock (a defect).
        const transfers = yield* Effect.forEach(Array.from({ length: 40 }, (_, index) => index), (index) =>
          Effect.map(uuidV7, (referenceId): EntryRequest => {
            const [from, to] = index % 2 === 0 ? [left, right] : [right, left]
            return {
              tenantId: tenant.tenantId,
              kind: "TRANSFER",
              referenceId,
              postings: [available(wallet(from), eth, -1n), available(wallet(to), eth, 1n)]
            }
          }))
        const results = yield* Effect.all(transfers.map((request) => ledger.post(request)), { concurrency: "unbounded" })
        assert.isTrue(results.every((result) => result._tag === "Posted"))
        assert.deepStrictEqual(yield* walletBalances(tenant, left), [{ assetId: eth, available: "1000", frozen: "0" }])
        assert.deepStrictEqual(yield* walletBalances(tenant, right), [{ assetId: eth, available: "1000", frozen: "0" }])
      }))

    it.effect("freezing moves available to frozen and back; releasing more than is frozen is a defect", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "dave")
        yield* ledger.post(yield* depositCredit(tenant.tenantId, walletId, eth, 50n))
        const withdrawalId = yield* uuidV7
        yield* ledger.post({
          tenantId: tenant.tenantId,
          kind: "WITHDRAWAL_FREEZE",
          referenceId: withdrawalId,
          postings: [available(wallet(walletId), eth, -30n), frozen(wallet(walletId), eth, 30n)]
        })
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "20", frozen: "30" }])
        const user = yield* get(tenant, "/v1/users/dave/balances")
        assert.deepStrictEqual(user.json.items, [{ assetId: eth, availableRaw: "20", frozenRaw: "30" }])

        // Freezing beyond available is the same INSUFFICIENT_BALANCE as spending it.
        const overFreeze = yield* Effect.flip(ledger.post({
          tenantId: tenant.tenantId,
          kind: "TRANSFER_FREEZE",
          referenceId: yield* uuidV7,
          postings: [available(wallet(walletId), eth, -21n), frozen(wallet(walletId), eth, 21n)]
        }))
        assert.strictEqual(overFreeze._tag, "InsufficientBalance")

        const overRelease = yield* Effect.exit(ledger.post({
          tenantId: tenant.tenantId,
          kind: "WITHDRAWAL_RELEASE",
          referenceId: withdrawalId,
          postings: [frozen(wallet(walletId), eth, -31n), available(wallet(walletId), eth, 31n)]
        }))
        assert.include(defectOf(overRelease), "ledger_accounts_frozen_check")
        // Settling consumes the frozen funds: the amount leaves custody, the fee goes to the tenant.
        yield* ledger.post({
          tenantId: tenant.tenantId,
          kind: "WITHDRAWAL_SETTLE",
          referenceId: withdrawalId,
          postings: [frozen(wallet(walletId), eth, -30n), available(chain, eth, 28n), available(fees, eth, 2n)]
        })
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "20", frozen: "0" }])
      }))

    it.effect("a deposit reversal may overdraw: available shows 0 (raw amounts are unsigned) and the debt as overdrawn; debits then fail until credits cover it", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "erin")
        const credit = yield* depositCredit(tenant.tenantId, walletId, eth, 100n)
        yield* ledger.post(credit)
        yield* ledger.post(yield* debit(tenant.tenantId, walletId, eth, 80n))
        yield* ledger.post({
          tenantId: tenant.tenantId,
          kind: "DEPOSIT_REVERSAL",
          referenceId: credit.referenceId,
          postings: [available(wallet(walletId), eth, -100n), available(chain, eth, 100n)]
        })
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "0", frozen: "0", overdrawn: "80" }])
        const blocked = yield* Effect.flip(ledger.post(yield* debit(tenant.tenantId, walletId, eth, 1n)))
        assert.strictEqual(blocked._tag, "InsufficientBalance")
        // A credit is always accepted, even one that leaves the balance negative.
        yield* ledger.post(yield* depositCredit(tenant.tenantId, walletId, eth, 50n))
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "0", frozen: "0", overdrawn: "30" }])
        const user = yield* get(tenant, "/v1/users/erin/balances")
        assert.deepStrictEqual(user.json.items, [{ assetId: eth, availableRaw: "0", frozenRaw: "0", overdrawnRaw: "30" }])
        // Covered again: the field is gone, available counts up from 0.
        yield* ledger.post(yield* depositCredit(tenant.tenantId, walletId, eth, 45n))
        assert.deepStrictEqual(yield* walletBalances(tenant, walletId), [{ assetId: eth, available: "15", frozen: "0" }])
      }))

    it.effect("malformed entries are defects before they reach the database", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "frank")
        const base = { tenantId: tenant.tenantId, kind: "TRANSFER" as const, referenceId: yield* uuidV7 }
        const cases: Array<[ReadonlyArray<Posting>, string]> = [
          [[available(wallet(walletId), eth, 5n), available(chain, eth, -4n)], "does not balance"],
          [[available(wallet(walletId), eth, 5n)], "at least two postings"],
          [[available(wallet(walletId), eth, 0n), available(chain, eth, 0n)], "zero posting"],
          [[available(chain, eth, -2n), available(wallet(walletId), eth, 1n), available(wallet(walletId), eth, 1n)], "twice"],
          [[available(chain, eth, -1n), available(wallet(walletId), usdt, 1n)], "does not balance"]
        ]
        for (const [postings, message] of cases) {
          assert.throws(() => assertBalanced({ ...base, postings }), message)
          assert.include(defectOf(yield* Effect.exit(ledger.post({ ...base, postings }))), message)
        }
      }))
  })

  describe("the database enforces the invariants itself (raw SQL, no service)", () => {
    /** An account of this tenant opened through the service (a credit), and its id. */
    const fundedAccount = (tenant: TestTenant, walletId: string) =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const sql = yield* SqlClient.SqlClient
        yield* ledger.post(yield* depositCredit(tenant.tenantId, walletId, eth, 10n))
        const rows = yield* sql<{ id: string; chain_id: string }>`
          SELECT w.id, c.id AS chain_id FROM ledger_accounts w, ledger_accounts c
          WHERE w.wallet_id = ${walletId} AND w.asset_id = ${eth}
            AND c.tenant_id = ${tenant.tenantId} AND c.kind = 'CHAIN' AND c.asset_id = ${eth}`
        return rows[0]!
      })

    const insertEntry = (tenantId: string, kind = "TRANSFER") =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const id = yield* uuidV7
        yield* sql`INSERT INTO ledger_entries (id, tenant_id, kind, reference_id, created_at)
          VALUES (${id}, ${tenantId}, ${kind}, ${yield* uuidV7}, now())`
        return id
      })

    it.effect("entries must balance, have two postings, and postings need an entry of the same tenant", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "gina")
        const account = yield* fundedAccount(tenant, walletId)

        assert.include(
          yield* refusal(Effect.gen(function*() {
            const entry = yield* insertEntry(tenant.tenantId)
            yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
              (${entry}, ${account.id}, 'AVAILABLE', 5), (${entry}, ${account.chain_id}, 'AVAILABLE', -4)`
          })),
          "does not balance"
        )
        assert.include(
          yield* refusal(Effect.gen(function*() {
            const entry = yield* insertEntry(tenant.tenantId)
            yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
              (${entry}, ${account.id}, 'AVAILABLE', 5), (${entry}, ${account.id}, 'FROZEN', -5)`
          })),
          "frozen_check"
        )
        assert.include(yield* refusal(insertEntry(tenant.tenantId)), "has no postings")
        assert.include(
          yield* refusal(Effect.gen(function*() {
            const entry = yield* insertEntry(tenant.tenantId)
            yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
              (${entry}, ${account.id}, 'AVAILABLE', -11), (${entry}, ${account.chain_id}, 'AVAILABLE', 11)`
          })),
          "insufficient available balance"
        )
        const other = yield* provisionTenant()
        assert.include(
          yield* refusal(Effect.gen(function*() {
            const entry = yield* insertEntry(other.tenantId)
            yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
              (${entry}, ${account.chain_id}, 'AVAILABLE', -1), (${entry}, ${account.id}, 'AVAILABLE', 1)`
          })),
          "of tenant"
        )
      }))

    it.effect("balances change only through postings; the journal is append-only; accounts open at zero, in their family", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const walletId = yield* walletFor(tenant, "hank")
        const account = yield* fundedAccount(tenant, walletId)
        assert.include(
          yield* refusal(sql`UPDATE ledger_accounts SET available = available + 1000 WHERE id = ${account.id}`),
          "change only through ledger_postings"
        )
        assert.include(yield* refusal(sql`DELETE FROM ledger_accounts WHERE id = ${account.id}`), "never deleted")
        assert.include(yield* refusal(sql`UPDATE ledger_postings SET amount = amount * 2`), "append-only")
        assert.include(yield* refusal(sql`DELETE FROM ledger_postings`), "append-only")
        assert.include(yield* refusal(sql`DELETE FROM ledger_entries`), "append-only")
        assert.include(yield* refusal(sql`TRUNCATE ledger_postings CASCADE`), "append-only")
        assert.include(
          yield* refusal(sql`INSERT INTO ledger_accounts (tenant_id, kind, wallet_id, asset_id, available, created_at)
            VALUES (${tenant.tenantId}, 'WALLET', ${walletId}, ${usdt}, 1000, now())`),
          "opens with a zero balance"
        )
        assert.include(
          yield* refusal(sql`INSERT INTO ledger_accounts (tenant_id, kind, wallet_id, asset_id, created_at)
            VALUES (${tenant.tenantId}, 'WALLET', ${walletId}, ${trx}, now())`),
          "chain family"
        )
        const other = yield* provisionTenant()
        assert.include(
          yield* refusal(sql`INSERT INTO ledger_accounts (tenant_id, kind, wallet_id, asset_id, created_at)
            VALUES (${other.tenantId}, 'WALLET', ${walletId}, ${eth}, now())`),
          "chain family"
        )
      }))

    it.effect("after everything above: every balance is the sum of its postings, and each tenant's asset sums to zero", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const drift = yield* sql`
          SELECT a.id FROM ledger_accounts a
          LEFT JOIN ledger_postings p ON p.account_id = a.id
          GROUP BY a.id, a.available, a.frozen
          HAVING a.available <> coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'AVAILABLE'), 0)
              OR a.frozen <> coalesce(sum(p.amount) FILTER (WHERE p.bucket = 'FROZEN'), 0)`
        assert.lengthOf(drift, 0)
        const unbalanced = yield* sql`
          SELECT tenant_id, asset_id FROM ledger_accounts GROUP BY tenant_id, asset_id
          HAVING sum(available + frozen) <> 0`
        assert.lengthOf(unbalanced, 0)
        const [count] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_postings`
        assert.isAbove(count!.n, 20, "the tests above booked entries")
      }))
  })
})
