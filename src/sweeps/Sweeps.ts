/**
 * Sweeps and gas wallets on EVM, TRON and SOL networks with a real sending client (docs/sweeps.md, docs/tron.md,
 * docs/sol.md;
 * decisions.md "Operating wallets, sweeps, gas and fee floors"). One `pass` of a network:
 *
 * 1. collect: deposit addresses with a deposit credited since the last look become due (sweep_sources);
 * 2. plan: a due address's balance of the asset, if at least the threshold, becomes a SWEEP row to HOT (while HOT
 *    holds less than the asset's hot target) or to SWEEP. A native sweep pays its own fee: amount = balance −
 *    gas × maxFeePerGas, signed with the tip equal to maxFeePerGas so the fee charged is exactly that product and the
 *    address ends at 0. A token sweep needs gas × maxFeePerGas of native coin at the address: the tenant's GAS
 *    wallet sends the difference first (a TOP_UP row); while GAS cannot pay it, the sweep is WAITING_GAS. On SOL
 *    there is no top-up: the GAS wallet is the SPL sweep's fee payer (it signs beside the address), and a native SOL
 *    sweep pays its 5,000 lamports from what it moves;
 * 3. advance: PENDING rows are signed (sending/OutgoingSends: once per row, nonce from the PostgreSQL sequence) and
 *    broadcast (CONFIRMING); a token sweep is signed only once its top-up is COMPLETED; CONFIRMING rows become
 *    COMPLETED (or FAILED) with the actual network fee when final by the network's confirmation rule.
 *
 * Sweeps are platform movements: nothing here touches a user's balance, the ledger's user accounts or
 * `transactions`; the rows (with their network fees) are the record of what each operating address received and
 * paid. The GAS wallets' figures and VAULT_GAS_LOW are GasWallets.ts.
 *
 * Over 400 lines on purpose: collect, plan and advance share the row and its states and read best side by side.
 */
