/**
 * The operator's credit of a deposit held for manual review (operator-interface.md, "Approvals and manual handling";
 * decisions.md: `MANUAL_REVIEW` until an operator credits it, then `MANUAL_DEPOSIT_CREDITED` and subStatus null).
 * The ledger credit, the status change and both events commit in one transaction.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { FeeFloors } from "../catalog/FeeFloors.ts"
import { effectiveDepositFee } from "../catalog/Fees.ts"
import { decodeFirstRow, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { InvalidState, NotFound } from "../domain/ApiError.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { entryRequest, Postings } from "../ledger/Postings.ts"
import { Outbox } from "../outbox/Outbox.ts"
import { Tenants } from "../tenants/Tenants.ts"
import type { Transaction } from "../transactions/Transaction.ts"
import { TransactionEvents } from "../transactions/TransactionEvents.ts"
import { TransactionRepository } from "../transactions/TransactionRepository.ts"

// Compiled once (db/RowSchemas.ts): the deposit's row decoded at this edge, a mismatch a defect naming the query.
const heldDeposit = decodeFirstRow(
  Schema.Struct({
    status: Text,
    sub_status: Nullable(Text),
    asset_id: Text,
    amount: Numeric,
    destination_wallet_id: Text,
    in_block: Schema.Boolean
  }),
  "ManualDepositCredit.credit"
)
const depositAsset = decodeFirstRow(Schema.Struct({ asset_id: Text }), "ManualDepositCredit.credit (asset)")

export class ManualDepositCredit extends Context.Service<ManualDepositCredit, {
  readonly credit: (tenantId: string, depositId: string) => Effect.Effect<Transaction, NotFound | InvalidState>
}>()("coffer/ManualDepositCredit") {
  static readonly layer = Layer.effect(
    ManualDepositCredit,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ledger = yield* Ledger
      const catalog = yield* Catalog
      const tenants = yield* Tenants
      const transactions = yield* TransactionRepository
      const outbox = yield* Outbox
      const transactionEvents = yield* TransactionEvents
      const feeFloors = yield* FeeFloors

      const credit = Effect.fn("ManualDepositCredit.credit")(function*(tenantId: string, depositId: string) {
        // A deposit's asset never changes, so its fee floor (fee rule 3) is read before the locking transaction: a
        // node's fee estimate never runs under the row lock.
        const known = yield* sql`
          SELECT asset_id FROM transactions WHERE tenant_id = ${tenantId} AND id = ${depositId} AND kind = 'DEPOSIT'`.pipe(
          Effect.orDie,
          Effect.flatMap(depositAsset)
        )
        if (known === undefined) return yield* new NotFound({ message: "deposit not found" })
        const floors = yield* feeFloors.floor(catalog.asset(known.asset_id)!)
        const credited = yield* sql.withTransaction(Effect.gen(function*() {
          const deposit = yield* sql`
            SELECT status, sub_status, asset_id, amount::text AS amount, destination_wallet_id,
              block_height IS NOT NULL AS in_block
            FROM transactions
            WHERE tenant_id = ${tenantId} AND id = ${depositId} AND kind = 'DEPOSIT'
            FOR UPDATE`.pipe(Effect.flatMap(heldDeposit))
          if (deposit === undefined) return yield* new NotFound({ message: "deposit not found" })
          if (deposit.status !== "COMPLETED" || deposit.sub_status !== "MANUAL_REVIEW") {
            return yield* new InvalidState({ message: "deposit is not held for manual review" })
          }
          // A reorganization took its block and the chain still has the transaction elsewhere (DepositDecisions.ts,
          // AWAIT_BLOCK): it is credited once the watcher has seen it in a block again, never while it is in none.
          if (!deposit.in_block) {
            return yield* new InvalidState({ message: "deposit is not in a block since a reorganization; retry once it is" })
          }
          const asset = catalog.asset(deposit.asset_id)!
          const amount = deposit.amount
          const tenant = yield* tenants.get(tenantId)
          // The deposit row names this tenant and the foreign key holds it: a missing tenant is a defect, never a
          // credit under default settings (fail closed).
          if (tenant === undefined) return yield* Effect.die(new Error(`deposit ${depositId}: tenant ${tenantId} does not exist`))
          const usualFee = effectiveDepositFee(asset, tenant.settings, floors.deposit)
          // The operator's decision to credit stands even for an amount the fee would swallow: then no fee is kept.
          const fee = amount > usualFee ? usualFee : 0n
          const deposited = { walletId: deposit.destination_wallet_id, assetId: deposit.asset_id, amount }
          yield* ledger.post(entryRequest(tenantId, depositId, Postings.manualDepositCredit(deposited, fee))).pipe(Effect.orDie)
          yield* sql`UPDATE transactions SET sub_status = NULL, fee = ${fee.toString()},
            updated_at = ${new Date(yield* Clock.currentTimeMillis)} WHERE id = ${depositId}`
          yield* outbox.record({
            tenantId,
            type: "MANUAL_DEPOSIT_CREDITED",
            subjectId: depositId,
            dedupeKey: "credited",
            data: {
              caseId: depositId,
              walletId: deposit.destination_wallet_id,
              assetId: deposit.asset_id,
              amountRaw: (amount - fee).toString()
            }
          })
          yield* transactionEvents.statusUpdated(tenantId, depositId, "COMPLETED", null)
          return yield* transactions.find(tenantId, depositId)
        })).pipe(
          Effect.catchTag("SqlError", Effect.die)
        )
        return credited!
      })

      return ManualDepositCredit.of({ credit })
    })
  )
}
