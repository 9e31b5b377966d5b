/**
 * The tenant's and the operator's side of on-chain withdrawals: submission (SUBMITTED with amount + fee frozen and
 * TRANSACTION_CREATED, in one statement, under the daily limit's lock: transfers/Movements.ts), cancellation (spec
 * 4.4) and the operator's decisions (operator-interface.md): approve a PENDING_AUTHORIZATION withdrawal, reject one
 * that is not yet signing (SUBMITTED, QUEUED, PENDING_AUTHORIZATION; decisions.md). Everything after submission is the
 * withdrawal entity's (WithdrawalProcessor.ts). Cancel and decide lock the transaction row and use the processor's
 * conditional transitions, so they serialize with the entity: whichever commits first wins, the other changes nothing.
 */
import { Clock, Context, Effect, Layer, Schema, Scope } from "effect"
import { Sharding } from "effect/cluster"
import { SqlClient } from "effect/sql"
import type { CatalogAsset } from "../catalog/Catalog.ts"
import { decodeFirstRow, Text } from "../db/RowSchemas.ts"
import {
  type Forbidden,
  type InsufficientBalance,
  InvalidState,
  type LimitExceeded,
  NotFound,
  type WalletNotActive
} from "../domain/ApiError.ts"
import { Ids } from "../domain/Ids.ts"
import type { StoreInStatement } from "../idempotency/Idempotency.ts"
import { requestProcessing } from "../entities/WithdrawalEntity.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { entryRequest } from "../ledger/Postings.ts"
import type { Tenant } from "../tenants/Tenants.ts"
import { Movements } from "../transfers/Movements.ts"
import { type NewTransaction, transactionAsInserted } from "../transactions/NewTransaction.ts"
import type { Transaction } from "../transactions/Transaction.ts"
import { TransactionEvents } from "../transactions/TransactionEvents.ts"
import { TransactionRepository } from "../transactions/TransactionRepository.ts"
import type { Wallet } from "../wallets/WalletRepository.ts"
import { paymentOf, WithdrawalProcessor } from "./WithdrawalProcessor.ts"
import { allows, creation, ledgerEntries } from "./WithdrawalTransitions.ts"

/** Spec section 2, "On-chain withdrawal receipt" (and, with status CANCELLED, the cancel response). */
export interface OnChainReceipt {
  readonly settlement: "ON_CHAIN"
  readonly withdrawalId: string
  readonly transactionId: string
  readonly status: string
  readonly subStatus: string | null
  /** Internal state, for troubleshooting only (spec): here the status it was answered in. */
  readonly state: string
  readonly assetId: string
  readonly amountRaw: string
  readonly feeRaw: string
  readonly reservedRaw: string
  readonly destination: string
}

export interface WithdrawalSubmission {
  readonly tenant: Tenant
  readonly payer: Wallet
  readonly asset: CatalogAsset
  readonly amount: bigint
  readonly fee: bigint
  /** Normalized. */
  readonly destination: string
  readonly externalTxId: string | undefined
  readonly note: string | undefined
  /** Stores the receipt in the statement that creates the withdrawal (Transfers.ts `recordReceipt`). */
  readonly recordReceipt?: StoreInStatement<OnChainReceipt> | undefined
  /** The daily limit the withdrawal counts against (TransferQuotes.ts), held inside the creating statement. */
  readonly dailyLimit: bigint | undefined
}

// Compiled once (db/RowSchemas.ts): the locked row decoded at this edge, a mismatch a defect naming the query.
const lockedRow = decodeFirstRow(Schema.Struct({ kind: Text, status: Text }), "Withdrawals.lockedWithdrawal")

const receipt = (
  row: { id: string; asset_id: string; amount: bigint; fee: bigint; destination_address: string },
  status: string,
  subStatus: string | null
): OnChainReceipt => ({
  settlement: "ON_CHAIN",
  withdrawalId: row.id,
  transactionId: row.id,
  status,
  subStatus,
  state: status,
  assetId: row.asset_id,
  amountRaw: row.amount.toString(),
  feeRaw: row.fee.toString(),
  reservedRaw: (row.amount + row.fee).toString(),
  destination: row.destination_address
})

