/**
 * Fail closed (issue 9; docs/deposits.md, "A deposit whose tenant is missing"): a deposit whose tenant cannot be
 * read is never credited under default settings: it is held MANUAL_REVIEW. The foreign keys make a missing tenant
 * impossible in normal operation, so the test removes the row with the foreign-key triggers off (as a broken restore
 * would leave it) and drops the outbox's tenant key so the hold's event can be written; this file has a database of
 * its own, so the dangling rows reach no other test. The manual credit of such a deposit fails as a defect.
 */
import { assert, layer } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import { ManualDepositCredit } from "../../src/deposits/ManualDepositCredit.ts"
import { makeTestAppLayer, opsClient, provisionTenant, rawRequest } from "../support/TestApp.ts"

layer(makeTestAppLayer(), { excludeTestServices: true })("a deposit whose tenant vanished", (it) => {
  it.effect("is held MANUAL_REVIEW, uncredited, instead of credited under default settings", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ops = yield* opsClient
      const tenant = yield* provisionTenant()
      const created = yield* rawRequest({
        baseUrl: tenant.baseUrl,
        method: "POST",
        target: "/v1/users/vanishing/deposit_address",
        body: JSON.stringify({ networkKey: "BTC_TESTNET" }),
        tenant
      })
      assert.strictEqual(created.json.status, "READY", created.text)
      yield* ops.devnet.transfer({
        params: { networkKey: "BTC_TESTNET" },
        payload: { to: created.json.address, assetId: "BTC_TESTNET_BTC", amountRaw: 50_000n }
      }).pipe(Effect.orDie)
      // One block: recorded CONFIRMING (BTC_TESTNET credits at the second confirmation).
      yield* ops.devnet.mine({ params: { networkKey: "BTC_TESTNET" }, payload: { count: 1 } }).pipe(Effect.orDie)
      const [recorded] = yield* sql<{ id: string; status: string }>`
        SELECT id, status FROM transactions WHERE tenant_id = ${tenant.tenantId} AND kind = 'DEPOSIT'`
      assert.strictEqual(recorded?.status, "CONFIRMING")

      yield* sql`ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_tenant_id_fkey`
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`SET LOCAL session_replication_role = replica`
        yield* sql`DELETE FROM tenants WHERE id = ${tenant.tenantId}`
      }))

      // The block that would credit it (the tenant's fee settings are gone with it).
      yield* ops.devnet.mine({ params: { networkKey: "BTC_TESTNET" }, payload: { count: 1 } }).pipe(Effect.orDie)
      const [after] = yield* sql<{ status: string; sub_status: string | null; fee: string | null }>`
        SELECT status, sub_status, fee::text AS fee FROM transactions WHERE id = ${recorded!.id}`
      assert.deepStrictEqual(after, { status: "COMPLETED", sub_status: "MANUAL_REVIEW", fee: null })
      const entries = yield* sql<{ count: string }>`
        SELECT count(*)::text AS count FROM ledger_entries WHERE reference_id = ${recorded!.id}`
      assert.strictEqual(entries[0]!.count, "0")

      // The operator's manual credit (which the ops route guards with a 404 first) fails as a defect too, rather
      // than crediting under default fees: still held, still no ledger entry.
      const manualCredit = yield* ManualDepositCredit
      const exit = yield* Effect.exit(manualCredit.credit(tenant.tenantId, recorded!.id))
      // The service's own defect, not a foreign-key failure further on: the tenant check comes before any write.
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), String(exit))
      if (Exit.isFailure(exit)) assert.include(String(Cause.squash(exit.cause)), `tenant ${tenant.tenantId} does not exist`)
      const [held] = yield* sql<{ status: string; sub_status: string | null }>`
        SELECT status, sub_status FROM transactions WHERE id = ${recorded!.id}`
      assert.deepStrictEqual(held, { status: "COMPLETED", sub_status: "MANUAL_REVIEW" })
      const entriesAfter = yield* sql<{ count: string }>`
        SELECT count(*)::text AS count FROM ledger_entries WHERE reference_id = ${recorded!.id}`
      assert.strictEqual(entriesAfter[0]!.count, "0")
    }))
})