import { Clock, Context, Effect, Layer, Schema, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog, type CatalogNetwork } from "../catalog/Catalog.ts"
import { observeOperatingWallet } from "../observability/ServiceMetrics.ts"
import {
  ChainClients,
  type ChainHead,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../chains/ChainClient.ts"
import { nativeTransferGas } from "../chains/evm/EvmGas.ts"
import { lamportsPerSignature, withFeePayer } from "../chains/sol/SolWithdrawals.ts"
import { decodeFirstRow, decodeRows, Int4, Nullable, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"
import { Ids } from "../domain/Ids.ts"
import { OutgoingSends } from "../sending/OutgoingSends.ts"
import { type InclusionPass, makeSeenInclusions } from "../sending/SeenInclusions.ts"
import { gasKey, type SigningKey, walletKey } from "../signer/TransactionRequest.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { sweepThreshold } from "./SweepAmounts.ts"
import { maxFeePerGas, type SweepNetwork, sweepNetworks } from "./SweepNetworks.ts"

/** How far back each collection looks before the previous one's end: a crediting transaction may commit late. */
export const collectMarginMillis = 5 * 60_000
const batchMax = 100

export const SweepStatus = ["WAITING_GAS", "PENDING", "CONFIRMING", "COMPLETED", "FAILED"] as const
export type SweepStatus = (typeof SweepStatus)[number]

const SweepRow = Schema.Struct({
  id: Text,
  tenant_id: Text,
  network_key: Text,
  asset_id: Text,
  kind: Schema.Literals(["SWEEP", "TOP_UP"]),
  for_sweep_id: Nullable(Text),
  from_address: Text,
  to_address: Text,
  amount: Numeric,
  status: Schema.Literals(SweepStatus),
  tx_hash: Nullable(Text),
  network_fee: Nullable(Numeric),
  wallet_id: Nullable(Text),
  gas: Nullable(Numeric),
  max_fee_per_gas: Nullable(Numeric),
  max_priority_fee_per_gas: Nullable(Numeric),
  created_at: Timestamp
})
export type SweepRow = typeof SweepRow.Type

const SourceRow = Schema.Struct({ address: Text, asset_id: Text, tenant_id: Text, wallet_id: Text })
type SourceRow = typeof SourceRow.Type

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const sweepRows = decodeRows(SweepRow, "Sweeps.rows")
const sourceRows = decodeRows(SourceRow, "Sweeps.dueSources")
const walletIndexRow = decodeFirstRow(
  Schema.Struct({ tenant_seq: Int4, user_seq: Int4, wallet_seq: Int4 }),
  "Sweeps.walletKey"
)
const idRows = decodeRows(Schema.Struct({ id: Text }), "Sweeps.ids")

const sweepColumns = `id, tenant_id, network_key, asset_id, kind, for_sweep_id, from_address, to_address,
  amount::text AS amount, status, tx_hash, network_fee::text AS network_fee, wallet_id, gas::text AS gas,
  max_fee_per_gas::text AS max_fee_per_gas, max_priority_fee_per_gas::text AS max_priority_fee_per_gas, created_at`

export interface SweepListQuery {
  readonly networkKey?: string | undefined
  readonly status?: SweepStatus | undefined
  readonly limit: number
  /** The id of the last row of the previous page (rows are newest first). */
  readonly cursor?: string | undefined
}

export class Sweeps extends Context.Service<Sweeps, {
  /** Networks that sweep: EVM, TRON and SOL, a real node's client that sends and reads balances. */
  readonly networkKeys: ReadonlyArray<string>
  /** One collect, plan and advance of the network (see the module's comment); passes of a network never overlap. */
  readonly pass: (networkKey: string) => Effect.Effect<void>
  /** GET /ops/sweeps: newest first. */
  readonly list: (
    query: SweepListQuery
  ) => Effect.Effect<{ readonly items: ReadonlyArray<SweepRow>; readonly nextCursor: string | null }>
}>()("coffer/Sweeps") {
  static readonly layer = Layer.effect(
    Sweeps,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      // The CONFIRMING sweeps and top-ups seen in a block (sending/SeenInclusions.ts).
      const seenInclusions = yield* makeSeenInclusions
      const outgoing = yield* OutgoingSends
      const platform = yield* PlatformAddresses
      const ids = yield* Ids

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const networks = sweepNetworks(clients, catalog)
      const passLocks = new Map<string, Semaphore.Semaphore>()
      for (const networkKey of networks.keys()) passLocks.set(networkKey, yield* Semaphore.make(1))

      const native = (network: CatalogNetwork) => catalog.asset(network.nativeAssetId)!

      const evmParameters = (
        network: CatalogNetwork,
        gas: bigint,
        maxFee: bigint,
        tip: bigint
      ): WithdrawalParameters => ({
        family: "EVM",
        chainId: network.evmChainId!,
        // OutgoingSends takes the nonce from the PostgreSQL sequence of the sending address.
        nonce: 0,
        gas,
        maxFeePerGas: maxFee,
        maxPriorityFeePerGas: tip,
        networkFee: gas * maxFee
      })

      /** The fee fields a row keeps for its signature (EVM); null on TRON, which signs on fresh parameters. */
      const evmFields = (parameters: WithdrawalParameters) =>
        parameters.family === "EVM"
          ? { gas: parameters.gas, maxFee: parameters.maxFeePerGas, tip: parameters.maxPriorityFeePerGas }
          : { gas: null, maxFee: null, tip: null }

      // 1. collect ------------------------------------------------------------------------------------------------
      const margin = `${collectMarginMillis} milliseconds`
      const collect = (networkKey: string) =>
        Effect.gen(function*() {
          const started = yield* now
          yield* sql`
            INSERT INTO sweep_sources (network_key, address, asset_id, tenant_id, wallet_id, credited_at)
            SELECT t.network_key, wa.address, t.asset_id, t.tenant_id, t.destination_wallet_id, max(t.updated_at)
            FROM transactions t
            JOIN wallet_addresses wa ON wa.wallet_id = t.destination_wallet_id AND wa.network_key = t.network_key
            WHERE t.kind = 'DEPOSIT' AND t.status = 'COMPLETED' AND t.sub_status IS NULL
              AND t.network_key = ${networkKey}
              AND t.updated_at > coalesce(
                (SELECT collected_to FROM sweep_cursors WHERE network_key = ${networkKey}) - ${margin}::interval,
                '-infinity')
            GROUP BY t.network_key, wa.address, t.asset_id, t.tenant_id, t.destination_wallet_id
            ON CONFLICT (network_key, address, asset_id)
              DO UPDATE SET credited_at = greatest(sweep_sources.credited_at, EXCLUDED.credited_at)`
          yield* sql`
            INSERT INTO sweep_cursors (network_key, collected_to) VALUES (${networkKey}, ${started})
            ON CONFLICT (network_key)
              DO UPDATE SET collected_to = greatest(sweep_cursors.collected_to, EXCLUDED.collected_to)`
        }).pipe(Effect.orDie)

      // 2. plan ---------------------------------------------------------------------------------------------------
      const markExamined = (networkKey: string, source: SourceRow, at: Date) =>
        sql`UPDATE sweep_sources SET examined_at = ${at}
          WHERE network_key = ${networkKey} AND address = ${source.address} AND asset_id = ${source.asset_id}`

      /** Where a sweep of the asset goes now: HOT while it holds less than the hot target, else SWEEP. */
      const destination = (context: SweepNetwork, assetId: string) =>
        Effect.gen(function*() {
          const hot = yield* platform.operating(context.network.networkKey, "HOT")
          const sweep = yield* platform.operating(context.network.networkKey, "SWEEP")
          if (hot === undefined || sweep === undefined) return undefined
          const held = yield* context.balance(hot, assetId)
          const hotTargetRaw = catalog.asset(assetId)!.hotTargetRaw
          yield* observeOperatingWallet({
            role: "HOT",
            networkKey: context.network.networkKey,
            assetId,
            balanceRaw: held,
            minimumRaw: hotTargetRaw
          })
          return held < hotTargetRaw ? hot : sweep
        })

      /** Whether the tenant's GAS wallet can send `amount` now (its unbroadcast sends counted) and its fee. */
      const gasCovers = (context: SweepNetwork, tenantId: string, amount: bigint, fee: bigint) =>
        Effect.gen(function*() {
          const wallet = yield* platform.gasWallet(tenantId, context.network.networkKey)
          if (wallet === undefined) return false
          const unsent = yield* outgoing.reserved(context.network.networkKey, wallet.address)
          const reserved = unsent.get(context.network.nativeAssetId) ?? 0n
          if (context.network.chainFamily === "SOL") {
            // A fee payer must stay rent-exempt (else the transaction fails with InsufficientFundsForRent): the
            // client's own rule for HOT (native balance ≥ amount + fee + the rent-exempt minimum) says so.
            return yield* context.chain.hotWalletCovers({
              withdrawalId: "",
              from: wallet.address,
              to: wallet.address,
              assetId: context.network.nativeAssetId,
              amount: amount + reserved
            }, fee)
          }
          const held = yield* context.balance(wallet.address, context.network.nativeAssetId)
          return held - reserved >= amount + fee
        })

      /**
       * A token sweep's fee parameters and what its top-up must bring (0: the address holds enough native coin),
       * and whether the GAS wallet can send that now.
       */
      const tokenPlan = (context: SweepNetwork, tenantId: string, sweep: WithdrawalTransfer) =>
        Effect.gen(function*() {
          if (context.network.chainFamily === "SOL") {
            // No top-up: GAS pays the sweep's fee (two signatures) and, if HOT/SWEEP has no token account yet, its
            // rent. Priced before the blockhash is taken (taken once, when the row is signed): as creating it.
            const need = (yield* context.chain.networkFee(sweep.assetId)) + lamportsPerSignature
            const covered = yield* gasCovers(context, tenantId, 0n, need)
            return { evm: { gas: null, maxFee: null, tip: null }, need, topUp: 0n, topUpFee: 0n, covered }
          }
          const parameters = yield* context.chain.withdrawalParameters(sweep)
          const from = sweep.from
          if (parameters.family !== "EVM" && parameters.family !== "TRON") {
            return yield* Effect.die(new Error("sweeps with top-ups are EVM and TRON only"))
          }
          // TRON (docs/tron.md): the most the call can burn (fee_limit + bandwidth); what is left over stays at the
          // address and lowers its next top-up. The top-up may create the address's account: priced as doing so.
          const need = parameters.family === "EVM" ? parameters.gas * parameters.maxFeePerGas : parameters.networkFee
          const held = yield* context.balance(from, context.network.nativeAssetId)
          const topUp = need > held ? need - held : 0n
          const topUpFee = parameters.family === "EVM"
            ? nativeTransferGas * parameters.maxFeePerGas
            : yield* context.chain.networkFee(context.network.nativeAssetId)
          const covered = topUp === 0n || (yield* gasCovers(context, tenantId, topUp, topUpFee))
          return { evm: evmFields(parameters), need, topUp, topUpFee, covered }
        })

      /** The TOP_UP row of a sweep: `amount` of native coin from the tenant's GAS wallet to the sweep's address. */
      const insertTopUp = (
        context: SweepNetwork,
        sweep: { readonly id: string; readonly tenantId: string; readonly from: string },
        amount: bigint,
        at: Date
      ) =>
        Effect.gen(function*() {
          const { nativeAssetId, networkKey } = context.network
          const wallet = (yield* platform.gasWallet(sweep.tenantId, networkKey))!
          const id = yield* ids.uuidV7For("sweep")
          yield* sql`
            INSERT INTO sweeps (id, tenant_id, network_key, asset_id, kind, for_sweep_id, from_address, to_address,
              amount, status, created_at, updated_at)
            VALUES (${id}, ${sweep.tenantId}, ${networkKey}, ${nativeAssetId}, 'TOP_UP', ${sweep.id},
              ${wallet.address}, ${sweep.from}, ${amount.toString()}, 'PENDING', ${at}, ${at})
            ON CONFLICT DO NOTHING`
        })

      const plan = (context: SweepNetwork, source: SourceRow) =>
        Effect.gen(function*() {
          const networkKey = context.network.networkKey
          const asset = catalog.asset(source.asset_id)
          if (asset === undefined) return
          const at = yield* now
          const to = yield* destination(context, asset.assetId)
          if (to === undefined) return
          const balance = yield* context.balance(source.address, asset.assetId)
          const id = yield* ids.uuidV7For("sweep")
          const insertSweep = (
            status: "PENDING" | "WAITING_GAS",
            amount: bigint,
            gas: bigint | null,
            maxFee: bigint | null,
            tip: bigint | null
          ) =>
            sql`
              INSERT INTO sweeps (id, tenant_id, network_key, asset_id, kind, from_address, to_address, amount, status,
                wallet_id, gas, max_fee_per_gas, max_priority_fee_per_gas, created_at, updated_at)
              VALUES (${id}, ${source.tenant_id}, ${networkKey}, ${asset.assetId}, 'SWEEP', ${source.address}, ${to},
                ${amount.toString()}, ${status}, ${source.wallet_id}, ${gas?.toString() ?? null},
                ${maxFee?.toString() ?? null}, ${tip?.toString() ?? null}, ${at}, ${at})
              ON CONFLICT DO NOTHING RETURNING id`.pipe(Effect.flatMap(idRows), Effect.map((rows) => rows.length > 0))

          if (asset.kind === "NATIVE" && context.network.chainFamily !== "EVM") {
            // TRON (docs/tron.md): the fee is known only once included (the address's free bandwidth may pay it), so
            // the sweep keeps the most it can burn back; that much may stay at the address for its next sweep.
            // SOL (docs/sol.md): the fee is exactly 5,000 lamports (one signature), so the address ends at 0 (a
            // system account may; only one that keeps lamports must stay rent-exempt). The blockhash is taken when
            // the row is signed.
            const fee = context.network.chainFamily === "SOL"
              ? yield* context.chain.networkFee(asset.assetId)
              : (yield* context.chain.withdrawalParameters({
                withdrawalId: id,
                from: source.address,
                to,
                assetId: asset.assetId,
                amount: balance
              })).networkFee
            if (balance < sweepThreshold(asset, asset, fee) || balance <= fee) {
              yield* markExamined(networkKey, source, at).pipe(Effect.orDie)
              return
            }
            yield* sql.withTransaction(Effect.gen(function*() {
              if (yield* insertSweep("PENDING", balance - fee, null, null, null)) yield* markExamined(networkKey, source, at)
            })).pipe(Effect.orDie)
            return
          }
          if (asset.kind === "NATIVE") {
            const maxFee = yield* maxFeePerGas(context)
            const fee = nativeTransferGas * maxFee
            if (balance < sweepThreshold(asset, asset, fee) || balance <= fee) {
              yield* markExamined(networkKey, source, at).pipe(Effect.orDie)
              return
            }
            // The tip is the whole maxFeePerGas: the price paid per gas is then exactly maxFeePerGas (base fee + tip
            // is more), so the fee is gas × maxFeePerGas and the address ends at exactly 0.
            yield* sql.withTransaction(Effect.gen(function*() {
              if (yield* insertSweep("PENDING", balance - fee, nativeTransferGas, maxFee, maxFee)) {
                yield* markExamined(networkKey, source, at)
              }
            })).pipe(Effect.orDie)
            return
          }
          const planned = yield* tokenPlan(context, source.tenant_id, {
            withdrawalId: id,
            from: source.address,
            to,
            assetId: asset.assetId,
            amount: balance
          })
          const cost = planned.need + planned.topUpFee
          if (balance === 0n || balance < sweepThreshold(asset, native(context.network), cost)) {
            yield* markExamined(networkKey, source, at).pipe(Effect.orDie)
            return
          }
          const { gas, maxFee, tip } = planned.evm
          yield* sql.withTransaction(Effect.gen(function*() {
            if (!(yield* insertSweep(planned.covered ? "PENDING" : "WAITING_GAS", balance, gas, maxFee, tip))) return
            if (planned.covered && planned.topUp > 0n) {
              yield* insertTopUp(context, { id, tenantId: source.tenant_id, from: source.address }, planned.topUp, at)
            }
            yield* markExamined(networkKey, source, at)
          })).pipe(Effect.orDie)
          const after = planned.topUp > 0n ? `, after a top-up of ${planned.topUp}` : ""
          yield* Effect.logInfo(
            `sweep ${id}: ${balance} ${asset.assetId} from ${source.address} to ${to}` +
              (planned.covered ? after : ", waiting for gas")
          )
        })

      const planDue = (context: SweepNetwork) =>
        Effect.gen(function*() {
          const networkKey = context.network.networkKey
          const due = yield* sql`
            SELECT s.address, s.asset_id, s.tenant_id, s.wallet_id FROM sweep_sources s
            WHERE s.network_key = ${networkKey} AND (s.examined_at IS NULL OR s.examined_at < s.credited_at)
              AND NOT EXISTS (SELECT 1 FROM sweeps o WHERE o.network_key = s.network_key AND o.from_address = s.address
                AND o.kind = 'SWEEP' AND o.status IN ('WAITING_GAS', 'PENDING', 'CONFIRMING'))
            ORDER BY s.credited_at LIMIT ${batchMax}`.pipe(Effect.orDie, Effect.flatMap(sourceRows))
          for (const source of due) yield* plan(context, source)
        })

      // 3. advance ------------------------------------------------------------------------------------------------
      const setStatus = (row: SweepRow, from: SweepStatus, to: SweepStatus) =>
        Effect.gen(function*() {
          yield* sql`UPDATE sweeps SET status = ${to}, updated_at = ${yield* now}
            WHERE id = ${row.id} AND status = ${from}`
        }).pipe(Effect.orDie)

      /** A failed sweep's address is due again (the next pass plans a new sweep of what it holds). */
      const redo = (row: SweepRow): Effect.Effect<void> =>
        row.kind === "SWEEP"
          ? sql`UPDATE sweep_sources SET examined_at = NULL
              WHERE network_key = ${row.network_key} AND address = ${row.from_address} AND asset_id = ${row.asset_id}`
            .pipe(Effect.asVoid, Effect.orDie)
          : Effect.void

      const signingKey = (row: SweepRow) =>
        Effect.gen(function*() {
          if (row.kind === "TOP_UP") return yield* gasSigningKey(row)
          const indexes = yield* sql`
            SELECT t.seq AS tenant_seq, u.seq AS user_seq, w.seq AS wallet_seq
            FROM wallets w JOIN tenants t ON t.id = w.tenant_id JOIN users u ON u.id = w.user_id
            WHERE w.id = ${row.wallet_id}`.pipe(Effect.orDie, Effect.flatMap(walletIndexRow))
          return walletKey({
            tenantIndex: indexes!.tenant_seq,
            userIndex: indexes!.user_seq,
            walletIndex: indexes!.wallet_seq - 1
          })
        })

      const gasSigningKey = (row: SweepRow) =>
        Effect.map(platform.gasWallet(row.tenant_id, row.network_key), (wallet) => gasKey(wallet!.tenantIndex))

      /** An SPL sweep: its fee (and a missing destination token account's rent) paid by the tenant's GAS wallet. */
      const solFeePaid = (context: SweepNetwork, row: SweepRow) =>
        context.network.chainFamily === "SOL" && row.kind === "SWEEP" && row.asset_id !== context.network.nativeAssetId

      const transferOf = (row: SweepRow): WithdrawalTransfer => ({
        withdrawalId: row.id,
        from: row.from_address,
        to: row.to_address,
        assetId: row.asset_id,
        amount: row.amount
      })

      const fail = (row: SweepRow) =>
        sql.withTransaction(Effect.andThen(setStatus(row, "PENDING", "FAILED"), redo(row))).pipe(Effect.orDie)

      /** Signs (once) and broadcasts a PENDING row; CONFIRMING once a node took it. */
      const send = (context: SweepNetwork, row: SweepRow, key: SigningKey) =>
        Effect.gen(function*() {
          const parameters = row.gas !== null && row.max_fee_per_gas !== null && row.max_priority_fee_per_gas !== null
            ? evmParameters(context.network, row.gas, row.max_fee_per_gas, row.max_priority_fee_per_gas)
            : solFeePaid(context, row)
            ? withFeePayer(yield* context.chain.withdrawalParameters(transferOf(row)), yield* gasSigningKey(row))
            : undefined
          const outcome = yield* outgoing.sign({
            purpose: row.kind,
            ownerId: row.id,
            networkKey: row.network_key,
            key,
            transfer: transferOf(row),
            parameters
          }, {
            guard: sql`SELECT id FROM sweeps WHERE id = ${row.id} AND status = 'PENDING' FOR UPDATE`.pipe(
              Effect.orDie,
              Effect.map((rows) => rows.length > 0)
            ),
            onSigned: (signed) => sql`UPDATE sweeps SET tx_hash = ${signed.txHash}, updated_at = ${signed.at} WHERE id = ${row.id}`
          })
          switch (outcome._tag) {
            case "Superseded":
            case "SignerDown":
              return
            case "Refused":
              yield* Effect.logError(`${row.kind.toLowerCase()} ${row.id}: the signer refused: ${outcome.message}`)
              yield* fail(row)
              return
            case "Signed": {
              const broadcast = yield* outgoing.broadcast(outcome.send)
              if (broadcast === "SENT") yield* setStatus(row, "PENDING", "CONFIRMING")
              if (broadcast === "REJECTED") {
                yield* fail(row)
              }
            }
          }
        })

      /** A CONFIRMING row final on chain: COMPLETED (or FAILED) with its actual fee, with its send, at once. */
      const confirm = (row: SweepRow, head: ChainHead, inclusions: InclusionPass) =>
        Effect.gen(function*() {
          if (!inclusions.due(row.id)) return
          const sent = yield* outgoing.forOwner(row.kind, row.id)
          if (sent === undefined) return
          const outcome = yield* outgoing.check(sent, head)
          inclusions.checked(row.id, outcome)
          if (outcome._tag === "Conflicted") {
            // No version can ever be included (only a BTC client proves this, and BTC has no sweeps): failed like a
            // refused broadcast, with the send, and the address is due again.
            yield* sql.withTransaction(Effect.gen(function*() {
              yield* outgoing.markRejected(sent)
              const updated = yield* sql`UPDATE sweeps SET status = 'FAILED', updated_at = ${yield* now}
                WHERE id = ${row.id} AND status = 'CONFIRMING' RETURNING id`
              if (updated.length > 0) yield* redo(row)
            })).pipe(Effect.orDie)
            yield* Effect.logWarning(`${row.kind.toLowerCase()} ${row.id}: no version of its send can be included; failed`)
            return
          }
          if (outcome._tag !== "Final") return
          const succeeded = outcome.succeeded && outcome.kind === "PAYLOAD"
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* outgoing.markFinal(sent, outcome)
            const updated = yield* sql`
              UPDATE sweeps SET status = ${succeeded ? "COMPLETED" : "FAILED"}, tx_hash = ${outcome.txHash},
                network_fee = ${outcome.networkFee.toString()}, updated_at = ${yield* now}
              WHERE id = ${row.id} AND status = 'CONFIRMING' RETURNING id`
            if (updated.length > 0 && !succeeded) yield* redo(row)
          })).pipe(Effect.orDie)
          yield* Effect.logInfo(
            `${row.kind.toLowerCase()} ${row.id}: ${succeeded ? "completed" : "failed"} in ${outcome.txHash}, ` +
              `network fee ${outcome.networkFee}`
          )
        })

      /** A WAITING_GAS token sweep, planned again at current fees and balances: PENDING once GAS can pay. */
      const replan = (context: SweepNetwork, row: SweepRow) =>
        Effect.gen(function*() {
          const amount = yield* context.balance(row.from_address, row.asset_id)
          if (amount === 0n) {
            yield* setStatus(row, "WAITING_GAS", "FAILED")
            return
          }
          const planned = yield* tokenPlan(context, row.tenant_id, { ...transferOf(row), amount })
          if (!planned.covered) return
          const at = yield* now
          yield* sql.withTransaction(Effect.gen(function*() {
            const moved = yield* sql`
              UPDATE sweeps SET status = 'PENDING', amount = ${amount.toString()},
                gas = ${planned.evm.gas?.toString() ?? null},
                max_fee_per_gas = ${planned.evm.maxFee?.toString() ?? null},
                max_priority_fee_per_gas = ${planned.evm.tip?.toString() ?? null}, updated_at = ${at}
              WHERE id = ${row.id} AND status = 'WAITING_GAS' RETURNING id`
            if (moved.length > 0 && planned.topUp > 0n) {
              const sweep = { id: row.id, tenantId: row.tenant_id, from: row.from_address }
              yield* insertTopUp(context, sweep, planned.topUp, at)
            }
          })).pipe(Effect.orDie)
        })

      const advanceOne = (context: SweepNetwork, row: SweepRow, head: ChainHead, inclusions: InclusionPass) =>
        Effect.gen(function*() {
          if (row.status === "CONFIRMING") return yield* confirm(row, head, inclusions)
          if (row.status === "WAITING_GAS") return yield* replan(context, row)
          if (solFeePaid(context, row) && row.tx_hash === null) {
            // Not signed yet: GAS may have been spent since the plan; signed bytes whose payer cannot pay would
            // never be included, only expire and be signed again.
            const planned = yield* tokenPlan(context, row.tenant_id, transferOf(row))
            if (!planned.covered) return yield* setStatus(row, "PENDING", "WAITING_GAS")
          } else if (row.kind === "SWEEP" && row.asset_id !== context.network.nativeAssetId) {
            const topUps = yield* sql`SELECT ${sql.literal(sweepColumns)} FROM sweeps WHERE for_sweep_id = ${row.id}`
              .pipe(Effect.orDie, Effect.flatMap(sweepRows))
            if (topUps.length > 0 && !topUps.some((topUp) => topUp.status === "COMPLETED")) {
              // Its top-up failed for good: plan the sweep again (a new top-up) rather than send without gas.
              if (topUps.every((topUp) => topUp.status === "FAILED")) yield* setStatus(row, "PENDING", "WAITING_GAS")
              return
            }
          }
          yield* send(context, row, yield* signingKey(row))
        }).pipe(Effect.catchTag("ChainUnavailable", (error) =>
          Effect.logWarning(`${row.kind.toLowerCase()} ${row.id}: ${error.message}; will retry`)))

      const advance = (context: SweepNetwork) =>
        Effect.gen(function*() {
          const open = yield* sql`
            SELECT ${sql.literal(sweepColumns)} FROM sweeps
            WHERE network_key = ${context.network.networkKey} AND status IN ('WAITING_GAS', 'PENDING', 'CONFIRMING')
            ORDER BY created_at, id LIMIT ${batchMax * 2}`.pipe(Effect.orDie, Effect.flatMap(sweepRows))
          if (open.length === 0) return
          const head = yield* context.client.head
          // The CONFIRMING ones seen in a block are not checked again before their confirmations are due.
          const inclusions = yield* seenInclusions.pass(
            context.network,
            head,
            open.filter((row) => row.status === "CONFIRMING").map((row) => row.id),
            open.length < batchMax * 2
          )
          // Top-ups first: a token sweep whose top-up completes in this pass is sent in it too.
          for (const row of open.filter((row) => row.kind === "TOP_UP")) yield* advanceOne(context, row, head, inclusions)
          const fresh = yield* sql`
            SELECT ${sql.literal(sweepColumns)} FROM sweeps
            WHERE network_key = ${context.network.networkKey} AND kind = 'SWEEP'
              AND status IN ('WAITING_GAS', 'PENDING', 'CONFIRMING')
            ORDER BY created_at, id LIMIT ${batchMax * 2}`.pipe(Effect.orDie, Effect.flatMap(sweepRows))
          for (const row of fresh) yield* advanceOne(context, row, head, inclusions)
          yield* inclusions.end
        })

      const pass = Effect.fn("Sweeps.pass")(function*(networkKey: string) {
        const context = networks.get(networkKey)
        if (context === undefined) return
        yield* passLocks.get(networkKey)!.withPermit(Effect.gen(function*() {
          yield* collect(networkKey)
          yield* planDue(context)
          yield* advance(context)
        })).pipe(Effect.catchTag("ChainUnavailable", (error) =>
          Effect.logWarning(`sweeps of ${networkKey}: ${error.message}`)))
      })

      const list = Effect.fn("Sweeps.list")(function*(query: SweepListQuery) {
        const conditions = [
          query.networkKey === undefined ? undefined : sql`network_key = ${query.networkKey}`,
          query.status === undefined ? undefined : sql`status = ${query.status}`,
          query.cursor === undefined ? undefined : sql`id < ${query.cursor}`
        ].filter((condition) => condition !== undefined)
        const rows = yield* sql`
          SELECT ${sql.literal(sweepColumns)} FROM sweeps
          ${conditions.length === 0 ? sql`` : sql`WHERE ${sql.and(conditions)}`}
          ORDER BY id DESC LIMIT ${query.limit + 1}`.pipe(Effect.orDie, Effect.flatMap(sweepRows))
        const items = rows.slice(0, query.limit)
        return { items, nextCursor: rows.length > query.limit ? items[items.length - 1]!.id : null }
      })

      return Sweeps.of({ networkKeys: [...networks.keys()], pass, list })
    })
  )
}
