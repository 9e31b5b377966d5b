/**
 * Finds, confirms and credits deposits, and reverses them on reorganizations (spec section 3 and decisions.md,
 * "Deposits"). One scan of a network:
 *
 * 1. follows the chain block by block from the watcher's cursor, checking before each step that the block it last
 *    processed is still on the chain (same hash at that height); when it is not, it rewinds one block and deals with
 *    the deposits in it (below), until it is back on the chain;
 * 2. records every transfer to a registered deposit address as a DEPOSIT in `CONFIRMING`, keyed by
 *    (network, txHash, output index), so seeing it again never creates a second record (`TRANSACTION_CREATED`);
 * 3. settles each confirming deposit whose block meets the network's confirmation rule: credited net of the
 *    deposit fee, or not credited (`BELOW_MIN_DEPOSIT`, `MANUAL_REVIEW`), with `TRANSACTION_STATUS_UPDATED`.
 *
 * Every step asks the chain first, outside any transaction, then writes in one database transaction holding the
 * network's cursor row (FOR UPDATE) after checking that the cursor has not moved since (else the step starts over),
 * so scans of one network never overlap, across processes too, a crash between steps leaves nothing half done, and
 * no row stays locked while a node answers (docs/ledger.md "Locks and timeouts"). The ledger posting,
 * the status change and the event of a deposit commit together.
 *
 * Deposits in a block the chain dropped: a confirming one goes back to waiting for a block if the chain still has
 * its transaction (pending or re-mined), else it ends `FAILED`/`DROPPED`; a credited one whose transaction is gone
 * from the chain is `REVERSED` and debited back (which may overdraw: decisions.md), with `DEPOSIT_REVERSED`.
 *
 * Past 300 lines on purpose, for now: rewinding, recording and settling are steps of one scan that share its cursor
 * protocol (lock the row, check it has not moved, write). The pure decisions live in DepositDecisions.ts and the
 * background loop in DepositWatcherLoop.ts; the steps themselves are to be split once issue 9's row decoding and
 * postings module, which rewrite these same lines, have landed.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog, type CatalogAsset } from "../catalog/Catalog.ts"
import { FeeFloors } from "../catalog/FeeFloors.ts"
import { type DynamicFloors, effectiveDepositFee } from "../catalog/Fees.ts"
import {
  type ChainClient,
  ChainClients,
  type ChainHead,
  type ChainTransfer,
  type TransactionState
} from "../chains/ChainClient.ts"
import { decodeFirstRow, decodeRows, decodeSingleRow, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { decideOrphanedDeposit, meetsConfirmationRule } from "./DepositDecisions.ts"
import { Ids } from "../domain/Ids.ts"
import { type EntryRequest, Ledger } from "../ledger/Ledger.ts"
import { forgetPlatformReceiptsAbove, recordPlatformReceipts } from "../ledger/PlatformReceipts.ts"
import { entryRequest, Postings } from "../ledger/Postings.ts"
import { Outbox } from "../outbox/Outbox.ts"
import { insertTransactions, type NewTransaction } from "../transactions/NewTransaction.ts"
import { type Tenant, Tenants } from "../tenants/Tenants.ts"
import { SubStatus, TransactionStatus } from "../transactions/Transaction.ts"
import { TransactionEvents } from "../transactions/TransactionEvents.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { reopenSendsAbove } from "../sending/ReorganizedSends.ts"

// Its home is DepositDecisions.ts; exported here too for the callers that import it from the watcher.
export { meetsConfirmationRule } from "./DepositDecisions.ts"

/** How often each watched network is scanned in the background. */
export const scanIntervalMillis = 1_000
/** Blocks one scan processes at most, so one network cannot hold its lock (or starve others) for long. */
export const blocksPerScanMax = 200
/** Recent block hashes kept per network: reorganizations deeper than this are not detected. */
export const blockHistoryMax = 1_000
/** Deposits settled per scan at most; the rest wait for the next scan. */
export const settlementsPerScanMax = 10_000
/**
 * Deposits settled per database transaction: one commit (and one flush of the write-ahead log) for this many, and
 * statements whose parameters stay far below PostgreSQL's limit.
 */
