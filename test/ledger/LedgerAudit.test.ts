/**
 * The ledger audit (src/ledger/LedgerAudit.ts, docs/ledger.md "Audit"): a clean database after real activity on the
 * simulated chain passes, and each kind of discrepancy, planted with raw SQL that bypasses the service (as a
 * superuser, `session_replication_role = replica` switches the journal's triggers off), is caught, then removed
 * again so that every test starts from a sound ledger.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { auditLedger, type CheckName, type LedgerAuditReport, summaryLine } from "../../src/ledger/LedgerAudit.ts"
import { fund, settings } from "../support/Funds.ts"
import { makeTestAppLayer, opsClient, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { call, devnet, mine, waitFor, walletOf, withdraw } from "../withdrawals/WithdrawalHelpers.ts"
import { runLedgerCheck } from "./LedgerCheck.ts"

const eth = "ETH_SEPOLIA_ETH"
const bnb = "BSC_TESTNET_BNB"
const ethTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
const blockedTo = "0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359"
const milli = 10n ** 15n

const found = (report: LedgerAuditReport, check: CheckName) =>
  report.checks.find((result) => result.check === check)!.discrepancies.map((discrepancy) => discrepancy.message)

const assertClean = (report: LedgerAuditReport) => {
  assert.deepStrictEqual(report.checks.flatMap((check) => check.discrepancies.map((d) => d.message)), [])
  assert.isTrue(report.ok)
  assert.strictEqual(summaryLine(report), `ledger ok: ${report.accounts} accounts, ${report.entries} entries`)
}

/** `check` found exactly one discrepancy, mentioning every one of `words`. */
const assertCaught = (report: LedgerAuditReport, check: CheckName, ...words: ReadonlyArray<string>) => {
  assert.isFalse(report.ok)
  const messages = found(report, check)
  assert.lengthOf(messages, 1, `${check}: ${messages.join(" | ")}`)
  for (const word of words) assert.include(messages[0], word)
  return messages[0]!
}

/** `check` found exactly one discrepancy, mentioning every one of `words`; it is the report's first. */
const assertCaughtFirst = (report: LedgerAuditReport, check: CheckName, ...words: ReadonlyArray<string>) => {
  const message = assertCaught(report, check, ...words)
  assert.strictEqual(report.firstDiscrepancy?.check, check, summaryLine(report))
  assert.strictEqual(summaryLine(report), `ledger discrepancy (${check}): ${message}`)
}

/** Raw SQL with the journal's triggers off (append-only, balance guard, posting application, entry balance). */
const asReplica = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.andThen(sql`SET LOCAL session_replication_role = replica`, effect))
  }).pipe(Effect.orDie)

/** Sets every balance to the sum of its postings, as ledger_apply_posting would have. Run under asReplica. */
const recomputeBalances = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE ledger_accounts a SET
    available = coalesce((SELECT sum(amount) FROM ledger_postings p WHERE p.account_id = a.id AND p.bucket = 'AVAILABLE'), 0),
    frozen = coalesce((SELECT sum(amount) FROM ledger_postings p WHERE p.account_id = a.id AND p.bucket = 'FROZEN'), 0)`
})

/**
 * Deletes the entry `kind` of `referenceId` and its postings, balances following, as if it had never been booked;
 * returns the effect that puts it back.
 */
const removeEntry = (referenceId: string, kind: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [entry] = yield* sql<Record<string, unknown>>`
      SELECT * FROM ledger_entries WHERE reference_id = ${referenceId} AND kind = ${kind}`
    assert.isDefined(entry, `no ${kind} entry for ${referenceId}`)
    const postings = yield* sql<Record<string, unknown>>`
      SELECT entry_id, account_id, bucket, amount::text AS amount FROM ledger_postings WHERE entry_id = ${entry!.id as string}`
    yield* asReplica(Effect.gen(function*() {
      yield* sql`DELETE FROM ledger_postings WHERE entry_id = ${entry!.id as string}`
      yield* sql`DELETE FROM ledger_entries WHERE id = ${entry!.id as string}`
      yield* recomputeBalances
    }))
    return asReplica(Effect.gen(function*() {
      yield* sql`INSERT INTO ledger_entries ${sql.insert(entry!)}`
      for (const posting of postings) yield* sql`INSERT INTO ledger_postings ${sql.insert(posting)}`
      yield* recomputeBalances
    }))
  }).pipe(Effect.orDie)

const setStatus = (transactionId: string, status: string, subStatus: string | null) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE transactions SET status = ${status}, sub_status = ${subStatus} WHERE id = ${transactionId}`
  }).pipe(Effect.orDie)