export class Withdrawals extends Context.Service<Withdrawals, {
  readonly submit: (
    submission: WithdrawalSubmission
  ) => Effect.Effect<OnChainReceipt, InsufficientBalance | LimitExceeded | Forbidden | NotFound | WalletNotActive>
  readonly cancel: (tenantId: string, transactionId: string) => Effect.Effect<OnChainReceipt, NotFound | InvalidState>
  /** An operator's decision on a withdrawal in PENDING_AUTHORIZATION: `decideUncommitted`, committed, then `decided`. */
  readonly decide: (
    tenantId: string,
    transactionId: string,
    decision: "APPROVE" | "REJECT"
  ) => Effect.Effect<Transaction, NotFound | InvalidState>
  /**
   * The decision's statements alone, in the caller's transaction: the operator's audit entry commits with them
   * (ops/OperatorAudit.ts). The caller runs `decided` once that transaction has committed.
   */
  readonly decideUncommitted: (
    tenantId: string,
    transactionId: string,
    decision: "APPROVE" | "REJECT"
  ) => Effect.Effect<void, NotFound | InvalidState>
  /** After the decision's commit: an approved withdrawal's entity goes on at once; answers the transaction. */
  readonly decided: (
    tenantId: string,
    transactionId: string,
    decision: "APPROVE" | "REJECT"
  ) => Effect.Effect<Transaction>
}>()("coffer/Withdrawals") {
  static readonly layer: Layer.Layer<
    Withdrawals,
    never,
    | SqlClient.SqlClient
    | Ledger
    | Movements
    | Ids
    | TransactionEvents
    | TransactionRepository
    | WithdrawalProcessor
    | Sharding.Sharding
  > = Layer.effect(
    Withdrawals,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ledger = yield* Ledger
      const movements = yield* Movements
      const ids = yield* Ids
      const transactionEvents = yield* TransactionEvents
      const transactions = yield* TransactionRepository
      const processor = yield* WithdrawalProcessor
      const sharding = yield* Sharding.Sharding
      const scope = yield* Scope.Scope
      const ask = (withdrawalId: string, attempt: string) =>
        requestProcessing(withdrawalId, attempt).pipe(Effect.provideService(Sharding.Sharding, sharding))

      const submit = Effect.fn("Withdrawals.submit")(function*(submission: WithdrawalSubmission) {
        const { tenant, payer, asset } = submission
        const id = yield* ids.uuidV7For("transaction")
        const now = new Date(yield* Clock.currentTimeMillis)
        const row = {
          id,
          asset_id: asset.assetId,
          amount: submission.amount,
          fee: submission.fee,
          source_wallet_id: payer.id,
          destination_address: submission.destination
        }
        const submitted = receipt(row, "SUBMITTED", null)
        const record: NewTransaction = {
          id,
          tenantId: tenant.id,
          kind: "WITHDRAWAL",
          settlement: "ON_CHAIN",
          status: creation.to,
          assetId: asset.assetId,
          networkKey: asset.networkKey,
          amount: submission.amount,
          fee: submission.fee,
          source: { walletId: payer.id, address: payer.address, userId: payer.userId },
          destination: { address: submission.destination },
          externalTxId: submission.externalTxId,
          note: submission.note,
          at: now
        }
        // The creation books one entry, the freeze (WithdrawalTransitions.ts `creation`): its accounts are read
        // before the statement, and it is written after the payer's hold.
        const [freeze, ...more] = ledgerEntries(creation.ledger, paymentOf(row))
        if (freeze === undefined || more.length > 0) {
          return yield* Effect.die(new Error("a withdrawal's creation books exactly one entry, its freeze"))
        }
        // One statement (Movements.ts): the withdrawal's rows, the payer's hold, the freeze. Its own row and its event
        // as data, so it shares the statement of fixed text with the transfers and withdrawals of its batch (issue 34).
        const event = yield* transactionEvents.createdRow(transactionAsInserted(record, { source: payer }))
        yield* movements.create({
          transaction: record,
          rows: [],
          withdrawal: true,
          events: [event],
          entry: yield* ledger.prepare(entryRequest(tenant.id, id, freeze)),
          dailyLimit: submission.dailyLimit,
          receipt: submission.recordReceipt === undefined
            ? undefined
            : { answer: submitted, store: submission.recordReceipt }
        })
        yield* transactionEvents.committed
        // Asked in the background: the tenant's answer does not depend on it (the withdrawal is committed SUBMITTED),
        // and a persisted send (the entity's shard held by another process) returns only once that runner's storage
        // read has seen it. A request lost with this process leaves the withdrawal SUBMITTED, and WithdrawalSupervisor
        // asks again at the next start or sweep. Forked in the service's scope, so shutdown interrupts it.
        yield* Effect.forkIn(ask(id, "submitted"), scope)
        return submitted
      })

      /** The withdrawal's row, locked for this transaction, if it is this tenant's. */
      const lockedWithdrawal = (tenantId: string, transactionId: string) =>
        Effect.gen(function*() {
          const row = yield* sql`
            SELECT kind, status FROM transactions WHERE tenant_id = ${tenantId} AND id = ${transactionId} FOR UPDATE`
            .pipe(Effect.flatMap(lockedRow))
          if (row === undefined) return yield* new NotFound({ message: "transaction not found" })
          return row
        })

      const cancel = Effect.fn("Withdrawals.cancel")(function*(tenantId: string, transactionId: string) {
        return yield* sql.withTransaction(Effect.gen(function*() {
          const locked = yield* lockedWithdrawal(tenantId, transactionId)
          if (locked.kind !== "WITHDRAWAL") return yield* new InvalidState({ message: "only withdrawals can be cancelled" })
          const row = (yield* processor.load(transactionId))!
          // Spec section 3: cancellable until signing starts (the table's cancelByUser from-states).
          const done = allows("cancelByUser", row.status) && (yield* processor.transition(row, "cancelByUser"))
          if (!done) return yield* new InvalidState({ message: "withdrawal can no longer be cancelled" })
          return receipt(row, "CANCELLED", "CANCELLED_BY_USER")
        })).pipe(Effect.catchTag("SqlError", Effect.die))
      })

      const decideUncommitted = Effect.fn("Withdrawals.decideUncommitted")(function*(
        tenantId: string,
        transactionId: string,
        decision: "APPROVE" | "REJECT"
      ) {
        yield* sql.withTransaction(Effect.gen(function*() {
          const locked = yield* lockedWithdrawal(tenantId, transactionId)
          const row = locked.kind === "WITHDRAWAL" ? yield* processor.load(transactionId) : undefined
          if (decision === "APPROVE") {
            const done = row !== undefined && allows("approve", row.status) && (yield* processor.transition(row, "approve"))
            if (!done) return yield* new InvalidState({ message: "transaction is not waiting for approval" })
            return
          }
          // decisions.md: SUBMITTED/QUEUED (with or without INSUFFICIENT_FUNDS_PLATFORM) and PENDING_AUTHORIZATION
          // can be rejected, released in the same transaction; from PENDING_SIGNATURE on the chain may have it.
          const done = row !== undefined && allows("rejectByOperator", row.status) &&
            (yield* processor.transition(row, "rejectByOperator"))
          if (!done) return yield* new InvalidState({ message: "transaction can no longer be rejected" })
        })).pipe(Effect.catchTag("SqlError", Effect.die))
      })

      // The entity reads the withdrawal from its own connection: asked before the commit, it would see it pending.
      // Asked in the background, as `submit` does: the operator's answer is the committed decision, and a request
      // lost with this process or a frozen runner leaves the withdrawal QUEUED for WithdrawalSupervisor's sweep.
      const decided = Effect.fn("Withdrawals.decided")(function*(
        tenantId: string,
        transactionId: string,
        decision: "APPROVE" | "REJECT"
      ) {
        if (decision === "APPROVE") yield* Effect.forkIn(ask(transactionId, "approved"), scope)
        return (yield* transactions.find(tenantId, transactionId))!
      })

      const decide = Effect.fn("Withdrawals.decide")(function*(
        tenantId: string,
        transactionId: string,
        decision: "APPROVE" | "REJECT"
      ) {
        yield* decideUncommitted(tenantId, transactionId, decision)
        return yield* decided(tenantId, transactionId, decision)
      })

      return Withdrawals.of({ submit, cancel, decide, decideUncommitted, decided })
    })
  )
}