export const settlementsPerTransactionMax = 500
/** Deposits recorded per statement. */
const recordChunkRows = 1_000

export interface ScanResult {
  readonly networkKey: string
  readonly height: bigint
  readonly headHeight: bigint
  readonly recorded: number
  readonly settled: number
  readonly rewound: number
}

/** The columns of `depositColumns`, decoded (db/RowSchemas.ts): amounts and heights as bigint. */
const DepositRow = Schema.Struct({
  id: Text,
  tenant_id: Text,
  status: Schema.Literals(TransactionStatus),
  sub_status: Nullable(Schema.Literals(SubStatus)),
  asset_id: Text,
  amount: Numeric,
  fee: Nullable(Numeric),
  tx_hash: Text,
  block_height: Nullable(Numeric),
  destination_wallet_id: Text
})
type DepositRow = typeof DepositRow.Type

/** A deposit as settling reads it: with its address, wallet and the operator's switches (sql/0010_switches.sql). */
const SettlingRow = Schema.Struct({
  ...DepositRow.fields,
  watch_status: Text,
  wallet_status: Text,
  switch_deposit_enabled: Schema.Boolean,
  switch_watch: Text,
  asset_switch_status: Text
})

const CursorRow = Schema.Struct({ height: Numeric, head_height: Numeric })

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const cursorHeightRow = decodeFirstRow(Schema.Struct({ height: Numeric }), "DepositWatcher.cursorHeight")
const lockedCursorRow = decodeFirstRow(Schema.Struct({ height: Numeric }), "DepositWatcher.lockCursorAt")
const storedHashRow = decodeFirstRow(Schema.Struct({ hash: Text }), "DepositWatcher.storedHash")
const orphanTxRows = decodeRows(Schema.Struct({ tx_hash: Text }), "DepositWatcher.orphanStates")
const orphanedRows = decodeRows(DepositRow, "DepositWatcher.rewindTo")
const ownerRows = decodeRows(
  Schema.Struct({ address: Text, wallet_id: Text, tenant_id: Text, user_id: Text }),
  "DepositWatcher.recordTransfers (owners)"
)
const topUpRows = decodeRows(Schema.Struct({ tx_hash: Text }), "DepositWatcher.recordTransfers (top-ups)")
const settlingRows = decodeRows(SettlingRow, "DepositWatcher.settleMany")
const waitingRows = decodeRows(Schema.Struct({ id: Text, block_height: Numeric }), "DepositWatcher.settleConfirmed")
const scannedCursorRow = decodeSingleRow(CursorRow, "DepositWatcher.scan (cursor)")

