/**
 * The daily limit's running totals (sql/0021_payer_hold_and_daily_totals.sql; decisions.md "Daily limit"): per user,
 * asset and UTC day of `created_at`, the on-chain withdrawals and cross-user internal transfers that did not end
 * FAILED, REJECTED or CANCELLED. A trigger keeps them, so every way a movement is created or ends is counted without
 * the code that does it knowing: here rows are written the way the services write them, and after each change the total
 * is compared with the definition summed over the rows. The migration's backfill, run again over those rows, agrees.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { splitSql, sqlDirectory } from "../../src/db/Migrations.ts"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { auditLedger } from "../../src/ledger/LedgerAudit.ts"
import { insertTransactions, type NewTransaction } from "../../src/transactions/NewTransaction.ts"
import { spentToday } from "../../src/transfers/DailyLimit.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import { walletOf } from "../withdrawals/WithdrawalHelpers.ts"

const eth = "ETH_SEPOLIA_ETH"
const day = Date.UTC(2026, 10, 26, 12)
const nextDay = day + 24 * 3600 * 1000

layer(makeTestAppLayer(), { excludeTestServices: true })("the daily limit's running totals", (it) => {
  it.effect("a movement counts from its insert until it ends FAILED, REJECTED or CANCELLED; deposits and one user's own transfers never; the migration's backfill agrees", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* provisionTenant()
      const payer = yield* walletOf(tenant, "spender", "ETH_SEPOLIA")
      const other = yield* walletOf(tenant, "other", "ETH_SEPOLIA")
      const own = yield* walletOf(tenant, "spender", "ETH_SEPOLIA")
      const userOf = new Map((yield* sql<{ id: string; user_id: string }>`
        SELECT id, user_id FROM wallets WHERE tenant_id = ${tenant.tenantId}`).map((row) => [row.id, row.user_id]))
      const spender = userOf.get(payer.walletId)!

      const movement = (
        kind: NewTransaction["kind"],
        amount: bigint,
        at: number,
        to?: { readonly walletId: string; readonly address: string }
      ) =>
        Effect.map(uuidV7, (id): NewTransaction => ({
          id,
          tenantId: tenant.tenantId,
          kind,
          settlement: kind === "INTERNAL_TRANSFER" ? "OFF_CHAIN" : "ON_CHAIN",
          status: kind === "DEPOSIT" ? "CONFIRMING" : kind === "WITHDRAWAL" ? "SUBMITTED" : "COMPLETED",
          assetId: eth,
          networkKey: "ETH_SEPOLIA",
          amount,
          fee: kind === "DEPOSIT" ? null : 1n,
          source: kind === "DEPOSIT"
            ? { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" }
            : { walletId: payer.walletId, address: payer.address, userId: spender },
          destination: to === undefined
            ? { address: "0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359" }
            : { walletId: to.walletId, address: to.address, userId: userOf.get(to.walletId)! },
          ...(kind === "DEPOSIT" ? { txHash: `0x${id.replaceAll("-", "")}`, outputIndex: 0 } : {}),
          at: new Date(at)
        }))
      const total = (at: number) => spentToday(spender, eth, at)
      /** The definition, summed over the rows: what the totals must always equal. */
      const summed = (at: number) =>
        Effect.map(
          sql<{ total: string }>`SELECT coalesce(sum(amount), 0)::text AS total FROM transactions
            WHERE source_user_id = ${spender} AND asset_id = ${eth}
              AND (created_at AT TIME ZONE 'UTC')::date = ${new Date(at).toISOString().slice(0, 10)}::date
              AND status NOT IN ('FAILED', 'REJECTED', 'CANCELLED')
              AND (kind = 'WITHDRAWAL' OR (kind = 'INTERNAL_TRANSFER' AND destination_user_id <> source_user_id))`,
          ([row]) => BigInt(row!.total)
        )
      const expect = (at: number, value: bigint) =>
        Effect.gen(function*() {
          assert.strictEqual(yield* total(at), value)
          assert.strictEqual(yield* summed(at), value)
        })

      const withdrawal = yield* movement("WITHDRAWAL", 100n, day)
      const transfer = yield* movement("INTERNAL_TRANSFER", 20n, day, other)
      const toSelf = yield* movement("INTERNAL_TRANSFER", 7_000n, day, own)
      const deposit = yield* movement("DEPOSIT", 9_000n, day, payer)
      const tomorrow = yield* movement("WITHDRAWAL", 3n, nextDay)
      yield* insertTransactions([withdrawal, transfer, toSelf, deposit, tomorrow])
      yield* expect(day, 120n)
      yield* expect(nextDay, 3n)

      const setStatus = (id: string, status: string, subStatus: string | null) =>
        sql`UPDATE transactions SET status = ${status}, sub_status = ${subStatus} WHERE id = ${id}`
      // Moving on while it still counts changes nothing; ending FAILED, REJECTED or CANCELLED takes it out.
      yield* setStatus(withdrawal.id, "QUEUED", null)
      yield* expect(day, 120n)
      yield* setStatus(withdrawal.id, "CANCELLED", "CANCELLED_BY_USER")
      yield* expect(day, 20n)
      yield* setStatus(transfer.id, "REJECTED", "REJECTED_BY_OPERATOR")
      yield* expect(day, 0n)
      yield* setStatus(tomorrow.id, "FAILED", "BROADCAST_FAILED")
      yield* expect(nextDay, 0n)
      // A change that rolls back takes its change of the total with it.
      const later = yield* movement("WITHDRAWAL", 50n, day)
      yield* Effect.exit(sql.withTransaction(Effect.andThen(insertTransactions([later]), Effect.fail("rolled back"))))
      yield* expect(day, 0n)
      yield* insertTransactions([later])
      yield* expect(day, 50n)

      // sql/0021's backfill, its own statement from the file, over the rows written so far: the totals it computes
      // are the ones the trigger kept, and the audit finds nothing to say.
      const kept = yield* sql<{ user_id: string; asset_id: string; day: string; spent: string }>`
        SELECT user_id, asset_id, day::text AS day, spent::text AS spent FROM daily_spend ORDER BY 1, 2, 3`
      const backfill = splitSql(readFileSync(join(sqlDirectory, "0021_payer_hold_and_daily_totals.sql"), "utf8"))
        .filter((statement) => statement.includes("INSERT INTO daily_spend (user_id, asset_id, day, spent)\nSELECT"))
      assert.lengthOf(backfill, 1)
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`DELETE FROM daily_spend`
        yield* sql.unsafe(backfill[0]!)
      }))
      const rebuilt = yield* sql<{ user_id: string; asset_id: string; day: string; spent: string }>`
        SELECT user_id, asset_id, day::text AS day, spent::text AS spent FROM daily_spend WHERE spent > 0 ORDER BY 1, 2, 3`
      assert.deepStrictEqual(rebuilt, kept.filter((row) => row.spent !== "0"))
      assert.lengthOf((yield* auditLedger).checks.find((check) => check.check === "dailyLimitTotals")!.discrepancies, 0)
    }).pipe(Effect.catchTag("SqlError", Effect.die)))
})
