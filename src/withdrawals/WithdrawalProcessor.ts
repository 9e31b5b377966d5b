/**
 * Moves an on-chain withdrawal along its life cycle: what it does in each status (the tenant's blocked addresses
 * and approval threshold on leaving SUBMITTED, the hot wallet's cover in QUEUED, signing and broadcast in
 * PENDING_SIGNATURE, the confirmation rule in CONFIRMING); which transitions exist, with their ledger effects and
 * events, is the table's (WithdrawalTransitions.ts), applied by `transition` and nowhere else.
 *
 * The withdrawal's entity (entities/WithdrawalEntity.ts) runs `process`; the confirmation check (`confirm`) runs
 * after each scan of the network. The handler may run twice, or on two processes at once (cluster notes), so the
 * state is read from PostgreSQL at every step and every transition is an UPDATE conditional on the status it leaves,
 * committed with its ledger entry and its TRANSACTION_STATUS_UPDATED event: a transition that lost a race changes
 * nothing. Cancelling takes the same row, so a withdrawal is never both cancelled and signed: signing starts only
 * once PENDING_SIGNATURE is committed, and cancel refuses PENDING_SIGNATURE.
 *
 * The signed bytes are stored (once: a trigger refuses any change) before the first broadcast; every later attempt
 * broadcasts those bytes, so no withdrawal is ever signed twice with different parameters.
 *
 * Somewhat over 300 lines on purpose: the steps and the one transition writer they share are one state machine,
 * and the guards that keep it race-free (conditional UPDATEs, the stored-once signature) read best side by side.
 */