export class DepositWatcher extends Context.Service<DepositWatcher, {
  /** Scans one network now (see the module comment); the background loop calls the same. */
  readonly scan: (networkKey: string) => Effect.Effect<ScanResult>
}>()("coffer/DepositWatcher") {
  static readonly layer = Layer.effect(
    DepositWatcher,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      const ledger = yield* Ledger
      const tenants = yield* Tenants
      const ids = yield* Ids
      const outbox = yield* Outbox
      const transactionEvents = yield* TransactionEvents
      const feeFloors = yield* FeeFloors
      const platformAddresses = yield* PlatformAddresses

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const statusEvent = (deposit: { tenant_id: string; id: string }, status: TransactionStatus, subStatus: SubStatus | null) =>
        transactionEvents.statusUpdated(deposit.tenant_id, deposit.id, status, subStatus)

      /**
       * The cursor's height, read without a lock; created at the chain's start (or head) on first use. Where to start
       * is asked of the chain before the rows are written, outside any transaction.
       */
      const cursorHeight = (client: ChainClient) =>
        Effect.gen(function*() {
          const read = () =>
            sql`SELECT height::text AS height FROM chain_cursors WHERE network_key = ${client.networkKey}`.pipe(
              Effect.flatMap(cursorHeightRow)
            )
          const existing = yield* read()
          if (existing !== undefined) return existing.height
          const head = yield* client.head
          const start = client.startFromGenesis ? 0n : head.height
          const block = yield* client.block(start)
          const at = yield* now
          yield* sql.withTransaction(Effect.gen(function*() {
            const created = yield* sql`
              INSERT INTO chain_cursors (network_key, height, head_height, updated_at, started_height)
              VALUES (${client.networkKey}, ${start.toString()}, ${head.height.toString()}, ${at}, ${start.toString()})
              ON CONFLICT DO NOTHING
              RETURNING network_key`
            // Another process created it first, maybe at another height: its start stands.
            if (created.length > 0 && block !== undefined) {
              yield* sql`INSERT INTO chain_blocks (network_key, height, hash)
                VALUES (${client.networkKey}, ${start.toString()}, ${block.hash}) ON CONFLICT DO NOTHING`
            }
          }))
          const created = yield* read()
          if (created === undefined) return yield* Effect.die(new Error(`no cursor for ${client.networkKey} after creating it`))
          return created.height
        })

      /**
       * Locks the cursor row for this transaction; true when the cursor still stands at `height` with the block hash
       * `stored` there, i.e. nothing moved since the step read them and asked the chain. Otherwise another scan got
       * there first and the step starts over.
       */
      const lockCursorAt = (networkKey: string, height: bigint, stored: string | undefined) =>
        Effect.gen(function*() {
          const row = yield* sql`
            SELECT height::text AS height FROM chain_cursors WHERE network_key = ${networkKey} FOR UPDATE`.pipe(
            Effect.flatMap(lockedCursorRow)
          )
          return row !== undefined && row.height === height && (yield* storedHash(networkKey, height)) === stored
        })

      const storedHash = (networkKey: string, height: bigint) =>
        Effect.map(
          sql`SELECT hash FROM chain_blocks WHERE network_key = ${networkKey} AND height = ${height.toString()}`.pipe(
            Effect.flatMap(storedHashRow)
          ),
          (row) => row?.hash
        )

      const setCursor = (networkKey: string, height: bigint, headHeight: bigint) =>
        Effect.gen(function*() {
          yield* sql`UPDATE chain_cursors SET height = ${height.toString()}, head_height = ${headHeight.toString()},
            updated_at = ${yield* now} WHERE network_key = ${networkKey}`
        })

      const depositColumns = sql`id, tenant_id, status, sub_status, asset_id, amount::text AS amount, fee::text AS fee,
        tx_hash, block_height::text AS block_height, destination_wallet_id`

      const creditOf = (deposit: DepositRow) => ({
        walletId: deposit.destination_wallet_id,
        assetId: deposit.asset_id,
        amount: deposit.amount
      })

      /**
       * What the chain says now of the transactions of the deposits in blocks above `height`: asked before the
       * rewind's transaction, so no row is locked while a node answers.
       */
      const orphanStates = (client: ChainClient, height: bigint) =>
        Effect.gen(function*() {
          const rows = yield* sql`
            SELECT DISTINCT tx_hash FROM transactions
            WHERE kind = 'DEPOSIT' AND network_key = ${client.networkKey} AND block_height > ${height.toString()}`
            .pipe(Effect.flatMap(orphanTxRows))
          const states = new Map<string, TransactionState>()
          for (const { tx_hash } of rows) states.set(tx_hash, yield* client.transactionState(tx_hash))
          return states
        })

      /**
       * The deposits in blocks above `height` lose their block: the chain no longer has it. Runs inside the scan's
       * transaction, before the cursor moves back to `height`, with the chain's answers of `orphanStates`; undefined
       * (and nothing changed) when a deposit there has no answer, so the step starts over.
       */
      const rewindTo = (client: ChainClient, height: bigint, states: ReadonlyMap<string, TransactionState>) =>
        Effect.gen(function*() {
          const orphaned = yield* sql`
            SELECT ${depositColumns} FROM transactions
            WHERE kind = 'DEPOSIT' AND network_key = ${client.networkKey} AND block_height > ${height.toString()}
            -- The column, not the text alias of the select list: heights order as numbers.
            ORDER BY transactions.block_height, transactions.id
            FOR UPDATE`.pipe(Effect.flatMap(orphanedRows))
          if (orphaned.some((deposit) => !states.has(deposit.tx_hash))) return undefined
          for (const deposit of orphaned) {
            const state = states.get(deposit.tx_hash)!
            const decision = decideOrphanedDeposit({ status: deposit.status, subStatus: deposit.sub_status }, state)
            if (decision === "DROP") {
              yield* sql`UPDATE transactions SET status = 'FAILED', sub_status = 'DROPPED', updated_at = ${yield* now}
                WHERE id = ${deposit.id}`
              yield* statusEvent(deposit, "FAILED", "DROPPED")
            } else if (decision === "AWAIT_BLOCK") {
              // A re-mined one is recorded again when its block is scanned.
              yield* sql`UPDATE transactions SET block_height = NULL, block_hash = NULL, updated_at = ${yield* now}
                WHERE id = ${deposit.id}`
            } else if (decision === "REVERSE") {
              const fee = deposit.fee ?? 0n
              yield* ledger.post(entryRequest(deposit.tenant_id, deposit.id, Postings.depositReversal(creditOf(deposit), fee)))
                .pipe(Effect.orDie)
              yield* sql`UPDATE transactions SET status = 'REVERSED', updated_at = ${yield* now} WHERE id = ${deposit.id}`
              yield* outbox.record({
                tenantId: deposit.tenant_id,
                type: "DEPOSIT_REVERSED",
                subjectId: deposit.id,
                dedupeKey: "reversed",
                data: { depositId: deposit.id }
              })
              yield* statusEvent(deposit, "REVERSED", null)
            }
            // KEEP: nothing to undo (see DepositDecisions.ts).
          }
          yield* sql`DELETE FROM chain_blocks WHERE network_key = ${client.networkKey} AND height > ${height.toString()}`
          yield* forgetPlatformReceiptsAbove(sql, client.networkKey, height)
          // Sends final in the forgotten blocks are in flight again (sending/ReorganizedSends.ts).
          yield* reopenSendsAbove(sql, client.networkKey, height, yield* now)
          return orphaned.length
        })

      /** Records the block's transfers to registered addresses; returns how many deposits are new. */
      const recordTransfers = (client: ChainClient, height: bigint, hash: string, transfers: ReadonlyArray<ChainTransfer>) =>
        Effect.gen(function*() {
          if (transfers.length === 0) return 0
          const addresses = [...new Set(transfers.map((transfer) => transfer.to))]
          const owners = yield* sql`
            SELECT a.address, a.wallet_id, a.tenant_id, w.user_id
            FROM wallet_addresses a JOIN wallets w ON w.id = a.wallet_id
            WHERE a.network_key = ${client.networkKey}
              AND a.address IN (SELECT jsonb_array_elements_text(${JSON.stringify(addresses)}::jsonb))`.pipe(
              Effect.flatMap(ownerRows)
            )
          const ownerOf = new Map(owners.map((owner) => [owner.address, owner]))
          // A GAS wallet's top-up before a token sweep (sweeps/Sweeps.ts) pays a deposit address platform coin, not
          // a user's: it is no deposit (decisions.md: sweeps and top-ups never touch user balances). Its signed
          // version is stored before it is broadcast, so it is known here by its hash.
          const hashes = JSON.stringify([...new Set(transfers.map((transfer) => transfer.txHash))])
          const topUps = owners.length === 0 ? new Set<string>() : new Set((yield* sql`
            SELECT v.tx_hash FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
            WHERE v.network_key = ${client.networkKey} AND s.purpose = 'TOP_UP'
              AND v.tx_hash IN (SELECT jsonb_array_elements_text(${hashes}::jsonb))`
            .pipe(Effect.flatMap(topUpRows))).map((row) => row.tx_hash))
          const at = yield* now
          const rows: Array<NewTransaction> = []
          const seen = new Set<string>()
          for (const transfer of transfers) {
            const owner = ownerOf.get(transfer.to)
            const asset = catalog.asset(transfer.assetId)
            // Transfers to addresses nobody registered, or of assets outside the catalog, are not deposits.
            if (owner === undefined || asset === undefined || asset.networkKey !== client.networkKey) continue
            if (topUps.has(transfer.txHash)) continue
            // One row per output: a statement may not upsert the same key twice.
            const key = `${transfer.txHash}/${transfer.outputIndex}`
            if (seen.has(key)) continue
            seen.add(key)
            rows.push({
              id: yield* ids.uuidV7For("transaction"),
              tenantId: owner.tenant_id,
              kind: "DEPOSIT",
              settlement: "ON_CHAIN",
              status: "CONFIRMING",
              assetId: transfer.assetId,
              networkKey: client.networkKey,
              amount: transfer.amount,
              source: { address: transfer.from },
              destination: { walletId: owner.wallet_id, address: transfer.to, userId: owner.user_id },
              txHash: transfer.txHash,
              outputIndex: transfer.outputIndex,
              blockHeight: height,
              blockHash: hash,
              at
            })
          }
          // All of a block's deposits in a few statements (a block may carry thousands): the rows travel as one JSON
          // parameter per chunk, and the events of the new ones are recorded together.
          let recorded = 0
          for (let offset = 0; offset < rows.length; offset += recordChunkRows) {
            const chunk = rows.slice(offset, offset + recordChunkRows)
            const upserted = yield* insertTransactions(chunk, { onConflict: "depositSeenAgain" })
            const created = upserted.filter((row) => row.inserted)
            recorded += created.length
            yield* transactionEvents.changes(
              created.map((row) => ({ transactionId: row.id, change: "created" as const }))
            )
          }
          return recorded
        })

      /**
       * One step: verify the last processed block, then process the next one. Returns what happened. The chain is
       * asked first, outside any transaction (a slow node must never hold the cursor or a deposit or balance row);
       * the transaction then locks the cursor, checks that nothing moved meanwhile, and writes.
       */
      const step = (client: ChainClient) =>
        Effect.gen(function*() {
          const height = yield* cursorHeight(client)
          const head = yield* client.head
          const onChain = yield* client.block(height)
          const stored = yield* storedHash(client.networkKey, height)
          const moved = { _tag: "Moved" as const, head }
          if (height > 0n && (onChain === undefined || (stored !== undefined && onChain.hash !== stored))) {
            // The block we stood on is gone: step back and undo what depended on it.
            const states = yield* orphanStates(client, height - 1n)
            return yield* sql.withTransaction(Effect.gen(function*() {
              if (!(yield* lockCursorAt(client.networkKey, height, stored))) return moved
              const rewound = yield* rewindTo(client, height - 1n, states)
              if (rewound === undefined) return moved
              yield* setCursor(client.networkKey, height - 1n, head.height)
              return { _tag: "Rewound" as const, rewound, head }
            }))
          }
          const next = height >= head.height ? undefined : yield* client.block(height + 1n)
          if (next === undefined) {
            yield* sql.withTransaction(Effect.gen(function*() {
              if (yield* lockCursorAt(client.networkKey, height, stored)) yield* setCursor(client.networkKey, height, head.height)
            }))
            return { _tag: "AtHead" as const, head }
          }
          // The chain books' witness of money put on operating addresses from outside (ledger/PlatformReceipts.ts).
          const operating = next.transfers.length === 0 ? [] : yield* platformAddresses.list
          return yield* sql.withTransaction(Effect.gen(function*() {
            if (!(yield* lockCursorAt(client.networkKey, height, stored))) return moved
            const recorded = yield* recordTransfers(client, next.height, next.hash, next.transfers)
            yield* recordPlatformReceipts(
              sql,
              { networkKey: client.networkKey, height: next.height, hash: next.hash, transfers: next.transfers },
              operating,
              (assetId) => catalog.asset(assetId)?.networkKey,
              yield* now
            )
            yield* sql`INSERT INTO chain_blocks (network_key, height, hash)
              VALUES (${client.networkKey}, ${next.height.toString()}, ${next.hash})
              ON CONFLICT (network_key, height) DO UPDATE SET hash = EXCLUDED.hash`
            yield* sql`DELETE FROM chain_blocks WHERE network_key = ${client.networkKey}
              AND height < ${(next.height - BigInt(blockHistoryMax)).toString()}`
            yield* setCursor(client.networkKey, next.height, head.height)
            return { _tag: "Advanced" as const, recorded, head }
          }))
        })

      /**
       * Credits (or settles without credit) the deposits among `depositIds` that are still confirming, all in one
       * database transaction: each deposit's ledger entry, status and event commit together (with the others').
       * Answers how many were settled.
       */
      const settleMany = (depositIds: ReadonlyArray<string>, floors: (asset: CatalogAsset) => DynamicFloors) =>
        sql.withTransaction(Effect.gen(function*() {
          // The operator's switches are read here, in the settling transaction, so one set a moment ago holds
          // (operator-interface.md, "Switches"; sql/0010_switches.sql). Locked in id order, as every settlement
          // locks them, so two processes never wait on each other in a cycle.
          const deposits = yield* sql`
            SELECT t.id, t.tenant_id, t.status, t.sub_status, t.asset_id, t.amount::text AS amount, t.fee::text AS fee,
              t.tx_hash, t.block_height::text AS block_height, t.destination_wallet_id,
              a.watch_status, w.status AS wallet_status,
              n.switch_deposit_enabled, n.switch_watch, s.switch_status AS asset_switch_status
            FROM transactions t
            JOIN wallets w ON w.id = t.destination_wallet_id
            JOIN wallet_addresses a ON a.wallet_id = t.destination_wallet_id AND a.network_key = t.network_key
            JOIN networks n ON n.network_key = t.network_key
            JOIN assets s ON s.asset_id = t.asset_id
            WHERE t.id IN (SELECT value::uuid FROM jsonb_array_elements_text(${JSON.stringify(depositIds)}::jsonb))
            ORDER BY t.id
            FOR UPDATE OF t`.pipe(Effect.flatMap(settlingRows))
          const credits: Array<EntryRequest> = []
          const updates: Array<{ id: string; fee: string | null; sub_status: SubStatus | null }> = []
          // Read once per transaction, not per deposit: a block's deposits mostly belong to a few tenants.
          const tenantsRead = new Map<string, Tenant | undefined>()
          for (const deposit of deposits) {
            if (deposit.status !== "CONFIRMING" || deposit.block_height === null) continue
            const asset = catalog.asset(deposit.asset_id)!
            const network = catalog.network(asset.networkKey)!
            if (!tenantsRead.has(deposit.tenant_id)) tenantsRead.set(deposit.tenant_id, yield* tenants.get(deposit.tenant_id))
            const tenant = tenantsRead.get(deposit.tenant_id)
            // Fail closed (docs/deposits.md, "A deposit whose tenant is missing"): never credit under default
            // settings. The foreign keys make this unreachable; should it happen, the deposit is held for the
            // operator like any other deposit the watcher may not credit, and the error is logged.
            if (tenant === undefined) {
              yield* Effect.logError(`deposit ${deposit.id}: its tenant ${deposit.tenant_id} does not exist; held for review`)
              updates.push({ id: deposit.id, fee: null, sub_status: "MANUAL_REVIEW" })
              continue
            }
            const amount = deposit.amount
            // Fee rule 2 with the current dynamic floor: the depositFeeRaw /v1/supported_assets shows now.
            const fee = effectiveDepositFee(asset, tenant.settings, floors(asset).deposit)
            // The network may have been taken from the tenant since the address was handed out.
            const networkOfTenant = tenant.networks.includes(network.networkKey)
            const heldForReview = asset.status !== "ENABLED" || deposit.asset_switch_status !== "ENABLED" ||
              !network.depositEnabled || !deposit.switch_deposit_enabled || !networkOfTenant ||
              deposit.watch_status === "FROZEN" || deposit.switch_watch === "FROZEN" || deposit.wallet_status === "FROZEN"
            const subStatus: SubStatus | null = heldForReview
              ? "MANUAL_REVIEW"
              : amount < asset.minDeposit || amount <= fee
              ? "BELOW_MIN_DEPOSIT"
              : null
            if (subStatus === null) {
              credits.push(entryRequest(deposit.tenant_id, deposit.id, Postings.depositCredit(creditOf(deposit), fee)))
            }
            updates.push({ id: deposit.id, fee: subStatus === null ? fee.toString() : null, sub_status: subStatus })
          }
          if (updates.length === 0) return 0
          yield* ledger.postMany(credits).pipe(Effect.orDie)
          const at = yield* now
          yield* sql`
            UPDATE transactions t SET status = 'COMPLETED', fee = coalesce(u.fee, t.fee), sub_status = u.sub_status,
              updated_at = ${at}
            FROM jsonb_to_recordset(${JSON.stringify(updates)}::jsonb) AS u(id uuid, fee numeric, sub_status text)
            WHERE t.id = u.id`
          yield* transactionEvents.changes(updates.map((update) => ({
            transactionId: update.id,
            change: "status" as const,
            status: "COMPLETED" as const,
            subStatus: update.sub_status
          })))
          return updates.length
        }))

      const settleConfirmed = (client: ChainClient, head: ChainHead) =>
        Effect.gen(function*() {
          const network = catalog.network(client.networkKey)
          if (network === undefined) return 0
          const waiting = yield* sql`
            SELECT id, block_height::text AS block_height FROM transactions
            WHERE kind = 'DEPOSIT' AND status = 'CONFIRMING' AND network_key = ${client.networkKey}
              AND block_height IS NOT NULL AND block_height <= ${head.height.toString()}
            ORDER BY transactions.block_height, transactions.id
            LIMIT ${settlementsPerScanMax}`.pipe(Effect.flatMap(waitingRows))
          const due = waiting
            .filter((deposit) => meetsConfirmationRule(network, head, deposit.block_height))
            .map((deposit) => deposit.id)
          if (due.length === 0) return 0
          // Fee rule 3's floors, read before the settling transactions: a node's fee estimate never runs while they
          // hold their row locks.
          const floors = yield* feeFloors.floors(catalog.assets.filter((asset) => asset.networkKey === network.networkKey))
          let settled = 0
          for (let offset = 0; offset < due.length; offset += settlementsPerTransactionMax) {
            settled += yield* settleMany(due.slice(offset, offset + settlementsPerTransactionMax), floors)
          }
          return settled
        })

      const scan = Effect.fn("DepositWatcher.scan")(function*(networkKey: string) {
        const client = clients.get(networkKey)
        if (client === undefined) return yield* Effect.die(new Error(`network ${networkKey} has no chain client`))
        let recorded = 0
        let rewound = 0
        let head: ChainHead | undefined
        // Each rewind or advance is one step; a deep reorg takes as many rewinds as blocks it replaced. A step that
        // found the cursor moved counts too, so two scans racing each other still end.
        for (let steps = 0; steps < blocksPerScanMax + blockHistoryMax; steps++) {
          const outcome = yield* step(client)
          head = outcome.head
          if (outcome._tag === "AtHead") break
          // Moved: another scan of this network stepped first; this one reads the cursor again.
          if (outcome._tag === "Rewound") rewound += outcome.rewound
          else if (outcome._tag === "Advanced") recorded += outcome.recorded
          if (outcome._tag === "Advanced" && steps >= blocksPerScanMax) break
        }
        const settled = head === undefined ? 0 : yield* settleConfirmed(client, head)
        const cursor = yield* sql`
          SELECT height::text AS height, head_height::text AS head_height FROM chain_cursors WHERE network_key = ${networkKey}`
          .pipe(Effect.flatMap(scannedCursorRow))
        return {
          networkKey,
          height: cursor.height,
          headHeight: cursor.head_height,
          recorded,
          settled,
          rewound
        }
      }, (effect) => effect.pipe(Effect.orDie, Effect.provideService(SqlClient.SqlClient, sql)))

      return DepositWatcher.of({ scan })
    })
  )
}
