/**
 * Opening balances (issue 35; docs/ledger.md "Opening balances"; sql/0036): what an operating address (HOT, SWEEP, a
 * GAS wallet) held at the end of the block its network's deposit watcher started from. The watcher records every
 * receipt after that block (ledger/PlatformReceipts.ts), so money put there before, or carried over from a previous
 * system, would be unexplained in the chain books forever; an opening entry is what explains it. The operator
 * records it (POST /ops/networks/{networkKey}/opening_balances, audited with who and when), reading the balance at
 * that block from a node or an explorer; BTC as the address's unspent outputs at that block, since its books are
 * outputs (ledger/ChainOutputs.ts). The chain books count it like a receipt at that block (ChainBooks.ts).
 *
 * Rules, each checked here before anything is stored: the address is one of the network's operating addresses (a
 * deposit address's money is its deposits); the asset is the network's; one opening per address and asset (per
 * output on BTC), never changed afterwards (a trigger refuses it); the height is the watcher's start
 * (`chain_cursors.started_height`), which the request may name only to confirm it, and must name on a database whose
 * cursor predates the column (then at most the watcher's current block).
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { decodeFirstRow, decodeRows, Int4, Nullable, Numeric, Text, Timestamp } from "../db/RowSchemas.ts"
import { BadRequest, InvalidState, NotFound } from "../domain/ApiError.ts"
import { Ids } from "../domain/Ids.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"

export interface OpeningOutput {
  readonly txid: string
  readonly vout: number
  readonly value: bigint
}

export interface OpeningRequest {
  readonly networkKey: string
  readonly address: string
  readonly assetId: string
  /** Account families: what the address held. */
  readonly amount?: bigint | undefined
  /** BTC: the address's unspent outputs. */
  readonly outputs?: ReadonlyArray<OpeningOutput> | undefined
  /** Confirms the watcher's start block; required where the database does not know it. */
  readonly height?: bigint | undefined
}

export interface OpeningBalance {
  readonly id: string
  readonly networkKey: string
  readonly address: string
  readonly role: "HOT" | "SWEEP" | "GAS"
  readonly assetId: string
  readonly amount: bigint
  readonly height: bigint
  readonly txid: string | null
  readonly vout: number | null
  readonly recordedAt: Date
  readonly recordedBy: string
  readonly requestId: string
}

const OpeningRow = Schema.Struct({
  id: Text,
  network_key: Text,
  address: Text,
  role: Schema.Literals(["HOT", "SWEEP", "GAS"]),
  asset_id: Text,
  amount: Numeric,
  height: Numeric,
  txid: Nullable(Text),
  vout: Nullable(Int4),
  recorded_at: Timestamp,
  recorded_by: Text,
  request_id: Text
})
const openingRows = decodeRows(OpeningRow, "OpeningBalances.list")
const cursorRow = decodeFirstRow(
  Schema.Struct({ height: Numeric, started_height: Nullable(Numeric) }),
  "OpeningBalances.record (cursor)"
)

const txidPattern = /^[0-9a-f]{64}$/
/** Outputs one request may name: an address with more is recorded over several requests. */
export const openingOutputsMax = 1_000

const toOpening = (row: typeof OpeningRow.Type): OpeningBalance => ({
  id: row.id,
  networkKey: row.network_key,
  address: row.address,
  role: row.role,
  assetId: row.asset_id,
  amount: row.amount,
  height: row.height,
  txid: row.txid,
  vout: row.vout,
  recordedAt: row.recorded_at,
  recordedBy: row.recorded_by,
  requestId: row.request_id
})

