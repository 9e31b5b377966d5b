/**
 * The ledger's guards per statement (sql/0033_ledger_statement_triggers.sql, issue 34), tried with raw SQL that
 * bypasses the service: what the statement-level trigger decides differently from the per-row one it replaced.
 *
 * - A statement's postings are applied as each account's net: a debit that an earlier-listed posting of the same
 *   statement could not cover, but a credit in the same statement does, passes; the balance is the sum of postings.
 * - A statement whose net leaves a debited wallet below zero is refused (CF001) and writes nothing.
 * - An entry's postings spread over two statements: the second statement must leave the entry balanced too.
 */
import { assert, layer } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { Ledger } from "../../src/ledger/Ledger.ts"
import { makeTestAppLayer, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const eth = "ETH_SEPOLIA_ETH"

const walletFor = (tenant: TestTenant, customerRefId: string) =>
  Effect.gen(function*() {
    const response = yield* rawRequest({
      baseUrl: tenant.baseUrl,
      method: "POST",
      target: `/v1/users/${customerRefId}/deposit_address`,
      body: JSON.stringify({ networkKey: "ETH_SEPOLIA" }),
      tenant
    })
    assert.strictEqual(response.status, 200, response.text)
    return response.json.walletId as string
  })

/** Raw SQL in its own transaction; the database's complaint, or "" when it accepted. */
const attempt = <A, E, R>(statement: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const exit = yield* Effect.exit(sql.withTransaction(statement))
    return Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("the ledger's guards per statement", (it) => {
  it.effect("net per account within a statement, refused when the net overdraws, entries balanced per statement", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ledger = yield* Ledger
      const tenant = yield* provisionTenant()
      const [left, right] = [yield* walletFor(tenant, "net-left"), yield* walletFor(tenant, "net-right")]
      // Funds on `right` only, through the service; the accounts exist from then on.
      yield* ledger.post({
        tenantId: tenant.tenantId,
        kind: "DEPOSIT_CREDIT",
        referenceId: yield* uuidV7,
        postings: [
          { account: { kind: "CHAIN" }, assetId: eth, bucket: "AVAILABLE", amount: -100n },
          { account: { kind: "WALLET", walletId: right }, assetId: eth, bucket: "AVAILABLE", amount: 100n }
        ]
      })
      yield* ledger.post({
        tenantId: tenant.tenantId,
        kind: "DEPOSIT_CREDIT",
        referenceId: yield* uuidV7,
        postings: [
          { account: { kind: "CHAIN" }, assetId: eth, bucket: "AVAILABLE", amount: -1n },
          { account: { kind: "WALLET", walletId: left }, assetId: eth, bucket: "AVAILABLE", amount: 1n }
        ]
      })
      const accountOf = (walletId: string) =>
        Effect.map(
          sql<{ id: string; available: string }>`
            SELECT id::text AS id, available::text AS available FROM ledger_accounts
            WHERE wallet_id = ${walletId} AND asset_id = ${eth}`,
          (rows) => rows[0]!
        )
      const [leftAccount, rightAccount] = [yield* accountOf(left), yield* accountOf(right)]
      const entry = (id: string) =>
        Effect.flatMap(uuidV7, (reference) =>
          sql`INSERT INTO ledger_entries (id, tenant_id, kind, reference_id, created_at)
            VALUES (${id}, ${tenant.tenantId}, 'TRANSFER', ${reference}, now())`)

      // left (1) pays 50 to right in the first entry, right pays 60 to left in the second, one statement: left's
      // debit is listed first and alone would overdraw; the statement's net leaves left at 11, right at 90.
      const [first, second] = [yield* uuidV7, yield* uuidV7]
      const accepted = yield* attempt(Effect.gen(function*() {
        yield* entry(first)
        yield* entry(second)
        yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
          (${first}, ${leftAccount.id}, 'AVAILABLE', -50), (${first}, ${rightAccount.id}, 'AVAILABLE', 50),
          (${second}, ${rightAccount.id}, 'AVAILABLE', -60), (${second}, ${leftAccount.id}, 'AVAILABLE', 60)`
      }))
      assert.strictEqual(accepted, "")
      assert.strictEqual((yield* accountOf(left)).available, "11")
      assert.strictEqual((yield* accountOf(right)).available, "90")

      // The same shape whose net overdraws left (11 - 50 + 30 < 0): refused, nothing written.
      const [third, fourth] = [yield* uuidV7, yield* uuidV7]
      const refused = yield* attempt(Effect.gen(function*() {
        yield* entry(third)
        yield* entry(fourth)
        yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
          (${third}, ${leftAccount.id}, 'AVAILABLE', -50), (${third}, ${rightAccount.id}, 'AVAILABLE', 50),
          (${fourth}, ${rightAccount.id}, 'AVAILABLE', -30), (${fourth}, ${leftAccount.id}, 'AVAILABLE', 30)`
      }))
      assert.include(refused, "insufficient available balance")
      assert.strictEqual((yield* accountOf(left)).available, "11")
      assert.strictEqual((yield* accountOf(right)).available, "90")
      const written = yield* sql<{ count: number }>`
        SELECT count(*)::int AS count FROM ledger_entries WHERE id IN (${third}, ${fourth})`
      assert.strictEqual(written[0]!.count, 0)

      // An entry's postings over two statements: each must leave it balanced.
      const split = yield* uuidV7
      const unbalanced = yield* attempt(Effect.gen(function*() {
        yield* entry(split)
        yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
          (${split}, ${rightAccount.id}, 'AVAILABLE', -5), (${split}, ${leftAccount.id}, 'AVAILABLE', 5)`
        yield* sql`INSERT INTO ledger_postings (entry_id, account_id, bucket, amount) VALUES
          (${split}, ${leftAccount.id}, 'FROZEN', 3)`
      }))
      assert.include(unbalanced, "does not balance")
    }).pipe(Effect.catchTag("SqlError", Effect.die)))
})