const accountOf = (walletId: string, assetId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ id: string }>`
      SELECT id::text AS id FROM ledger_accounts WHERE wallet_id = ${walletId} AND asset_id = ${assetId}`
    return row!.id
  }).pipe(Effect.orDie)

/** Deposits `amount` to `address` on the simulated chain and mines until it is credited (or `blocks`). */
const deposit = (networkKey: string, address: string, assetId: string, amount: bigint, blocks: number) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    const { txHash } = yield* ops.devnet.transfer({ params: { networkKey }, payload: { to: address, assetId, amountRaw: amount } })
    yield* mine(networkKey, blocks)
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ id: string; status: string }>`
      SELECT id, status FROM transactions WHERE kind = 'DEPOSIT' AND tx_hash = ${txHash}`
    return row!
  }).pipe(Effect.orDie)

const transfer = (tenant: TestTenant, from: string, to: string, amount: bigint, externalTxId: string) =>
  Effect.map(
    call(tenant, "POST", "/v1/transactions", {
      assetId: eth,
      source: { type: "WALLET", id: from },
      destination: { type: "WALLET", id: to },
      amountRaw: amount.toString(),
      externalTxId
    }),
    (response) => {
      assert.strictEqual(response.status, 202, response.text)
      return response.json as { transactionId: string; status: string }
    }
  )

/** What the clean run left, for the tests that plant discrepancies in it. */
interface Activity {
  readonly tenant: TestTenant
  readonly alice: string
  readonly bob: string
  readonly credited: string
  readonly reversed: string
  readonly transferred: string
  readonly pendingTransfer: string
  readonly completedWithdrawal: string
  readonly cancelledWithdrawal: string
}
let activity: Activity | undefined
const done = () => {
  assert.isDefined(activity, "the clean-run test sets the activity up first")
  return activity!
}