export class OpeningBalances extends Context.Service<OpeningBalances, {
  /**
   * Records an opening (one row, or one per BTC output) for `origin`; call it inside the operator audit's transaction
   * (OperatorAudit.audited), so the entry and the audit commit together.
   */
  readonly record: (
    request: OpeningRequest,
    origin: { readonly operator: string; readonly requestId: string }
  ) => Effect.Effect<ReadonlyArray<OpeningBalance>, BadRequest | InvalidState | NotFound>
  /** The network's openings, in address, asset and output order. */
  readonly list: (networkKey: string) => Effect.Effect<ReadonlyArray<OpeningBalance>, NotFound>
}>()("coffer/OpeningBalances") {
  static readonly layer = Layer.effect(
    OpeningBalances,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const platformAddresses = yield* PlatformAddresses
      const ids = yield* Ids

      const networkOf = (networkKey: string) => {
        const network = catalog.network(networkKey)
        return network === undefined
          ? Effect.fail(new NotFound({ message: `no network ${networkKey}` }))
          : Effect.succeed(network)
      }

      const list = Effect.fn("OpeningBalances.list")(function*(networkKey: string) {
        yield* networkOf(networkKey)
        const rows = yield* sql`
          SELECT id, network_key, address, role, asset_id, amount::text AS amount, height::text AS height, txid, vout,
            recorded_at, recorded_by, request_id
          FROM opening_balances WHERE network_key = ${networkKey}
          ORDER BY address, asset_id, txid, vout`.pipe(Effect.flatMap(openingRows), Effect.orDie)
        return rows.map(toOpening)
      })

      const record = Effect.fn("OpeningBalances.record")(function*(
        request: OpeningRequest,
        origin: { readonly operator: string; readonly requestId: string }
      ) {
        const network = yield* networkOf(request.networkKey)
        const asset = catalog.asset(request.assetId)
        if (asset === undefined || asset.networkKey !== network.networkKey) {
          return yield* new BadRequest({ message: `asset ${request.assetId} is not an asset of ${network.networkKey}` })
        }
        const operating = (yield* platformAddresses.list).find((entry) =>
          entry.networkKey === network.networkKey && entry.address === request.address
        )
        if (operating === undefined) {
          return yield* new BadRequest({
            message: `${request.address} is not an operating address of ${network.networkKey} ` +
              "(GET /ops/platform/addresses); a deposit address's money is its deposits"
          })
        }
        const btc = network.chainFamily === "BTC"
        if (btc !== (request.outputs !== undefined) || btc === (request.amount !== undefined)) {
          return yield* new BadRequest({
            message: btc ? "a BTC opening names the address's unspent outputs (outputs), not an amount" : "amountRaw is required (and outputs is for BTC only)"
          })
        }
        if (request.amount !== undefined && request.amount <= 0n) {
          return yield* new BadRequest({ message: "amountRaw must be above 0" })
        }
        const outputs = request.outputs ?? []
        if (btc && (outputs.length === 0 || outputs.length > openingOutputsMax)) {
          return yield* new BadRequest({ message: `outputs must list 1-${openingOutputsMax} outputs` })
        }
        const outpoints = new Set<string>()
        for (const output of outputs) {
          if (!txidPattern.test(output.txid) || !Number.isSafeInteger(output.vout) || output.vout < 0 || output.value <= 0n) {
            return yield* new BadRequest({
              message: "each output is {txid: 64 lowercase hex digits, vout: an index from 0, valueRaw: above 0}"
            })
          }
          const key = `${output.txid}:${output.vout}`
          if (outpoints.has(key)) return yield* new BadRequest({ message: `output ${key} is listed twice` })
          outpoints.add(key)
        }
        const cursor = yield* sql`
          SELECT height::text AS height, started_height::text AS started_height FROM chain_cursors
          WHERE network_key = ${network.networkKey} FOR SHARE`.pipe(Effect.flatMap(cursorRow), Effect.orDie)
        if (cursor === undefined) {
          return yield* new InvalidState({
            message: `the deposit watcher has not started on ${network.networkKey} yet: an opening is what an address ` +
              "held at the block it starts from"
          })
        }
        if (cursor.started_height !== null && request.height !== undefined && request.height !== cursor.started_height) {
          return yield* new BadRequest({
            message: `an opening is at the block the watcher started from, ${cursor.started_height}, not ${request.height}`
          })
        }
        if (cursor.started_height === null && request.height === undefined) {
          return yield* new BadRequest({
            message: `the watcher's start block on ${network.networkKey} is not recorded (it started before the column): ` +
              "name the block (height) the balance was read at, the first block the watcher did not read"
          })
        }
        const height = cursor.started_height ?? request.height!
        if (height > cursor.height) {
          return yield* new BadRequest({ message: `block ${height} is above the watcher's block ${cursor.height}` })
        }
        const at = new Date(yield* Clock.currentTimeMillis)
        const rows = btc
          ? outputs.map((output) => ({ amount: output.value, txid: output.txid, vout: output.vout }))
          : [{ amount: request.amount!, txid: null, vout: null }]
        const recorded: Array<OpeningBalance> = []
        for (const row of rows) {
          const id = yield* ids.uuidV7
          const inserted = yield* sql`
            INSERT INTO opening_balances (id, network_key, address, role, asset_id, amount, height, txid, vout,
              recorded_at, recorded_by, request_id)
            VALUES (${id}, ${network.networkKey}, ${request.address}, ${operating.role}, ${asset.assetId},
              ${row.amount.toString()}, ${height.toString()}, ${row.txid}, ${row.vout}, ${at}, ${origin.operator},
              ${origin.requestId})
            ON CONFLICT DO NOTHING
            RETURNING id`.pipe(Effect.orDie)
          if (inserted.length === 0) {
            return yield* new InvalidState({
              message: `an opening of ${request.address} ${asset.assetId}` +
                (row.txid === null ? "" : ` output ${row.txid}:${row.vout}`) + " is recorded already; it is never changed"
            })
          }
          recorded.push({
            id,
            networkKey: network.networkKey,
            address: request.address,
            role: operating.role as "HOT" | "SWEEP" | "GAS",
            assetId: asset.assetId,
            amount: row.amount,
            height,
            txid: row.txid,
            vout: row.vout,
            recordedAt: at,
            recordedBy: origin.operator,
            requestId: origin.requestId
          })
        }
        return recorded
      })

      return OpeningBalances.of({ record, list })
    })
  )
}