import { Clock, Context, Effect, Exit, Layer, Option, Schema, Scope } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { Switches, type SwitchView } from "../catalog/Switches.ts"
import { type ChainUnavailable, ChainClients, type WithdrawalTransfer } from "../chains/ChainClient.ts"
import { makeGroupCommit, outsideTransaction, togetherOrAlone } from "../db/GroupCommit.ts"
import { decodeParts, readTogether } from "../db/ReadPart.ts"
import { decodeFirstRow, decodeRows, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { entryRequest, type Payment } from "../ledger/Postings.ts"
import { insertOutboxRows } from "../outbox/Outbox.ts"
import { type BroadcastCount, countAndReleaseMany, OutgoingSends } from "../sending/OutgoingSends.ts"
import { makeSeenInclusions } from "../sending/SeenInclusions.ts"
import { platformKey } from "../signer/TransactionRequest.ts"
import { isBlockedAddress } from "../tenants/BlockedAddresses.ts"
import { Tenants } from "../tenants/Tenants.ts"
import {
  SubStatus,
  type Transaction,
  transactionFromRow,
  TransactionRow,
  transactionSelectFrom,
  TransactionStatus
} from "../transactions/Transaction.ts"
import { TransactionEvents } from "../transactions/TransactionEvents.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { walletSendsPart } from "../wallets/WalletSwitch.ts"
import {
  allows,
  IllegalTransition,
  ledgerEntries,
  type NetworkFee,
  type ProcessReply,
  type StepOutcome,
  type TransitionName,
  type TransitionRule,
  withdrawalTransitions
} from "./WithdrawalTransitions.ts"

/** Transitions one `process` call makes at most (SUBMITTED to CONFIRMING is four); a bound, not a budget. */
export const processStepsMax = 8
/** Withdrawals one confirmation check looks at per network. */
export const confirmationsPerCheckMax = 500

/** The withdrawal as `load` reads it, decoded (db/RowSchemas.ts): amount, fee and network fee as bigint. */
export const WithdrawalRow = Schema.Struct({
  id: Text,
  tenant_id: Text,
  status: Schema.Literals(TransactionStatus),
  sub_status: Nullable(Schema.Literals(SubStatus)),
  asset_id: Text,
  network_key: Text,
  amount: Numeric,
  fee: Numeric,
  source_wallet_id: Text,
  destination_address: Text,
  tx_hash: Nullable(Text),
  signed_raw: Nullable(Text),
  signed_tx_hash: Nullable(Text),
  network_fee: Nullable(Numeric),
  network_fee_asset_id: Nullable(Text)
})
export type WithdrawalRow = typeof WithdrawalRow.Type

/** A withdrawal as `load` reads it: its row and its transaction as tenants see it (what its events carry). */
export type LoadedWithdrawal = WithdrawalRow & {
  readonly transaction: Transaction
  /**
   * What the QUEUED step reads (the switches, HOT's sends not yet taken by a node), when the transition that left the
   * row QUEUED read them in its own statement (`TransitionDetails.readForQueued`); the step reads them itself when
   * absent. Set only by that transition: every other way to a row leaves it undefined.
   */
  readonly queuedReads?: QueuedReads | undefined
}

/**
 * The QUEUED step's reads: the switches, what HOT's unsent sends take per asset (OutgoingSends.reservedPart), and
 * whether the paying wallet may send (WalletSwitch.walletSendsPart).
 */
type QueuedReads = readonly [SwitchView, ReadonlyMap<string, bigint>, boolean]

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const loadedRow = decodeFirstRow(
  Schema.Struct({
    ...TransactionRow.fields,
    signed_raw: Nullable(Text),
    signed_tx_hash: Nullable(Text),
    signed_network_fee: Nullable(Numeric),
    signed_network_fee_asset_id: Nullable(Text)
  }),
  "WithdrawalProcessor.load"
)
const changedRow = decodeFirstRow(TransactionRow, "WithdrawalProcessor.transition")
const confirmingRows = decodeRows(Schema.Struct({ id: Text }), "WithdrawalProcessor.confirm")

/**
 * Transitions one statement of `transitionsTogether` applies at most: enough for every withdrawal of a burst due on
 * one address at once, small enough that the statement's JSON stays a few kilobytes.
 */
export const transitionBatchMax = 64

/**
 * One withdrawal's transition handed to its network's batch (`transitionsTogether`): the row as `load` read it, the
 * transition, and the transaction as it would leave it (what its event carries).
 */
interface BatchedTransition {
  readonly row: LoadedWithdrawal
  readonly step: TransitionRule
  readonly transaction: Transaction
  readonly countBroadcast: boolean
  readonly countVersion: BroadcastCount | undefined
}

/** A step's outcome: STOP, NEXT (read the row again), or the row a transition left (go on from it). */
type Step = StepOutcome | WithdrawalRow

/** What a transition sets beside its status (WithdrawalTransitions.ts: `broadcast` sets txHash, `complete` the fee). */
export interface TransitionDetails {
  readonly txHash?: string
  readonly networkFee?: NetworkFee & { readonly blockHeight: bigint }
  /**
   * Counts a broadcast on the withdrawal's row (`withdrawals.broadcasts`) in the transition's own statement, whether
   * or not the status still moves: the bytes were given to a node either way (one round trip less per withdrawal).
   */
  readonly countBroadcast?: boolean
  /**
   * The send's own count of that broadcast (OutgoingSends.ts `broadcastCountedByCaller`), written by the
   * transition's statement (`countAndReleaseMany`) whether or not the status still moves.
   */
  readonly countVersion?: BroadcastCount | undefined
  /**
   * The QUEUED step's reads for sends from this address (HOT), made by the transition's own statement after the row
   * is QUEUED: one round trip less per withdrawal. Only a transition that books nothing and leaves the row QUEUED.
   */
  readonly readForQueued?: { readonly from: string } | undefined
}

/** The payer's side of a withdrawal: what its freeze, release and settlement move (ledger/Postings.ts). */
export const paymentOf = (row: Pick<WithdrawalRow, "source_wallet_id" | "asset_id" | "amount" | "fee">): Payment => ({
  walletId: row.source_wallet_id,
  assetId: row.asset_id,
  amount: row.amount,
  fee: row.fee
})

export class WithdrawalProcessor extends Context.Service<WithdrawalProcessor, {
  /** Takes the withdrawal as far as it can go now; returns the status it stands in. */
  readonly process: (withdrawalId: string) => Effect.Effect<ProcessReply>
  /**
   * Completes the network's CONFIRMING withdrawals that meet its confirmation rule (and fails those that provably
   * can never be included); returns how many completed.
   */
  readonly confirm: (networkKey: string) => Effect.Effect<number>
  /**
   * Applies one transition of the table (WithdrawalTransitions.ts) to the withdrawal read as `row`, with its ledger
   * entries and event; false when the status had moved on since. Dies with IllegalTransition when the table does
   * not allow it from `row.status`.
   */
  readonly transition: (row: WithdrawalRow, name: TransitionName, details?: TransitionDetails) => Effect.Effect<boolean>
  readonly load: (withdrawalId: string) => Effect.Effect<WithdrawalRow | undefined>
}>()("coffer/WithdrawalProcessor") {
  static readonly layer = Layer.effect(
    WithdrawalProcessor,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      const ledger = yield* Ledger
      const tenants = yield* Tenants
      const platformAddresses = yield* PlatformAddresses
      const transactionEvents = yield* TransactionEvents
      const sends = yield* OutgoingSends
      const switches = yield* Switches

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const load = (withdrawalId: string) =>
        sql`
          WITH loaded AS (SELECT * FROM transactions WHERE id = ${withdrawalId} AND kind = 'WITHDRAWAL')
          SELECT x.*, w.signed_raw, w.signed_tx_hash, w.network_fee::text AS signed_network_fee,
            w.network_fee_asset_id AS signed_network_fee_asset_id
          FROM (${transactionSelectFrom(sql, "loaded")}) x JOIN withdrawals w ON w.transaction_id = x.id`.pipe(
          Effect.orDie,
          Effect.flatMap(loadedRow),
          Effect.map((row): LoadedWithdrawal | undefined =>
            row === undefined ? undefined : {
              id: row.id,
              tenant_id: row.tenant_id,
              status: row.status,
              sub_status: row.sub_status,
              asset_id: row.asset_id,
              network_key: row.network_key,
              amount: row.amount,
              // A withdrawal always has its fee, paying wallet and destination (Withdrawals.ts inserts them).
              fee: row.fee!,
              source_wallet_id: row.source_wallet_id!,
              destination_address: row.destination_address!,
              tx_hash: row.tx_hash,
              signed_raw: row.signed_raw,
              signed_tx_hash: row.signed_tx_hash,
              network_fee: row.signed_network_fee,
              network_fee_asset_id: row.signed_network_fee_asset_id,
              transaction: transactionFromRow(row)
            })
        )

      /**
       * What the QUEUED step reads, as parts (db/ReadPart.ts): the switches, HOT's sends no node has taken yet, and
       * whether the paying wallet may send.
       */
      const queuedParts = (networkKey: string, from: string, walletId: string | Statement.Fragment) =>
        [switches.part, sends.reservedPart(networkKey, from), walletSendsPart(sql, walletId)] as const

      /** The transition's UPDATE, conditional on the status it leaves. */
      const updateOf = (row: WithdrawalRow, step: TransitionRule, details: TransitionDetails, at: Date) =>
        sql`
          UPDATE transactions SET status = ${step.to}, sub_status = ${step.subStatus}, updated_at = ${at}
            ${details.txHash === undefined ? sql`` : sql`, tx_hash = ${details.txHash}`}
            ${
          details.networkFee === undefined ? sql`` : sql`, network_fee = ${details.networkFee.amount.toString()},
              network_fee_asset_id = ${details.networkFee.assetId}, block_height = ${details.networkFee.blockHeight.toString()}`
        }
          WHERE id = ${row.id} AND kind = 'WITHDRAWAL' AND status = ${row.status}
            ${step.fromWithoutSubStatus === true ? sql`AND sub_status IS NULL` : sql``}`

      const countBroadcast = (withdrawalId: string) =>
        sql`UPDATE withdrawals SET broadcasts = broadcasts + 1 WHERE transaction_id = ${withdrawalId}`

      /**
       * One batch of transitions that book nothing (issue 34, withdrawals by the batch): every member's UPDATE,
       * conditional on the status (and, where the table says so, the absent sub-status) it read, the events of the
       * rows it changed and the members' broadcast counts, in one statement whose text is the same at every batch
       * size (the members are one JSON parameter), so it is planned once. With `readsFrom`, the QUEUED step's reads
       * ride on it: the switches and what the address's unsent sends take once for the batch, each changed member's
       * wallet beside it. A member whose row had moved on changes nothing and gets undefined, as it would alone; so
       * does a second member for the same withdrawal (the entity ran twice): only the first is applied, the other
       * reads the row again. The statement commits alone, so a crash leaves every member moved with its event, or
       * none.
       */
      const transitionsTogether = (readsFrom: { readonly networkKey: string; readonly from: string } | undefined) =>
      (batch: ReadonlyArray<BatchedTransition>): Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError> =>
        Effect.gen(function*() {
          const first = new Map<string, number>()
          batch.forEach((member, index) => {
            if (!first.has(member.row.id)) first.set(member.row.id, index)
          })
          const applied = [...first.values()].map((index) => batch[index]!).sort((a, b) => a.row.id < b.row.id ? -1 : 1)
          const members = applied.map(({ row, step, transaction }) => ({
            id: row.id,
            from_status: row.status,
            without_sub_status: step.fromWithoutSubStatus === true,
            to_status: step.to,
            sub_status: step.subStatus,
            at: transaction.updatedAt.toISOString(),
            tx_hash: transaction.txHash
          }))
          const counts = batch.filter((member) => member.countBroadcast).map((member) => member.row.id)
          const versionCounts = batch.flatMap((member) => member.countVersion === undefined ? [] : [member.countVersion])
          const events = yield* Effect.forEach(applied, (member) => transactionEvents.statusUpdatedRow(member.transaction))
          const reads = readsFrom === undefined ? undefined : queuedParts(readsFrom.networkKey, readsFrom.from, sql`c.source_wallet_id`)
          // Locks are taken in the members' id order (the JSON is sorted; the join reads it in order, each row by key).
          const rows = yield* sql`
            WITH m AS (
              SELECT * FROM jsonb_to_recordset(${JSON.stringify(members)}::jsonb) AS m(id uuid, from_status text,
                without_sub_status boolean, to_status text, sub_status text, at timestamptz, tx_hash text)
            ), changed AS (
              UPDATE transactions t SET status = m.to_status, sub_status = m.sub_status, updated_at = m.at,
                tx_hash = COALESCE(m.tx_hash, t.tx_hash)
              FROM m
              WHERE t.id = m.id AND t.kind = 'WITHDRAWAL' AND t.status = m.from_status
                AND (NOT m.without_sub_status OR t.sub_status IS NULL)
              RETURNING t.id, t.source_wallet_id
            ), events AS (${insertOutboxRows(sql, events, sql`SELECT id::text FROM changed`)}),
            -- The bytes were given to a node whether or not the status still moves: counted either way, each time.
            counted AS (
              UPDATE withdrawals w SET broadcasts = w.broadcasts + n.times
              FROM (SELECT c.id::uuid AS id, count(*)::int AS times FROM jsonb_array_elements_text(${JSON.stringify(counts)}::jsonb)
                AS c(id) GROUP BY c.id) n
              WHERE w.transaction_id = n.id
            ), counted_versions AS (${countAndReleaseMany(sql, versionCounts)})
            SELECT c.id::text AS id ${reads === undefined ? sql`` : sql`, ${sql.csv(reads.map((part) => part.columns))}`}
            FROM changed c`
          if (rows.length > 0) yield* transactionEvents.committed
          const byId = new Map(rows.map((row) => [String(row["id"]), row]))
          return batch.map((member, index) => first.get(member.row.id) === index ? byId.get(member.row.id) : undefined)
        }).pipe(outsideTransaction(sql))

      // One queue per network and the address whose reads ride on it (every withdrawal of a network is sent from its
      // HOT: the queue and the sending address are one), made on first use; a few per network at most.
      const layerScope = yield* Scope.Scope
      const batchQueues = new Map<string, (member: BatchedTransition) => Effect.Effect<Exit.Exit<unknown, SqlError.SqlError>>>()
      const batchQueue = (networkKey: string, readsFrom: string | undefined) =>
        Effect.gen(function*() {
          const key = `${networkKey}\u0000${readsFrom ?? ""}`
          const known = batchQueues.get(key)
          if (known !== undefined) return known
          const write = transitionsTogether(readsFrom === undefined ? undefined : { networkKey, from: readsFrom })
          const made = yield* makeGroupCommit<BatchedTransition, Exit.Exit<unknown, SqlError.SqlError>>({
            batchMax: transitionBatchMax,
            // A batch that fails whole (a deadlock with another process's batch) is tried again member by member.
            write: (batch) => togetherOrAlone(batch, write)
          }).pipe(Scope.provide(layerScope))
          const raced = batchQueues.get(key)
          if (raced !== undefined) return raced
          batchQueues.set(key, made)
          return made
        })

      /**
       * A transition that books nothing, of a withdrawal `load` read, outside any caller's transaction (the steps of
       * `process`: queue, start signing, broadcast), through its network's batch (`transitionsTogether`): the UPDATE,
       * its event, the counts and the QUEUED reads in the batch's one statement, answered to this member alone once
       * that statement has committed. The event carries the transaction as the UPDATE leaves it, which is the one
       * read with the row and the columns this UPDATE sets: the UPDATE takes place only while the status is still the
       * one read, and the columns it does not set never change while a withdrawal is in these statuses.
       */
      const transitionBatched = (row: LoadedWithdrawal, step: TransitionRule, details: TransitionDetails) =>
        Effect.gen(function*() {
          const at = yield* now
          const transaction: Transaction = {
            ...row.transaction,
            status: step.to,
            subStatus: step.subStatus,
            updatedAt: at,
            txHash: details.txHash ?? row.transaction.txHash
          }
          const readsFrom = details.readForQueued === undefined || step.to !== "QUEUED" ? undefined : details.readForQueued.from
          const enqueue = yield* batchQueue(row.network_key, readsFrom)
          const moved = yield* Effect.orDie(
            yield* enqueue({ row, step, transaction, countBroadcast: details.countBroadcast === true, countVersion: details.countVersion })
          )
          if (moved === undefined) return undefined
          const changed: LoadedWithdrawal = {
            ...row,
            status: step.to,
            sub_status: step.subStatus,
            tx_hash: transaction.txHash,
            transaction,
            queuedReads: readsFrom === undefined
              ? undefined
              : yield* decodeParts(queuedParts(row.network_key, readsFrom, row.source_wallet_id), moved)
          }
          return changed
        })

      /** The transition; answers the row as it left it, or undefined when the row was no longer in `row.status`. */
      const transitionTo = Effect.fn("WithdrawalProcessor.transition")(function*(
        row: WithdrawalRow | LoadedWithdrawal,
        name: TransitionName,
        details: TransitionDetails = {}
      ) {
        const step: TransitionRule = withdrawalTransitions[name]
        yield* Effect.annotateCurrentSpan({ transition: name, from: row.status })
        if (!allows(name, row.status)) {
          return yield* Effect.die(new IllegalTransition({ transition: name, withdrawalId: row.id, status: row.status }))
        }
        const entries = ledgerEntries(step.ledger, paymentOf(row), details.networkFee)
        const inTransaction = Option.isSome(yield* Effect.serviceOption(sql.transactionService))
        if (entries.length === 0 && details.networkFee === undefined && !inTransaction && "transaction" in row) {
          return yield* transitionBatched(row, step, details)
        }
        return yield* sql.withTransaction(Effect.gen(function*() {
          const at = yield* now
          if (details.countBroadcast === true) yield* countBroadcast(row.id)
          if (details.countVersion !== undefined) yield* sql`${countAndReleaseMany(sql, [details.countVersion])}`
          // The changed row comes back with its users joined, as the event carries it (no second read).
          const updated = yield* sql`WITH changed AS (${updateOf(row, step, details, at)} RETURNING *)
            ${transactionSelectFrom(sql, "changed")}`.pipe(Effect.flatMap(changedRow))
          if (updated === undefined) return undefined
          for (const entry of entries) {
            yield* ledger.post(entryRequest(row.tenant_id, row.id, entry)).pipe(Effect.orDie)
          }
          // step.event: every entry of the table emits TRANSACTION_STATUS_UPDATED.
          const transaction = transactionFromRow(updated)
          yield* transactionEvents.statusUpdatedAs(transaction)
          const changed: LoadedWithdrawal = {
            ...row,
            status: updated.status,
            sub_status: updated.sub_status,
            tx_hash: updated.tx_hash,
            network_fee: updated.network_fee,
            network_fee_asset_id: updated.network_fee_asset_id,
            transaction,
            queuedReads: undefined
          }
          return changed
        })).pipe(Effect.orDie)
      })

      const transition = (row: WithdrawalRow, name: TransitionName, details?: TransitionDetails) =>
        Effect.map(transitionTo(row, name, details), (changed) => changed !== undefined)

      /**
       * A step's transition, answering the step's outcome: the changed row to go on from (`process` need not read it
       * again), or NEXT (read it again) when another change came first.
       */
      const moveOn = (row: WithdrawalRow, name: TransitionName, details?: TransitionDetails) =>
        Effect.map(transitionTo(row, name, details), (changed): Step => changed ?? "NEXT")

      // Only the network's HOT: `operating` reads the derived list without looking for new tenants' GAS wallets.
      const hotAddress = (networkKey: string) => platformAddresses.operating(networkKey, "HOT")

      const transferOf = (row: WithdrawalRow, from: string): WithdrawalTransfer => ({
        withdrawalId: row.id,
        from,
        to: row.destination_address,
        assetId: row.asset_id,
        amount: row.amount
      })

      /** One step from the row's status; "STOP" when the withdrawal must wait (or is done). */
      const step = (row: WithdrawalRow): Effect.Effect<Step, ChainUnavailable> =>
        Effect.gen(function*() {
          switch (row.status) {
            case "SUBMITTED": {
              // The settings as the API reads them (Tenants.getCached: an operator's change clears the cache in every
              // process at once; a lost notification is bounded by the TTL), one query less per withdrawal.
              const tenant = yield* tenants.getCached(row.tenant_id)
              // Fail closed: without the tenant there is no blocklist or approval threshold to apply, so the
              // withdrawal must not move on under defaults; it stays SUBMITTED and the failure is reported.
              if (tenant === undefined) {
                return yield* Effect.die(new Error(`withdrawal ${row.id}: its tenant ${row.tenant_id} does not exist`))
              }
              const settings = tenant.settings
              if (isBlockedAddress(settings.blockedAddresses, catalog.network(row.network_key)!, row.destination_address)) {
                return yield* moveOn(row, "blockByPolicy")
              }
              const threshold = settings.withdrawalApprovalAbove?.[row.asset_id]
              const pending = threshold !== undefined && row.amount > threshold
              if (pending) return yield* moveOn(row, "awaitAuthorization")
              // The QUEUED step's reads ride on the queue transition's statement (with HOT known: else it waits).
              const hot = yield* hotAddress(row.network_key)
              return yield* moveOn(row, "queue", hot === undefined ? {} : { readForQueued: { from: hot } })
            }
            case "QUEUED": {
              const chain = clients.get(row.network_key)?.withdrawals
              const from = yield* hotAddress(row.network_key)
              if (chain === undefined || from === undefined) {
                yield* Effect.logWarning(`withdrawal ${row.id}: ${row.network_key} cannot send withdrawals; it waits QUEUED`)
                return "STOP" as const
              }
              // The switches and the sends from HOT not yet taken by a node: read by the transition that queued it, or
              // here in one statement (db/ReadPart.ts).
              const [switched, reserved, walletSends] = (row as Pick<LoadedWithdrawal, "queuedReads">).queuedReads ??
                (yield* readTogether(sql, ...queuedParts(row.network_key, from, row.source_wallet_id)))
              // A wallet frozen after this was submitted holds it here, like the switches below: nothing leaves a
              // frozen wallet once the freeze has committed. Unfreezing re-asks it (ops/SwitchHandlers.ts).
              if (!walletSends) {
                yield* Effect.logInfo(`withdrawal ${row.id}: its wallet may not send (frozen or hidden); it waits QUEUED`)
                return "STOP" as const
              }
              // The operator's switches hold what is not signed yet (docs/operations.md): switching withdrawals off
              // in an incident stops the outflow, not only new requests. Switching them on re-asks these at once.
              if (!switched.withdrawable(catalog.asset(row.asset_id)!, catalog.network(row.network_key)!)) {
                yield* Effect.logInfo(`withdrawal ${row.id}: withdrawals of ${row.asset_id} are switched off; it waits QUEUED`)
                return "STOP" as const
              }
              const transfer = transferOf(row, from)
              // Sends signed but not yet taken by a node are not in its balance yet (`reserved`): they are added to
              // what this one needs (native network fees included), so concurrent withdrawals cannot all count one
              // balance.
              const nativeAssetId = catalog.network(row.network_key)!.nativeAssetId
              const fee = yield* chain.networkFee(row.asset_id)
              const covered = yield* chain.hotWalletCovers(
                { ...transfer, amount: transfer.amount + (reserved.get(row.asset_id) ?? 0n) },
                fee + (row.asset_id === nativeAssetId ? 0n : reserved.get(nativeAssetId) ?? 0n)
              )
              if (!covered) {
                yield* transition(row, "awaitPlatformFunds")
                return "STOP" as const
              }
              return yield* moveOn(row, "startSigning")
            }
            case "PENDING_SIGNATURE":
              return yield* signAndBroadcast(row)
            default:
              // PENDING_AUTHORIZATION waits for the operator, CONFIRMING for the chain; the rest are terminal.
              return "STOP" as const
          }
        })

      /**
       * The signing guard of a batch's withdrawals (OutgoingSends `guardTogether`): those still PENDING_SIGNATURE,
       * locked in id order by one statement of fixed text, so that cancel (which refuses PENDING_SIGNATURE and takes
       * the same row) and a second run of the step wait for the signing transaction.
       */
      const pendingSignatures = {
        key: "WITHDRAWAL/PENDING_SIGNATURE",
        lock: (ownerIds: ReadonlyArray<string>) =>
          sql`
            SELECT id::text AS id FROM transactions
            WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ownerIds)}::jsonb)::uuid)
              AND kind = 'WITHDRAWAL' AND status = 'PENDING_SIGNATURE'
            ORDER BY id FOR UPDATE`.pipe(
            Effect.map((rows): ReadonlySet<string> => new Set(rows.map((row) => String(row["id"])))),
            Effect.orDie
          )
      }

      /**
       * PENDING_SIGNATURE: the send signed once (sending/OutgoingSends.ts: nonce, signature and stored bytes in one
       * database transaction, guarded by this row), then broadcast. The withdrawal's own columns keep a copy of the
       * first signature for the operator's views.
       */
      const signAndBroadcast = (row: WithdrawalRow) =>
        Effect.gen(function*() {
          const from = yield* hotAddress(row.network_key)
          if (clients.get(row.network_key)?.withdrawals === undefined || from === undefined) return "STOP" as const
          const signing = yield* sends.sign(
            { purpose: "WITHDRAWAL", ownerId: row.id, networkKey: row.network_key, key: platformKey("HOT"), transfer: transferOf(row, from) },
            {
              guard: sql`
                SELECT id FROM transactions WHERE id = ${row.id} AND kind = 'WITHDRAWAL' AND status = 'PENDING_SIGNATURE'
                FOR UPDATE`.pipe(Effect.map((rows) => rows.length === 1), Effect.orDie),
              guardTogether: pendingSignatures,
              onSigned: (signed) =>
                sql`
                  UPDATE withdrawals SET signed_raw = ${signed.raw}, signed_tx_hash = ${signed.txHash},
                    network_fee = ${signed.networkFeeMax.toString()},
                    network_fee_asset_id = ${catalog.network(row.network_key)!.nativeAssetId}, signed_at = ${signed.at}
                  WHERE transaction_id = ${row.id} AND signed_raw IS NULL`,
              knownUnsigned: row.signed_raw === null
            }
          )
          switch (signing._tag) {
            case "Superseded":
              return "NEXT" as const
            case "SignerDown":
              // decisions.md: an unreachable signer makes the withdrawal wait in PENDING_SIGNATURE, retried later.
              yield* Effect.logWarning(`withdrawal ${row.id}: the signer is not available (${signing.message}); will retry`)
              return "STOP" as const
            case "Refused":
              yield* Effect.logError(`withdrawal ${row.id}: the signer refused it for good: ${signing.message}`)
              yield* transition(row, "failSigning")
              return "NEXT" as const
          }
          const send = signing.send
          // Accepted: counted (on the withdrawal and on the send) by the CONFIRMING transition's statement, the next
          // one; otherwise the withdrawal's count on its own. Not called (claimed by another process, or held by the
          // node already: OutgoingSends.ts, sql/0029), nothing to count.
          const { outcome: sent, count, called } = yield* sends.broadcastCountedByCaller(send)
          if (sent !== "SENT" && called) yield* countBroadcast(row.id).pipe(Effect.orDie)
          if (sent === "REJECTED") {
            yield* transition(row, "failBroadcast")
            return "NEXT" as const
          }
          if (sent === "LATER") return "STOP" as const
          return yield* moveOn(row, "broadcast", {
            txHash: send.versions[send.versions.length - 1]!.tx_hash,
            countBroadcast: called,
            countVersion: count
          })
        })

      const process = Effect.fn("WithdrawalProcessor.process")(function*(withdrawalId: string) {
        let known: WithdrawalRow | undefined
        for (let steps = 0; steps < processStepsMax; steps++) {
          const row = known ?? (yield* load(withdrawalId))
          if (row === undefined) return "MISSING" as const
          const outcome: Step = yield* step(row).pipe(
            Effect.catchTag("ChainUnavailable", (error) =>
              Effect.as(Effect.logWarning(`withdrawal ${withdrawalId}: ${error.message}; will retry`), "STOP" as const))
          )
          if (outcome === "STOP") return row.status
          known = outcome === "NEXT" ? undefined : outcome
        }
        return (yield* load(withdrawalId))?.status ?? "MISSING"
      })

      // The CONFIRMING withdrawals seen in a block, not checked again before their confirmations are due.
      const seenInclusions = yield* makeSeenInclusions

      const confirm = Effect.fn("WithdrawalProcessor.confirm")(function*(networkKey: string) {
        const client = clients.get(networkKey)
        const network = catalog.network(networkKey)
        if (client?.withdrawals === undefined || network === undefined) return 0
        yield* sends.settleFills(networkKey)
        const waiting = yield* sql`
          SELECT id FROM transactions
          WHERE kind = 'WITHDRAWAL' AND status = 'CONFIRMING' AND network_key = ${networkKey}
          ORDER BY id LIMIT ${confirmationsPerCheckMax}`.pipe(Effect.orDie, Effect.flatMap(confirmingRows))
        if (waiting.length === 0) return 0
        const head = yield* client.head
        const inclusions = yield* seenInclusions.pass(
          network,
          head,
          waiting.map(({ id }) => id),
          waiting.length < confirmationsPerCheckMax
        )
        let completed = 0
        for (const { id } of waiting) {
          if (!inclusions.due(id)) continue
          const row = yield* load(id)
          if (row === undefined || row.status !== "CONFIRMING") continue
          const send = yield* sends.forOwner("WITHDRAWAL", id)
          if (send === undefined) continue
          // Included and final, or still waiting (then rebroadcast if the node forgot it, replaced if stuck).
          const outcome = yield* sends.check(send, head)
          if (outcome._tag === "Conflicted") {
            // Provably never included (an input spent for good by another transaction): the funds go back.
            const failed = yield* sql.withTransaction(Effect.gen(function*() {
              const done = yield* transition(row, "failConflicted")
              if (done) yield* sends.markRejected(send)
              return done
            })).pipe(Effect.orDie)
            if (failed) yield* Effect.logWarning(`withdrawal ${id}: no version of its send can be included any more; FAILED`)
            continue
          }
          inclusions.checked(id, outcome)
          if (outcome._tag !== "Final") continue
          const details: TransitionDetails = {
            txHash: outcome.txHash,
            networkFee: { amount: outcome.networkFee, assetId: network.nativeAssetId, blockHeight: outcome.height }
          }
          const moved = yield* sql.withTransaction(Effect.gen(function*() {
            const done = yield* transition(row, outcome.succeeded ? "complete" : "revertOnChain", details)
            if (done) yield* sends.markFinal(send, outcome)
            return done
          })).pipe(Effect.orDie)
          if (moved && outcome.succeeded) completed++
          if (moved && !outcome.succeeded) yield* Effect.logWarning(`withdrawal ${id}: ${outcome.txHash} reverted on chain`)
        }
        yield* inclusions.end
        return completed
      }, (effect) => effect.pipe(Effect.catchTag("ChainUnavailable", (error) =>
        Effect.as(Effect.logWarning(`withdrawal confirmations: ${error.message}`), 0))))

      return WithdrawalProcessor.of({ process, confirm, transition, load })
    })
  )
}