layer(makeTestAppLayer(), { excludeTestServices: true })("ledger audit", (it) => {
  describe("a sound ledger", () => {
    it.effect("deposits (credited, below minimum, credited by the operator, reversed by a reorg), transfers (direct, approved, rejected, pending) and withdrawals (completed, failed, blocked, cancelled, pending) on the simulated chain: every check passes", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        yield* settings(tenant, {
          depositFees: { [eth]: milli.toString() },
          internalTransferFees: { [eth]: (milli / 10n).toString() },
          withdrawFees: { [eth]: milli.toString() },
          transferApprovalAbove: { [eth]: (100n * milli).toString() },
          withdrawalApprovalAbove: { [eth]: (200n * milli).toString() }
        })
        const alice = yield* walletOf(tenant, "alice", "ETH_SEPOLIA")
        const bob = yield* walletOf(tenant, "bob", "ETH_SEPOLIA")
        const carol = yield* walletOf(tenant, "carol", "BSC_TESTNET")

        // Credited at the 12th confirmation, net of the deposit fee; in the same blocks, one below minDeposit (not
        // credited) and one held for review (a frozen address watch) that the operator then credits.
        const sql = yield* SqlClient.SqlClient
        const dave = yield* walletOf(tenant, "dave", "ETH_SEPOLIA")
        yield* sql`UPDATE wallet_addresses SET watch_status = 'FROZEN' WHERE wallet_id = ${dave.walletId}`.pipe(Effect.orDie)
        yield* ops.devnet.transfer({ params: { networkKey: "ETH_SEPOLIA" }, payload: { to: bob.address, assetId: eth, amountRaw: milli / 2n } })
          .pipe(Effect.orDie)
        yield* ops.devnet.transfer({ params: { networkKey: "ETH_SEPOLIA" }, payload: { to: dave.address, assetId: eth, amountRaw: 30n * milli } })
          .pipe(Effect.orDie)
        const credited = yield* deposit("ETH_SEPOLIA", alice.address, eth, 2_000n * milli, 12)
        assert.strictEqual(credited.status, "COMPLETED")
        const [held] = yield* sql<{ id: string; sub_status: string }>`
          SELECT id, sub_status FROM transactions WHERE kind = 'DEPOSIT' AND destination_wallet_id = ${dave.walletId}`.pipe(Effect.orDie)
        assert.strictEqual(held!.sub_status, "MANUAL_REVIEW")
        yield* ops.manual.creditDeposit({ params: { tenantId: tenant.tenantId, id: held!.id } }).pipe(Effect.orDie)
        const [belowMin] = yield* sql<{ sub_status: string }>`
          SELECT sub_status FROM transactions WHERE kind = 'DEPOSIT' AND destination_wallet_id = ${bob.walletId}`.pipe(Effect.orDie)
        assert.strictEqual(belowMin!.sub_status, "BELOW_MIN_DEPOSIT")
        // Credited after 15 blocks, then reversed by a reorganization of them.
        const reversed = yield* deposit("BSC_TESTNET", carol.address, bnb, 50n * milli, 15)
        assert.strictEqual(reversed.status, "COMPLETED")
        yield* ops.devnet.reorg({ params: { networkKey: "BSC_TESTNET" }, payload: { depth: 15 } }).pipe(Effect.orDie)

        const transferred = yield* transfer(tenant, alice.walletId, bob.walletId, 10n * milli, "direct")
        assert.strictEqual(transferred.status, "COMPLETED")
        const approved = yield* transfer(tenant, alice.walletId, bob.walletId, 150n * milli, "approved")
        yield* ops.manual.approve({ params: { tenantId: tenant.tenantId, id: approved.transactionId } }).pipe(Effect.orDie)
        const rejected = yield* transfer(tenant, alice.walletId, bob.walletId, 150n * milli, "rejected")
        yield* ops.manual.reject({ params: { tenantId: tenant.tenantId, id: rejected.transactionId } }).pipe(Effect.orDie)
        const pendingTransfer = yield* transfer(tenant, alice.walletId, bob.walletId, 120n * milli, "pending")
        assert.strictEqual(pendingTransfer.status, "PENDING_AUTHORIZATION")

        // Released: a broadcast the network rejects (FAILED), a destination the tenant blocked (REJECTED).
        yield* devnet("ETH_SEPOLIA", { broadcastFails: true })
        const failed = yield* withdraw(tenant, alice.walletId, eth, ethTo, 10n * milli, "w-failed")
        yield* waitFor(tenant, failed.json.transactionId, "FAILED", "BROADCAST_FAILED")
        yield* devnet("ETH_SEPOLIA", { broadcastFails: false })
        yield* settings(tenant, { blockedAddresses: [blockedTo] })
        const blocked = yield* withdraw(tenant, alice.walletId, eth, blockedTo, 10n * milli, "w-blocked")
        yield* waitFor(tenant, blocked.json.transactionId, "REJECTED", "BLOCKED_BY_POLICY")

        const sent = yield* withdraw(tenant, alice.walletId, eth, ethTo, 10n * milli, "w-completed")
        assert.strictEqual(sent.status, 202, sent.text)
        yield* waitFor(tenant, sent.json.transactionId, "CONFIRMING")
        yield* mine("ETH_SEPOLIA", 12)
        yield* waitFor(tenant, sent.json.transactionId, "COMPLETED")
        const cancelled = yield* withdraw(tenant, alice.walletId, eth, ethTo, 300n * milli, "w-cancelled")
        yield* waitFor(tenant, cancelled.json.transactionId, "PENDING_AUTHORIZATION")
        const cancel = yield* call(tenant, "POST", `/v1/transactions/${cancelled.json.transactionId}/cancel`)
        assert.strictEqual(cancel.status, 200, cancel.text)
        const pendingWithdrawal = yield* withdraw(tenant, alice.walletId, eth, ethTo, 250n * milli, "w-pending")
        yield* waitFor(tenant, pendingWithdrawal.json.transactionId, "PENDING_AUTHORIZATION")

        const report = yield* auditLedger
        assertClean(report)
        assert.deepStrictEqual(report.checks.map((check) => check.check), [
          "entriesBalance",
          "balancesMatchJournal",
          "booksClose",
          "depositsCreditedOnce",
          "frozenMatchesOpen",
          "transactionsBooked",
          "dailyLimitTotals",
          "sendFeesBooked"
        ])
        const [counts] = yield* sql<{ accounts: number; entries: number }>`
          SELECT (SELECT count(*) FROM ledger_accounts)::int AS accounts, (SELECT count(*) FROM ledger_entries)::int AS entries`
        assert.deepStrictEqual([report.accounts, report.entries], [counts!.accounts, counts!.entries])
        // Every kind of booking the service makes was exercised: a pass here is a pass over each of them.
        const kinds = yield* sql<{ kind: string }>`SELECT DISTINCT kind FROM ledger_entries ORDER BY kind`
        assert.deepStrictEqual(kinds.map((row) => row.kind), [
          "DEPOSIT_CREDIT",
          "DEPOSIT_REVERSAL",
          "MANUAL_DEPOSIT_CREDIT",
          "NETWORK_FEE",
          "TRANSFER",
          "TRANSFER_FREEZE",
          "TRANSFER_RELEASE",
          "TRANSFER_SETTLE",
          "WITHDRAWAL_FREEZE",
          "WITHDRAWAL_RELEASE",
          "WITHDRAWAL_SETTLE"
        ])
        const frozenWallets = report.checks.find((check) => check.check === "frozenMatchesOpen")!
        assert.isAbove(frozenWallets.examined, 0)

        activity = {
          tenant,
          alice: alice.walletId,
          bob: bob.walletId,
          credited: credited.id,
          reversed: reversed.id,
          transferred: transferred.transactionId,
          pendingTransfer: pendingTransfer.transactionId,
          completedWithdrawal: sent.json.transactionId,
          cancelledWithdrawal: cancelled.json.transactionId
        }
      }), { timeout: 120_000 })

    it.effect("npm run ledger:check on DATABASE_URL prints each check and `ledger ok: N accounts, M entries`, exit 0", () =>
      Effect.gen(function*() {
        done()
        const report = yield* auditLedger
        const run = yield* runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL! })
        assert.strictEqual(run.code, 0, run.stdout + run.stderr)
        assert.strictEqual(run.lastLine, `ledger ok: ${report.accounts} accounts, ${report.entries} entries`)
        assert.include(run.stdout, "REPEATABLE READ, READ ONLY")
        for (const check of report.checks) assert.include(run.stdout, `ok   ${check.check}: ${check.examined} ${check.unit}`)
        assert.notInclude(run.stdout + run.stderr, new URL(process.env.DATABASE_URL!).password || "no password")
      }))

    it.effect("beside a busy service: audits running while transfers, approvals and withdrawals commit all pass", () =>
      Effect.gen(function*() {
        const { tenant, alice, bob } = done()
        const ops = yield* opsClient
        const work = Effect.forEach(Array.from({ length: 12 }, (_, index) => index), (index) =>
          Effect.gen(function*() {
            if (index % 3 === 0) {
              const pending = yield* transfer(tenant, alice, bob, 110n * milli, `busy-${index}`)
              yield* ops.manual.approve({ params: { tenantId: tenant.tenantId, id: pending.transactionId } }).pipe(Effect.orDie)
            } else if (index % 3 === 1) {
              yield* transfer(tenant, bob, alice, milli, `busy-${index}`)
            } else {
              const sent = yield* withdraw(tenant, alice, eth, ethTo, 6n * milli, `busy-${index}`)
              assert.strictEqual(sent.status, 202, sent.text)
            }
          }), { concurrency: 3 })
        const audits: Array<LedgerAuditReport> = []
        const auditing = Effect.gen(function*() {
          for (;;) {
            audits.push(yield* auditLedger)
            yield* Effect.sleep("20 millis")
          }
        })
        yield* Effect.raceFirst(work, auditing)
        audits.push(yield* auditLedger)
        assert.isAtLeast(audits.length, 2)
        for (const report of audits) assertClean(report)
      }), { timeout: 120_000 })

    it.effect("one snapshot: a booking committed while the audit runs is not seen by any of its checks", () =>
      Effect.gen(function*() {
        const { tenant, bob } = done()
        const sql = yield* SqlClient.SqlClient
        const before = yield* auditLedger
        const locked = yield* Deferred.make<void>()
        const go = yield* Deferred.make<void>()
        // Holds every account until told: the audit takes its snapshot with its first statement, then waits here.
        const writer = yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`LOCK TABLE ledger_accounts IN ACCESS EXCLUSIVE MODE`
          yield* Deferred.succeed(locked, undefined)
          yield* Deferred.await(go)
          // A credit with no deposit behind it: a discrepancy to any audit that sees it.
          yield* fund(tenant, bob, eth, 3n)
        })).pipe(Effect.orDie, Effect.forkChild)
        yield* Deferred.await(locked)
        const audit = yield* Effect.forkChild(auditLedger)
        let waiting = 0
        for (let attempt = 0; attempt < 300 && waiting === 0; attempt++) {
          yield* Effect.sleep("20 millis")
          const [row] = yield* sql<{ n: number }>`
            SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%AS accounts%'`
          waiting = row!.n
        }
        assert.strictEqual(waiting, 1, "the audit should be waiting for the accounts lock")
        yield* Deferred.succeed(go, undefined)
        yield* Fiber.join(writer)
        const report = yield* Fiber.join(audit)
        assertClean(report)
        assert.deepStrictEqual([report.accounts, report.entries, report.postings], [before.accounts, before.entries, before.postings])

        const after = yield* auditLedger
        assert.strictEqual(after.entries, before.entries + 1)
        assert.include(found(after, "transactionsBooked")[0], "which is no transaction")
        const [orphan] = yield* sql<{ reference_id: string }>`
          SELECT reference_id FROM ledger_entries e WHERE NOT EXISTS (SELECT 1 FROM transactions t WHERE t.id = e.reference_id)`
        yield* removeEntry(orphan!.reference_id, "DEPOSIT_CREDIT")
        assertClean(yield* auditLedger)
      }))

    it.effect("inside a caller's transaction the audit refuses (a savepoint is no snapshot of its own)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const exit = yield* Effect.exit(sql.withTransaction(auditLedger))
        assert.isTrue(Exit.isFailure(exit))
        const failure = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isFailReason)?.error : undefined
        assert.strictEqual(failure?._tag, "LedgerAuditError")
        assert.include(failure?.message, "outside any transaction")
      }))
  })

  describe("planted discrepancies are caught", () => {
    it.effect("docs/ledger.md: a balance is the sum of its postings; a balance changed behind the journal is caught, and the CLI exits 1 with it as its last line", () =>
      Effect.gen(function*() {
        const { alice } = done()
        const sql = yield* SqlClient.SqlClient
        const account = yield* accountOf(alice, eth)
        yield* asReplica(sql`UPDATE ledger_accounts SET available = available + 7 WHERE id = ${account}`)
        const report = yield* auditLedger
        assertCaughtFirst(report, "balancesMatchJournal", `account ${account}`, "its postings sum to")
        assert.lengthOf(found(report, "booksClose"), 1, "the tenant's ETH no longer sums to zero either")
        const run = yield* runLedgerCheck({ DATABASE_URL: process.env.DATABASE_URL! })
        assert.strictEqual(run.code, 1, run.stdout + run.stderr)
        assert.strictEqual(run.lastLine, summaryLine(report))
        assert.include(run.stdout, "FAIL balancesMatchJournal")

        yield* asReplica(sql`UPDATE ledger_accounts SET available = available - 7 WHERE id = ${account}`)
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/ledger.md: every entry balances per asset; an entry that does not sum to zero is caught", () =>
      Effect.gen(function*() {
        const { transferred } = done()
        const sql = yield* SqlClient.SqlClient
        const [entry] = yield* sql<{ id: string; tenant_id: string }>`
          SELECT id, tenant_id FROM ledger_entries WHERE reference_id = ${transferred} AND kind = 'TRANSFER'`
        const [fees] = yield* sql<{ id: string }>`
          SELECT id::text AS id FROM ledger_accounts WHERE tenant_id = ${entry!.tenant_id} AND kind = 'FEES' AND asset_id = ${eth}`
        // One unit more to the fees, applied to the balance too: only the entry's sum is wrong.
        yield* asReplica(Effect.gen(function*() {
          yield* sql`DELETE FROM ledger_postings WHERE entry_id = ${entry!.id} AND account_id = ${fees!.id}`
          yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount)
            VALUES (${entry!.id}, ${fees!.id}, 'AVAILABLE', ${(milli / 10n + 1n).toString()})`
          yield* recomputeBalances
        }))
        const report = yield* auditLedger
        assertCaughtFirst(report, "entriesBalance", `entry ${entry!.id}`, `${eth} sums to 1`)
        assert.lengthOf(found(report, "transactionsBooked"), 1, "its postings also differ from the transfer's")

        yield* asReplica(Effect.gen(function*() {
          yield* sql`DELETE FROM ledger_postings WHERE entry_id = ${entry!.id} AND account_id = ${fees!.id}`
          yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount)
            VALUES (${entry!.id}, ${fees!.id}, 'AVAILABLE', ${(milli / 10n).toString()})`
          yield* recomputeBalances
        }))
        assertClean(yield* auditLedger)
      }))

    it.effect("decisions.md: a deposit is credited once; a second (manual) credit of a credited deposit is caught", () =>
      Effect.gen(function*() {
        const { tenant, alice, credited } = done()
        const ledger = yield* Ledger
        // Nothing in the database stops this: a balanced entry of another kind for the same deposit.
        yield* ledger.post({
          tenantId: tenant.tenantId,
          kind: "MANUAL_DEPOSIT_CREDIT",
          referenceId: credited,
          postings: [
            { account: { kind: "CHAIN" }, assetId: eth, bucket: "AVAILABLE", amount: -2_000n * milli },
            { account: { kind: "WALLET", walletId: alice }, assetId: eth, bucket: "AVAILABLE", amount: 1_999n * milli },
            { account: { kind: "FEES" }, assetId: eth, bucket: "AVAILABLE", amount: milli }
          ]
        })
        const report = yield* auditLedger
        assertCaughtFirst(report, "depositsCreditedOnce", `deposit ${credited} is credited more than once`)
        assert.include(found(report, "transactionsBooked")[0], "unexpected MANUAL_DEPOSIT_CREDIT")

        yield* removeEntry(credited, "MANUAL_DEPOSIT_CREDIT")
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/transfers.md: frozen is what open withdrawals and pending transfers reserve; a transfer rejected without its release is caught", () =>
      Effect.gen(function*() {
        const { alice, pendingTransfer } = done()
        yield* setStatus(pendingTransfer, "REJECTED", "REJECTED_BY_OPERATOR")
        const report = yield* auditLedger
        assertCaughtFirst(report, "frozenMatchesOpen", `wallet ${alice}`, "reserve")
        assert.include(found(report, "transactionsBooked")[0], `INTERNAL_TRANSFER ${pendingTransfer} (REJECTED/REJECTED_BY_OPERATOR) lacks its TRANSFER_RELEASE entry`)

        yield* setStatus(pendingTransfer, "PENDING_AUTHORIZATION", null)
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/transfers.md: the daily limit's totals are what counts; a total changed behind the movements is caught", () =>
      Effect.gen(function*() {
        const { alice } = done()
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ user_id: string; day: string }>`
          SELECT d.user_id, d.day::text AS day FROM daily_spend d JOIN wallets w ON w.user_id = d.user_id
          WHERE w.id = ${alice} AND d.asset_id = ${eth}`
        const change = (delta: bigint) =>
          asReplica(sql`UPDATE daily_spend SET spent = spent + ${delta.toString()}::numeric
            WHERE user_id = ${row!.user_id} AND asset_id = ${eth} AND day = ${row!.day}::date`)
        yield* change(5n)
        const report = yield* auditLedger
        assertCaughtFirst(report, "dailyLimitTotals", `user ${row!.user_id}`, `${eth} total of ${row!.day}`, "sum to")
        yield* change(-5n)
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/transfers.md: a COMPLETED withdrawal has its settlement and network fee; one missing NETWORK_FEE is caught", () =>
      Effect.gen(function*() {
        const { completedWithdrawal } = done()
        const restore = yield* removeEntry(completedWithdrawal, "NETWORK_FEE")
        const report = yield* auditLedger
        assertCaughtFirst(report, "transactionsBooked", `WITHDRAWAL ${completedWithdrawal} (COMPLETED) lacks its NETWORK_FEE entry`)
        yield* restore
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/transfers.md: a COMPLETED withdrawal consumed its freeze; one missing WITHDRAWAL_SETTLE is caught (and its funds show frozen)", () =>
      Effect.gen(function*() {
        const { completedWithdrawal, alice } = done()
        const restore = yield* removeEntry(completedWithdrawal, "WITHDRAWAL_SETTLE")
        const report = yield* auditLedger
        assertCaughtFirst(report, "frozenMatchesOpen", `wallet ${alice}`)
        assert.deepStrictEqual(found(report, "transactionsBooked").map((message) => message.split(" (")[0]), [
          `WITHDRAWAL ${completedWithdrawal}`
        ])
        assert.include(found(report, "transactionsBooked")[0], "lacks its WITHDRAWAL_SETTLE entry")
        yield* restore
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/transfers.md: CANCELLED releases the freeze; a cancelled withdrawal without WITHDRAWAL_RELEASE is caught", () =>
      Effect.gen(function*() {
        const { cancelledWithdrawal } = done()
        const restore = yield* removeEntry(cancelledWithdrawal, "WITHDRAWAL_RELEASE")
        const report = yield* auditLedger
        assertCaughtFirst(report, "frozenMatchesOpen")
        assert.include(found(report, "transactionsBooked")[0], `WITHDRAWAL ${cancelledWithdrawal} (CANCELLED/CANCELLED_BY_USER) lacks its WITHDRAWAL_RELEASE entry`)
        yield* restore
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/deposits.md: a COMPLETED deposit without sub-status is credited; one without its credit is caught", () =>
      Effect.gen(function*() {
        const { credited } = done()
        const restore = yield* removeEntry(credited, "DEPOSIT_CREDIT")
        const report = yield* auditLedger
        assertCaught(report, "transactionsBooked", `DEPOSIT ${credited} (COMPLETED) lacks its DEPOSIT_CREDIT entry`)
        // Without the credit, what alice spent overdraws her wallet: the balance check reports that first.
        assert.strictEqual(report.firstDiscrepancy?.check, "balancesMatchJournal")
        yield* restore
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/deposits.md: a REVERSED deposit is debited back; a reversed deposit without DEPOSIT_REVERSAL is caught", () =>
      Effect.gen(function*() {
        const { reversed } = done()
        const restore = yield* removeEntry(reversed, "DEPOSIT_REVERSAL")
        const report = yield* auditLedger
        assertCaughtFirst(report, "transactionsBooked", `DEPOSIT ${reversed} (REVERSED) lacks its DEPOSIT_REVERSAL entry`)
        yield* restore
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/ledger.md: the postings are the shape of the transaction; a transfer whose recorded amount differs from what was booked is caught", () =>
      Effect.gen(function*() {
        const { transferred } = done()
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE transactions SET amount = amount + 1 WHERE id = ${transferred}`
        const report = yield* auditLedger
        assertCaughtFirst(report, "transactionsBooked", `INTERNAL_TRANSFER ${transferred} (COMPLETED): TRANSFER posts`)
        yield* sql`UPDATE transactions SET amount = amount - 1 WHERE id = ${transferred}`
        assertClean(yield* auditLedger)
      }))

    it.effect("docs/ledger.md: an entry names the transaction it books; an entry booking no transaction is caught", () =>
      Effect.gen(function*() {
        const { tenant, bob } = done()
        // What the other tests' funding helper does: a credit with no deposit behind it.
        yield* fund(tenant, bob, eth, 5n)
        const sql = yield* SqlClient.SqlClient
        const [entry] = yield* sql<{ id: string; reference_id: string }>`
          SELECT e.id, e.reference_id FROM ledger_entries e
          WHERE NOT EXISTS (SELECT 1 FROM transactions t WHERE t.id = e.reference_id)`
        const report = yield* auditLedger
        assertCaughtFirst(report, "transactionsBooked", `entry ${entry!.id} (DEPOSIT_CREDIT) books ${entry!.reference_id}, which is no transaction`)
        yield* removeEntry(entry!.reference_id, "DEPOSIT_CREDIT")
        assertClean(yield* auditLedger)
      }))

    it.effect("sql/0003: only a deposit reversal may overdraw; a wallet overdrawn by another entry is caught", () =>
      Effect.gen(function*() {
        const { bob } = done()
        const sql = yield* SqlClient.SqlClient
        const account = yield* accountOf(bob, eth)
        const referenceId = yield* uuidV7
        const [owner] = yield* sql<{ tenant_id: string }>`SELECT tenant_id FROM ledger_accounts WHERE id = ${account}`
        const tenantId = owner!.tenant_id
        const [chain] = yield* sql<{ id: string }>`
          SELECT id::text AS id FROM ledger_accounts WHERE tenant_id = ${tenantId} AND kind = 'CHAIN' AND asset_id = ${eth}`
        // A debit beyond the balance that the overdraft trigger would have refused.
        const [balance] = yield* sql<{ available: string }>`SELECT available::text AS available FROM ledger_accounts WHERE id = ${account}`
        const debit = BigInt(balance!.available) + 1n
        const entryId = yield* uuidV7
        yield* asReplica(Effect.gen(function*() {
          yield* sql`INSERT INTO ledger_entries (id, tenant_id, kind, reference_id, created_at)
            VALUES (${entryId}, ${tenantId}, 'TRANSFER', ${referenceId}, now())`
          yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
            (${entryId}, ${account}, 'AVAILABLE', ${(-debit).toString()}), (${entryId}, ${chain!.id}, 'AVAILABLE', ${debit.toString()})`
          yield* recomputeBalances
        }))
        const report = yield* auditLedger
        assertCaughtFirst(report, "balancesMatchJournal", `account ${account}`, "overdrawn (available -1) without a deposit reversal")
        yield* removeEntry(referenceId, "TRANSFER")
        assertClean(yield* auditLedger)
      }))
  })
})
