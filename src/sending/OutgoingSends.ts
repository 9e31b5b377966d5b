/**
 * Every transaction the service sends, exactly once (docs/sending.md; decisions.md "Sending on real networks"): the
 * one place that signs, stores, broadcasts, follows, replaces and fills, shared by withdrawals and sweeps. Tables:
 * sql/0012_outgoing.sql. An owner (a withdrawal, a sweep) has at most one send, and a send keeps its EVM nonce and
 * payload for life; what may change is only the fee, in a new version (replacement) or, once the payload was
 * refused for good, a 0-value self-transfer taking its nonce (FILL), so later nonces are not stuck behind a gap.
 *
 * - `sign`: the signature first, on the next nonce of the sending address (EVM) as read then, outside any
 *   transaction; then in one short database transaction the owner's guard (its row locked, still in the state that
 *   may be signed), the nonces taken if the sequence has not moved meanwhile (else it signs again), and the stored
 *   bytes. Signings from one address that wait for each other share both steps (`signBatch`). A crash before the
 *   commit leaves nothing: the nonce is not used, and the next attempt signs the same nonce; a signer that is down or
 *   refuses takes no nonce. Once committed, the bytes are the only ones ever broadcast for that nonce and payload;
 *   bytes that were not stored never leave the process. Replacements and fills are signed before their transaction
 *   in the same way.
 * - `broadcast`: the latest version's bytes; accepted, not now (retried later), or refused for good.
 * - `check`: where the send stands on the current chain: final (succeeded or reverted, with the actual fee),
 *   waiting; on the way it gives a node that forgot the transaction the same bytes again (a reorganization, a
 *   restarted node), replaces an EVM version that has waited 20 blocks, signs a BTC replacement by fee when the
 *   client asks for one (`replacementParameters`), and signs a TRON/SOL payload again once the client says the
 *   earlier bytes expired unincluded (`expired`). Each version keeps the parameters it was signed with (sql/0017).
 *   When the client proves no version can ever be included (`conflicted`: BTC, an input spent in a final block by
 *   somebody else), the outcome is `Conflicted` and the owner fails with `markRejected` in its transaction.
 *
 * Somewhat over 300 lines on purpose: signing, broadcast, replacement and fill share the stored-version rules and
 * read best side by side.
 */
import { Clock, Context, Data, Effect, Exit, Layer, Schema } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { Catalog, type CatalogNetwork } from "../catalog/Catalog.ts"
import { AppConfig } from "../Config.ts"
import {
  broadcastAnswerMaxMillis,
  type BroadcastRejected,
  type ChainClient,
  ChainClients,
  type ChainHead,
  ChainUnavailable,
  type Inclusion,
  type WithdrawalChain,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../chains/ChainClient.ts"
import { makeGroupCommit, outsideTransaction, stripeOf, togetherOrAlone } from "../db/GroupCommit.ts"
import { makeBoundedCache } from "../domain/BoundedCache.ts"
import { type ReadPart, readAlone } from "../db/ReadPart.ts"
import { decodeFirstRow, decodeRow, decodeRows, decodeSingleRow, Int4, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { meetsConfirmationRule } from "../deposits/DepositDecisions.ts"
import { nativeTransferGas } from "../chains/evm/EvmGas.ts"
import { Ids } from "../domain/Ids.ts"
import { CrashPoints, type sendCrashSteps } from "../idempotency/CrashPoints.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { entryRequest, Postings } from "../ledger/Postings.ts"
import { Signer } from "../signer/Signer.ts"
import type { SigningKey } from "../signer/TransactionRequest.ts"
import { withdrawalRequest } from "../withdrawals/WithdrawalRequests.ts"
import { makeTronPayloadSpacing } from "./TronPayloadSpacing.ts"
import { renewedParameters, signedParameters, storedParameters } from "./SignedParameters.ts"

export type SendPurpose = "WITHDRAWAL" | "SWEEP" | "TOP_UP"

/**
 * Whether a final send's network fee is booked with its final mark (SEND_NETWORK_FEE, referencing the send): every
 * inclusion pays a fee from one of our addresses (docs/ledger.md "Costs paid on chain"), and all but a withdrawal's
 * own payload are booked here; that one is booked by the withdrawal's transition (NETWORK_FEE, referencing the
 * withdrawal: COMPLETED, or FAILED REVERTED_ON_CHAIN), which also writes `networkFeeRaw`. What a send paid for
 * accounts it created (SOL rent, `FinalInclusion.accountCost`) is never in `networkFeeRaw` (decisions.md: SOL's is
 * `meta.fee`), so it is always booked here, in the same entry.
 */
export const feeBookedBySend = (purpose: SendPurpose, kind: "PAYLOAD" | "FILL"): boolean =>
  !(purpose === "WITHDRAWAL" && kind === "PAYLOAD")

/** What a final send's SEND_NETWORK_FEE books (0: no entry): its fee unless its withdrawal books it, and its account cost. */
export const sendCost = (purpose: SendPurpose, final: Pick<FinalInclusion, "kind" | "networkFee" | "accountCost">): bigint =>
  (feeBookedBySend(purpose, final.kind) ? final.networkFee : 0n) + final.accountCost

/** Blocks an EVM version may wait unincluded before it is replaced with raised fees (decisions.md). */
export const stuckAfterBlocks = 20n
/** A replacement raises both fee fields by at least this (geth's and anvil's replacement rule is 10 %). */
export const replacementBumpPerMille = 1125n

export interface SendSpec {
  readonly purpose: SendPurpose
  readonly ownerId: string
  readonly networkKey: string
  readonly key: SigningKey
  /** From, to, asset and amount; `withdrawalId` is the owner's id (the simulated chain names its inputs by it). */
  readonly transfer: WithdrawalTransfer
  /**
   * The chain parameters to sign with, when the owner decided them (a native sweep's amount is its balance minus
   * exactly the fee these allow); otherwise asked from the chain. The EVM nonce always comes from the sequence.
   */
  readonly parameters?: WithdrawalParameters | undefined
}

const VersionRow = Schema.Struct({
  version: Int4,
  kind: Schema.Literals(["PAYLOAD", "FILL"]),
  tx_hash: Text,
  raw: Text,
  gas: Nullable(Numeric),
  max_fee_per_gas: Nullable(Numeric),
  max_priority_fee_per_gas: Nullable(Numeric),
  network_fee_max: Numeric,
  sent_height: Nullable(Numeric),
  broadcasts: Int4,
  /** The parameters it was signed with (sql/0017; SignedParameters.ts), null on versions older than the column. */
  parameters: Schema.Unknown
})
export type SendVersion = typeof VersionRow.Type

const SendRow = Schema.Struct({
  id: Text,
  purpose: Schema.Literals(["WITHDRAWAL", "SWEEP", "TOP_UP"]),
  owner_id: Text,
  network_key: Text,
  from_address: Text,
  to_address: Text,
  asset_id: Text,
  amount: Numeric,
  signing_key: Schema.Unknown,
  nonce: Nullable(Numeric),
  state: Schema.Literals(["PENDING", "CONFIRMED", "REVERTED", "FILLING", "REJECTED"]),
  versions: Schema.Array(VersionRow)
})
export type Send = typeof SendRow.Type

/** What signing came to: stored (or stored before), refused for good, not possible now, or no longer wanted. */
export type SignOutcome =
  | { readonly _tag: "Signed"; readonly send: Send }
  | { readonly _tag: "Refused"; readonly message: string }
  | { readonly _tag: "SignerDown"; readonly message: string }
  | { readonly _tag: "Superseded" }

export type BroadcastOutcome = "SENT" | "REJECTED" | "LATER"

/**
 * A broadcast the node took whose count its caller writes (`broadcastCountedByCaller`): the version, and the claim
 * (`token`) the same write gives back while it is still this call's.
 */
export interface BroadcastCount {
  readonly sendId: string
  readonly version: number
  readonly token: number
}

/**
 * The counts of `counts` and their claims given back (`releaseBroadcast`'s rule: only a claim that is still the
 * counting call's), as a data-modifying statement for the caller's own (a WITH part, which runs whatever that
 * statement's outcome): one JSON parameter, the same text for one count or a batch's. Two counts of one version
 * (its owner's step run twice) count twice; the claim is given back if it is either's.
 */
export const countAndReleaseMany = (sql: SqlClient.SqlClient, counts: ReadonlyArray<BroadcastCount>): Statement.Fragment =>
  sql`UPDATE outgoing_versions v SET broadcasts = v.broadcasts + n.times,
      broadcast_claimed_at = CASE WHEN v.broadcast_claims = ANY (n.tokens) THEN NULL ELSE v.broadcast_claimed_at END
    FROM (
      SELECT c.send_id, c.version, count(*)::int AS times, array_agg(c.token) AS tokens
      FROM jsonb_to_recordset(${
    JSON.stringify(counts.map((count) => ({ send_id: count.sendId, version: count.version, token: count.token })))
  }::jsonb) AS c(send_id uuid, version integer, token integer)
      GROUP BY c.send_id, c.version
    ) n
    WHERE v.send_id = n.send_id AND v.version = n.version`

/** A send's version included in a block that meets the network's confirmation rule. */
export interface FinalInclusion {
  readonly _tag: "Final"
  readonly succeeded: boolean
  readonly txHash: string
  readonly height: bigint
  /** What it actually cost in the native coin (the chain's figure; the signed maximum on the simulated chain). */
  readonly networkFee: bigint
  /** What it moved from its fee payer into accounts it created, beside the fee (SOL rent; ChainClient `Inclusion`). */
  readonly accountCost: bigint
  readonly kind: "PAYLOAD" | "FILL"
}
/**
 * No version of the send can ever be included: the client proved it (`conflicted`: BTC, an input spent in a final
 * block by somebody else's transaction). The owner fails and calls `markRejected` in the same database transaction.
 */
export interface Conflicted {
  readonly _tag: "Conflicted"
}
/**
 * Not final yet. `includedAt`: the height of the block that holds a version now, when one does; until the chain's
 * head meets the confirmation rule for that height, checking again can only answer Waiting or find it reorganized
 * away, which the check at that height finds too (SeenInclusions.ts: the confirmation loops skip them meanwhile).
 */
export interface Waiting {
  readonly _tag: "Waiting"
  readonly includedAt?: bigint | undefined
}
export type CheckOutcome = FinalInclusion | Conflicted | Waiting

/** A send's own columns (`s`: outgoing_sends, or the rows an INSERT returned). */
const sendFields = (sql: SqlClient.SqlClient): Statement.Fragment =>
  sql`s.id, s.purpose, s.owner_id, s.network_key, s.from_address, s.to_address, s.asset_id, s.amount::text AS amount,
    s.signing_key, s.nonce::text AS nonce, s.state`
/** One version as a send's `versions` carry it (`v`: outgoing_versions, or the rows an INSERT returned). */
const versionObject = (sql: SqlClient.SqlClient): Statement.Fragment =>
  sql`jsonb_build_object('version', v.version, 'kind', v.kind, 'tx_hash', v.tx_hash,
    'raw', v.raw, 'gas', v.gas::text, 'max_fee_per_gas', v.max_fee_per_gas::text,
    'max_priority_fee_per_gas', v.max_priority_fee_per_gas::text, 'network_fee_max', v.network_fee_max::text,
    'sent_height', v.sent_height::text, 'broadcasts', v.broadcasts, 'parameters', v.parameters)`
const sendColumns = (sql: SqlClient.SqlClient): Statement.Fragment =>
  sql`${sendFields(sql)},
    (SELECT coalesce(jsonb_agg(${versionObject(sql)} ORDER BY v.version), '[]'::jsonb)
      FROM outgoing_versions v WHERE v.send_id = s.id) AS versions`
// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const sendRow = decodeFirstRow(SendRow, "OutgoingSends.load")
const signedSendRow = decodeSingleRow(SendRow, "OutgoingSends.sign")
const sendRows = decodeRows(SendRow, "OutgoingSends.open")
const markedRows = decodeRows(Schema.Struct({ tenant_id: Nullable(Text) }), "OutgoingSends.markFinal")
const nonceRows = decodeRows(
  Schema.Struct({ network_key: Text, address: Text, nonce: Numeric }),
  "OutgoingSends.nextNonces"
)
const storedRows = decodeRows(SendRow, "OutgoingSends.signBatch (stored)")
const reservedRow = decodeRow(
  Schema.Struct({ reserved_sends: Nullable(Schema.Array(Schema.Struct({ asset_id: Text, amount: Numeric }))) }),
  "OutgoingSends.reserved"
)

/** In-process signing queues (see `signingQueue`). */
const signingStripes = 32
/** Signings one batch takes at most. */
const signingBatchMax = 50
/**
 * Times a batch signs again because its addresses' nonces moved before it could store its signatures (another
 * process signing from the same address). Each time, some other batch took those nonces: one more round is rare.
 */
const signingRoundsMax = 5
/** Sending addresses whose nonce sequence a process remembers having seen (sweeps sign from every deposit address). */
const sequencedAddressesMax = 20_000

/** What `sign` hands its stripe's batch: the spec with the parameters chosen and the nonce's seed read before. */
interface PendingSigning {
  readonly spec: SendSpec
  readonly hooks: SignHooks
  readonly parameters: WithdrawalParameters
  /**
   * Where the address's nonce sequence starts if it has none yet (the node's pending count; 0n when it has one);
   * undefined where nonces are not the service's sequence (the simulated chain, non-EVM families).
   */
  readonly seed: bigint | undefined
  readonly id: string
}

/** A signature made ahead of the transaction that stores it (`signAhead`). */
interface AheadSignature {
  /** The signing's place in its batch. */
  readonly index: number
  readonly nonce: bigint | null
  /** Its nonce came from the address's sequence (not from parameters the owner decided). */
  readonly sequenced: boolean
  readonly parameters: WithdrawalParameters
  readonly signed: { readonly txHash: string; readonly raw: string }
}

/** One address's signatures of a batch, and the sequence's next nonce they were signed from (none: no sequence). */
interface AddressSignatures {
  readonly networkKey: string
  readonly from: string
  readonly start: bigint | undefined
  readonly signatures: ReadonlyArray<AheadSignature>
}

/** What the owner's record keeps of its first signature (`SignHooks.onSigned`). */
export interface FirstSignature {
  readonly txHash: string
  readonly raw: string
  /** The most the signed parameters let the network fee be (the version's `network_fee_max`). */
  readonly networkFeeMax: bigint
  /** The signing transaction's time (Clock). */
  readonly at: Date
}

interface SignHooks {
  readonly guard: Effect.Effect<boolean>
  /**
   * `guard` for every signing of a batch that shares `key` in one statement (issue 34, withdrawals by the batch):
   * `lock` locks the rows of the owners still in the state that allows signing, in their id order, and answers
   * their ids. Signings without it are guarded one `guard` each.
   */
  readonly guardTogether?: {
    readonly key: string
    readonly lock: (ownerIds: ReadonlyArray<string>) => Effect.Effect<ReadonlySet<string>>
  } | undefined
  /**
   * The owner's record of the signature: one data-modifying statement (an UPDATE of the owner's row, no RETURNING),
   * run as part of the statement that stores the send, so it commits with it and costs no round trip of its own
   * inside the signing transaction, which holds the address's nonce row.
   */
  readonly onSigned?: ((signed: FirstSignature) => Statement.Fragment) | undefined
  /**
   * The owner's own record, read before this call, shows no send (a withdrawal's `signed_raw`, which `onSigned`
   * writes in the signing transaction): `sign` then skips its lookup of one. A send committed since that read is
   * still found, under the guard's lock, in the batch (`storedFor`), and that one stands.
   */
  readonly knownUnsigned?: boolean | undefined
}

const latest = (send: Send): SendVersion => send.versions[send.versions.length - 1]!

const ceilPerMille = (value: bigint, perMille: bigint) => (value * perMille + 999n) / 1000n

/** Why a signing transaction was rolled back (inside OutgoingSends only; callers get a SignOutcome). */
class SigningStopped extends Data.TaggedError("SigningStopped")<{
  readonly outcome: "Refused" | "SignerDown" | "Superseded"
  readonly message: string
}> {}

/**
 * The nonces a batch signed with were taken meanwhile, or a gap would open: nothing was stored. `settled` holds the
 * signings whose outcome is known regardless (superseded, or stored by another run).
 */
class NoncesMoved extends Data.TaggedError("NoncesMoved")<{
  readonly settled: ReadonlyMap<number, SignOutcome>
}> {}

export class OutgoingSends extends Context.Service<OutgoingSends, {
  /** The owner's send, if it has one. */
  readonly forOwner: (purpose: SendPurpose, ownerId: string) => Effect.Effect<Send | undefined>
  /**
   * Signs and stores the owner's send, once. `guard` runs first in the same database transaction, locks the owner's
   * row and says whether it may still be signed; `onSigned` runs after the send is stored, in it (the owner's own
   * record of the bytes). Concurrent signings from one address share that transaction (see `signBatch`).
   */
  readonly sign: (spec: SendSpec, hooks: SignHooks) => Effect.Effect<SignOutcome, ChainUnavailable>
  /**
   * Broadcasts the latest version under its claim (sql/0030: one process at a time gives a version to a node); a
   * refusal for good marks the send and fills its EVM nonce. SENT without a call when the node holds the bytes
   * already; LATER while another process's claim is fresh.
   */
  readonly broadcast: (send: Send) => Effect.Effect<BroadcastOutcome>
  /**
   * As `broadcast`, except that when the node took the bytes in this call their count (`outgoing_versions.broadcasts`,
   * which `reserved` reads) is not written here: it comes back as `count`, which the caller writes with
   * `countAndReleaseMany` in its next statement (as a WITH part, which runs whatever that statement's outcome). One
   * round trip less, and no longer a gap: the count waited for a round trip after the node's answer before too. The
   * broadcast's claim is given back by that same write (one round trip less again); in every other case it is given
   * back here.
   */
  readonly broadcastCountedByCaller: (send: Send) => Effect.Effect<{
    readonly outcome: BroadcastOutcome
    readonly count: BroadcastCount | undefined
    /** The node was called in this call (false: the version was claimed elsewhere, or the node held it already). */
    readonly called: boolean
  }>
  /** Where the send stands on the current chain at `head` (see the module's comment). */
  readonly check: (send: Send, head: ChainHead) => Effect.Effect<CheckOutcome, ChainUnavailable>
  /**
   * Records the final inclusion `check` found, and books its network fee when no withdrawal entry does
   * (`feeBookedBySend`); call it in the owner's transition's database transaction.
   */
  readonly markFinal: (send: Send, final: FinalInclusion) => Effect.Effect<void>
  /**
   * Where a send stands that a reorganization reopened after it was final (ReorganizedSends.ts): Final once a version
   * is in a block that meets the confirmation rule again, else Waiting, after giving a node that does not know them
   * the bytes of `txHash` (the version that was on the chain) again, under the broadcast claim. It never signs: no
   * replacement, renewal or fill of a send whose inclusion the journal has booked already.
   */
  readonly recheckReorganized: (send: Send, head: ChainHead, txHash: string) => Effect.Effect<CheckOutcome, ChainUnavailable>
  /** Records a `Conflicted` check (the send is REJECTED); call it in the owner's transition's database transaction. */
  readonly markRejected: (send: Send) => Effect.Effect<void>
  /**
   * What sends from `from` that no node has accepted yet will take (per asset, native network fees included): the
   * node's balance does not show them yet, so a cover check adds them to what it needs.
   */
  readonly reserved: (networkKey: string, from: string) => Effect.Effect<ReadonlyMap<string, bigint>>
  /** `reserved` as a part of another statement (db/ReadPart.ts). */
  readonly reservedPart: (networkKey: string, from: string) => ReadPart<ReadonlyMap<string, bigint>>
  /** Follows the network's sends whose nonce is being filled; returns how many are settled. */
  readonly settleFills: (networkKey: string) => Effect.Effect<number>
}>()("coffer/OutgoingSends") {
  static readonly layer: Layer.Layer<
    OutgoingSends,
    never,
    SqlClient.SqlClient | Catalog | ChainClients | Signer | Ids | AppConfig | Ledger
  > = Layer.effect(
    OutgoingSends,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      const signer = yield* Signer
      const ids = yield* Ids
      const crash = yield* CrashPoints
      const ledger = yield* Ledger
      const { broadcastClaimGraceMillis } = yield* AppConfig
      if (broadcastClaimGraceMillis <= broadcastAnswerMaxMillis) {
        yield* Effect.logWarning(
          `BROADCAST_CLAIM_GRACE_MS=${broadcastClaimGraceMillis} is not above the ${broadcastAnswerMaxMillis} ms a ` +
            "broadcast call may take: a node slow to answer may be given the same bytes by two processes (harmless on " +
            "chain; docs/operations.md)"
        )
      }
      /** The grace as an SQL interval, judged by PostgreSQL's clock so processes with skewed clocks agree. */
      const grace = sql`make_interval(secs => ${broadcastClaimGraceMillis / 1000})`
      // The send crash steps are a withdrawal's (idempotency/CrashPoints.ts): a sweep signing in the background of
      // the same process must not be the one that dies at them.
      const reach = (purpose: SendPurpose, step: (typeof sendCrashSteps)[number]) =>
        purpose === "WITHDRAWAL" ? crash.reach(step) : Effect.void

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const load = (where: Statement.Fragment) =>
        sql`SELECT ${sendColumns(sql)} FROM outgoing_sends s WHERE ${where}`.pipe(Effect.orDie, Effect.flatMap(sendRow))

      const forOwner = (purpose: SendPurpose, ownerId: string) =>
        load(sql`s.purpose = ${purpose} AND s.owner_id = ${ownerId}`)

      const reload = (send: Send) => Effect.map(load(sql`s.id = ${send.id}`), (fresh) => fresh!)

      const sendingChain = (networkKey: string): { client: ChainClient; chain: WithdrawalChain; network: CatalogNetwork } => {
        const client = clients.get(networkKey)
        const network = catalog.network(networkKey)
        if (client?.withdrawals === undefined || network === undefined) {
          throw new Error(`${networkKey} cannot send: no client with withdrawals`)
        }
        return { client, chain: client.withdrawals, network }
      }

      const signRequest = (spec: Pick<SendSpec, "networkKey" | "key" | "transfer">, parameters: WithdrawalParameters) =>
        Effect.gen(function*() {
          const network = catalog.network(spec.networkKey)!
          const asset = catalog.asset(spec.transfer.assetId)!
          return yield* signer.signTransaction(withdrawalRequest(network, asset, spec.transfer, parameters, spec.key)).pipe(
            Effect.catchTags({
              SignerUnavailable: (error) => Effect.fail(new SigningStopped({ outcome: "SignerDown", message: error.message })),
              SignerRefused: (error) => Effect.fail(new SigningStopped({ outcome: "Refused", message: error.message }))
            })
          )
        })

      /** The INSERT of a version; `sendId` is a value or, for a send inserted by the same statement, its CTE's id. */
      const versionInsert = (
        sendId: string | Statement.Fragment,
        networkKey: string,
        version: number,
        kind: "PAYLOAD" | "FILL",
        signed: { readonly txHash: string; readonly raw: string },
        parameters: WithdrawalParameters,
        at: Date
      ) => {
        const evm = parameters.family === "EVM" ? parameters : undefined
        return sql`
          INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, gas, max_fee_per_gas,
            max_priority_fee_per_gas, network_fee_max, signed_at, parameters)
          VALUES (${sendId}, ${version}, ${kind}, ${networkKey}, ${signed.txHash}, ${signed.raw},
            ${evm?.gas.toString() ?? null}, ${evm?.maxFeePerGas.toString() ?? null},
            ${evm?.maxPriorityFeePerGas.toString() ?? null}, ${parameters.networkFee.toString()}, ${at},
            ${storedParameters(parameters)}::jsonb)`
      }

      const insertVersion = (
        sendId: string,
        networkKey: string,
        version: number,
        kind: "PAYLOAD" | "FILL",
        signed: { readonly txHash: string; readonly raw: string },
        parameters: WithdrawalParameters
      ) =>
        Effect.flatMap(now, (at) => versionInsert(sendId, networkKey, version, kind, signed, parameters, at))

      /**
       * The next nonce of each address that has a sequence, read without a lock: where a batch's signatures start
       * (`takeNonces` checks it again when it stores them).
       */
      const nextNonces = (addresses: ReadonlyArray<{ readonly networkKey: string; readonly from: string }>) =>
        addresses.length === 0
          ? Effect.succeed(new Map<string, bigint>())
          : sql`
            SELECT n.network_key, n.address, n.next_nonce::text AS nonce
            FROM evm_nonces n JOIN jsonb_to_recordset(${
            JSON.stringify(addresses.map((address) => ({ network_key: address.networkKey, address: address.from })))
          }::jsonb) AS a(network_key text, address text) ON n.network_key = a.network_key AND n.address = a.address`.pipe(
            Effect.flatMap(nonceRows),
            Effect.map((rows) => new Map(rows.map((row) => [`${row.network_key}/${row.address}`, row.nonce])))
          )

      /**
       * Takes the address's nonces from `start` up to `end` (exclusive) in one statement, only while its sequence
       * still stands at `start` (an address without one starts it there: `start` was its seed): false when a
       * signing elsewhere took them first. The row stays locked to the end of the transaction, so the sends stored
       * with these nonces commit before anyone else can read the sequence past them.
       */
      const takeNonces = (networkKey: string, address: string, start: bigint, end: bigint) =>
        sql`
          INSERT INTO evm_nonces (network_key, address, next_nonce) VALUES (${networkKey}, ${address}, ${end.toString()})
          ON CONFLICT (network_key, address) DO UPDATE SET next_nonce = EXCLUDED.next_nonce
            WHERE evm_nonces.next_nonce = ${start.toString()}
          RETURNING 1`.pipe(Effect.map((rows) => rows.length === 1))

      /** The sends some of these owners have already, by `purpose/ownerId`. */
      const storedFor = (specs: ReadonlyArray<SendSpec>) =>
        specs.length === 0
          ? Effect.succeed(new Map<string, Send>())
          : sql`
            SELECT ${sendColumns(sql)} FROM outgoing_sends s
            WHERE (s.purpose, s.owner_id) IN (
              SELECT o.purpose, o.owner_id FROM jsonb_to_recordset(${
            JSON.stringify(specs.map((spec) => ({ purpose: spec.purpose, owner_id: spec.ownerId })))
          }::jsonb) AS o(purpose text, owner_id uuid))`.pipe(
            Effect.flatMap(storedRows),
            Effect.map((rows) => new Map(rows.map((row) => [`${row.purpose}/${row.owner_id}`, row])))
          )

      const signedOutcome = (stopped: SigningStopped): SignOutcome =>
        stopped.outcome === "Superseded" ? { _tag: "Superseded" } : { _tag: stopped.outcome, message: stopped.message }

      const byOwner = (batch: ReadonlyArray<PendingSigning>) => (a: number, b: number) =>
        batch[a]!.spec.ownerId < batch[b]!.spec.ownerId ? -1 : batch[a]!.spec.ownerId > batch[b]!.spec.ownerId ? 1 : 0

      /**
       * Step 1 of a batch, outside any transaction: per address (in address order) its signings (in owner order),
       * each signed with the next nonce after the sequence as read now. A signing the signer refuses or cannot make
       * now gets its outcome here and takes no nonce.
       */
      const signAhead = (batch: ReadonlyArray<PendingSigning>, open: ReadonlyArray<number>, outcomes: Array<SignOutcome | undefined>) =>
        Effect.gen(function*() {
          const byAddress = new Map<string, Array<number>>()
          for (const index of open) {
            const { spec } = batch[index]!
            const address = `${spec.networkKey}/${spec.transfer.from}`
            byAddress.set(address, [...(byAddress.get(address) ?? []), index])
          }
          const addresses = [...byAddress.keys()].sort().map((address) => {
            const indices = byAddress.get(address)!
            const { spec } = batch[indices[0]!]!
            const seeds = indices.flatMap((index) => {
              const item = batch[index]!
              return item.seed === undefined || item.parameters.family !== "EVM" ? [] : [item.seed]
            })
            return {
              address,
              indices,
              networkKey: spec.networkKey,
              from: spec.transfer.from,
              seed: seeds.length === 0 ? undefined : seeds.reduce((a, b) => a > b ? a : b)
            }
          })
          const current = yield* nextNonces(addresses.filter((address) => address.seed !== undefined))
          const plans: Array<AddressSignatures> = []
          for (const { address, indices, networkKey, from, seed } of addresses) {
            const start = seed === undefined ? undefined : current.get(address) ?? seed
            let next = start
            const signatures: Array<AheadSignature> = []
            for (const index of indices) {
              const { spec, parameters } = batch[index]!
              const sequenced = next !== undefined && batch[index]!.seed !== undefined && parameters.family === "EVM"
              const nonce = parameters.family !== "EVM" ? null : sequenced ? next! : BigInt(parameters.nonce)
              const signedParameters: WithdrawalParameters = parameters.family === "EVM" && nonce !== null
                ? { ...parameters, nonce: Number(nonce) }
                : parameters
              const signed = yield* signRequest(spec, signedParameters).pipe(
                Effect.map((signed) => ({ _tag: "Ok", signed }) as const),
                Effect.catchTag("SigningStopped", (stopped) => Effect.succeed({ _tag: "Stopped", stopped } as const))
              )
              if (signed._tag === "Stopped") {
                outcomes[index] = signedOutcome(signed.stopped)
                continue
              }
              if (sequenced) next = next! + 1n
              signatures.push({ index, nonce, sequenced, parameters: signedParameters, signed: signed.signed })
            }
            plans.push({ networkKey, from, start, signatures })
          }
          return plans
        })

      /**
       * Step 2 of a batch, one short transaction: each owner's guard (in owner order, so two batches never wait on
       * each other in a cycle), one read of the sends stored meanwhile, per address the nonces taken if the sequence
       * has not moved since step 1, then per signature the send, its first version and the owner's record. Answers
       * the outcome of every signature; fails with `NoncesMoved` (nothing stored) when an address's sequence moved,
       * or when an owner that may no longer be signed sits before others in its address's nonce order (storing
       * those would leave a gap).
       */
      const storeSigned = (batch: ReadonlyArray<PendingSigning>, plans: ReadonlyArray<AddressSignatures>) =>
        sql.withTransaction(Effect.gen(function*() {
          const all = plans.flatMap((plan) => plan.signatures.map((signature) => signature.index)).sort(byOwner(batch))
          const live = new Set<number>()
          const together = new Map<string, Array<number>>()
          for (const index of all) {
            const group = batch[index]!.hooks.guardTogether
            if (group !== undefined) together.set(group.key, [...(together.get(group.key) ?? []), index])
            else if (yield* batch[index]!.hooks.guard) live.add(index)
          }
          for (const indices of together.values()) {
            const locked = yield* batch[indices[0]!]!.hooks.guardTogether!.lock(indices.map((index) => batch[index]!.spec.ownerId))
            for (const index of indices) if (locked.has(batch[index]!.spec.ownerId)) live.add(index)
          }
          // Signed by a run that committed while this one waited for the owner's lock: that one stands.
          const stored = yield* storedFor([...live].map((index) => batch[index]!.spec))
          const settled = new Map<number, SignOutcome>()
          for (const index of all) {
            const { spec } = batch[index]!
            const send = stored.get(`${spec.purpose}/${spec.ownerId}`)
            if (!live.has(index)) settled.set(index, { _tag: "Superseded" })
            else if (send !== undefined) settled.set(index, { _tag: "Signed", send })
          }
          for (const plan of plans) {
            const sequenced = plan.signatures.filter((signature) => signature.sequenced)
            const kept = sequenced.filter((signature) => !settled.has(signature.index))
            if (kept.some((signature, position) => signature !== sequenced[position])) return yield* new NoncesMoved({ settled })
            if (kept.length > 0 && !(yield* takeNonces(plan.networkKey, plan.from, plan.start!, plan.start! + BigInt(kept.length)))) {
              return yield* new NoncesMoved({ settled })
            }
          }
          const at = yield* now
          let withdrawalSigned = false
          for (const plan of plans) {
            for (const { index, nonce, parameters, signed } of plan.signatures) {
              if (settled.has(index)) continue
              const { spec, hooks, id } = batch[index]!
              const send = yield* sql`
                WITH send AS (
                  INSERT INTO outgoing_sends (id, network_key, purpose, owner_id, from_address, to_address, asset_id,
                    amount, signing_key, nonce, created_at)
                  VALUES (${id}, ${spec.networkKey}, ${spec.purpose}, ${spec.ownerId}, ${spec.transfer.from},
                    ${spec.transfer.to}, ${spec.transfer.assetId}, ${spec.transfer.amount.toString()},
                    ${JSON.stringify(spec.key)}::jsonb, ${nonce?.toString() ?? null}, ${at})
                  RETURNING *
                ), version AS (
                  ${versionInsert(sql`(SELECT id FROM send)`, spec.networkKey, 1, "PAYLOAD", signed, parameters, at)}
                  RETURNING *
                )${
                hooks.onSigned === undefined ? sql`` : sql`, owner AS (${
                  hooks.onSigned({ txHash: signed.txHash, raw: signed.raw, networkFeeMax: parameters.networkFee, at })
                })`
              }
                SELECT ${sendFields(sql)}, jsonb_build_array(${versionObject(sql)}) AS versions
                FROM send s CROSS JOIN version v`.pipe(Effect.flatMap(signedSendRow))
              if (spec.purpose === "WITHDRAWAL") withdrawalSigned = true
              settled.set(index, { _tag: "Signed", send })
            }
          }
          if (withdrawalSigned) yield* reach("WITHDRAWAL", "send-before-commit")
          return settled
        }))

      /**
       * One batch of the signings queued on a stripe (GroupCommit.ts). The signatures are made first, outside any
       * transaction: no row stays locked while the signer works, however slow a signer (a remote one) may be
       * (docs/ledger.md, "Nothing outside the database inside a transaction"). They are then stored in one short
       * transaction, which takes the address's nonce row once for the batch instead of once per signature. If the
       * nonces moved meanwhile (another process signed from the address), nothing is stored and the batch's open
       * signings are made again on the fresh sequence: signatures that were never stored never leave this process,
       * so the bytes a node may ever see for a nonce are still only the stored ones.
       */
      const signBatch = (batch: ReadonlyArray<PendingSigning>) =>
        Effect.gen(function*() {
          const outcomes: Array<SignOutcome | undefined> = batch.map(() => undefined)
          let open = batch.map((_, index) => index).sort(byOwner(batch))
          for (let round = 1; open.length > 0; round++) {
            if (round > signingRoundsMax) {
              return yield* Effect.die(new Error(`the nonces of a signing batch moved in each of ${signingRoundsMax} rounds`))
            }
            const plans = yield* signAhead(batch, open, outcomes)
            // Nothing signed (the signer is down or refused them all): nothing to store.
            if (plans.every((plan) => plan.signatures.length === 0)) break
            const settled = yield* storeSigned(batch, plans).pipe(
              Effect.catchTag("NoncesMoved", (moved) =>
                Effect.as(
                  Effect.logInfo(`signing round ${round}: nonces taken elsewhere meanwhile, or a gap would open; ` +
                    "nothing stored, the batch signs again"),
                  moved.settled
                ))
            )
            for (const [index, outcome] of settled) {
              // A signature stored by another run keeps its outcome from that run; only this one's are logged.
              const ours = outcome._tag === "Signed" && outcome.send.id === batch[index]!.id
              outcomes[index] = outcome
              if (ours) {
                const { spec } = batch[index]!
                yield* Effect.logInfo(
                  `${spec.purpose.toLowerCase()} ${spec.ownerId}: signed ${outcome.send.versions[0]!.tx_hash} on ` +
                    `${spec.networkKey}` + (outcome.send.nonce === null ? "" : ` with nonce ${outcome.send.nonce}`)
                )
              }
            }
            open = open.filter((index) => outcomes[index] === undefined)
          }
          return outcomes as Array<SignOutcome>
        }).pipe(
          Effect.catchTag("SqlError", Effect.die),
          outsideTransaction(sql)
        )

      /**
       * A batch that fails (a defect, a deadlock) is tried again one signing at a time, so one owner that cannot be
       * signed fails alone instead of taking every signing it was batched with down each time it is asked again.
       */
      const signBatchIsolated = (batch: ReadonlyArray<PendingSigning>) => togetherOrAlone(batch, signBatch)

      // Striped rather than one queue per address: sweeps sign from every deposit address, and a map of those would
      // only grow. Addresses sharing a stripe share its batches, each still in its own nonce order.
      const signingQueues = yield* Effect.forEach(Array.from({ length: signingStripes }), () =>
        makeGroupCommit<PendingSigning, Exit.Exit<SignOutcome>>({ batchMax: signingBatchMax, write: signBatchIsolated }))
      /** Addresses whose nonce sequence exists (`${networkKey}/${address}`), so `sign` does not look again. */
      const sequencedAddresses = makeBoundedCache<true>(sequencedAddressesMax)
      const signingQueue = (networkKey: string, address: string) =>
        signingQueues[stripeOf(`${networkKey}:${address}`, signingStripes)]!

      const spaceTronPayload = makeTronPayloadSpacing()

      const sign = Effect.fn("OutgoingSends.sign")(function*(spec: SendSpec, hooks: SignHooks) {
        const existing = hooks.knownUnsigned === true ? undefined : yield* forOwner(spec.purpose, spec.ownerId)
        if (existing !== undefined) return { _tag: "Signed", send: existing } as SignOutcome
        const { chain } = sendingChain(spec.networkKey)
        const parameters = spaceTronPayload(
          spec.networkKey,
          spec.transfer,
          spec.parameters ?? (yield* chain.withdrawalParameters(spec.transfer))
        )
        // The node's count seeds the sequence on an address's first send only; afterwards PostgreSQL alone decides.
        // A sequence row is never deleted, so one seen once need not be looked for again.
        const sequenceKey = `${spec.networkKey}/${spec.transfer.from}`
        const sequenced = chain.accountNonce !== undefined && (sequencedAddresses.get(sequenceKey) === true || (yield* sql`
          SELECT 1 FROM evm_nonces WHERE network_key = ${spec.networkKey} AND address = ${spec.transfer.from}`
          .pipe(Effect.orDie, Effect.map((rows) => rows.length > 0))))
        if (sequenced) sequencedAddresses.set(sequenceKey, true)
        const seed = chain.accountNonce === undefined ? undefined : sequenced ? 0n : yield* chain.accountNonce(spec.transfer.from)
        const id = yield* ids.uuidV7For("send")
        const outcome = yield* Effect.flatten(
          signingQueue(spec.networkKey, spec.transfer.from)({ spec, hooks, parameters, seed, id })
        )
        if (outcome._tag === "Signed") yield* reach(spec.purpose, "send-after-commit")
        return outcome
      })

      const signedOf = (send: Send, version: SendVersion) => ({
        withdrawalId: send.owner_id,
        from: send.from_address,
        to: version.kind === "FILL" ? send.from_address : send.to_address,
        assetId: version.kind === "FILL" ? catalog.network(send.network_key)!.nativeAssetId : send.asset_id,
        amount: version.kind === "FILL" ? 0n : send.amount,
        raw: version.raw,
        txHash: version.tx_hash,
        networkFee: version.network_fee_max
      })

      const countStatement = (send: Send, version: SendVersion) =>
        sql`UPDATE outgoing_versions SET broadcasts = broadcasts + 1 WHERE send_id = ${send.id} AND version = ${version.version}`
      // The count of a broadcast the node took and its claim given back, for `broadcastCountedByCaller`: written by
      // its caller's next statement (`countAndReleaseMany`), one statement less per withdrawal (issue 34). Were that
      // statement never run (a crash), the claim lapses after its grace, and the next claimer asks the node first.
      const countBroadcast = (send: Send, version: SendVersion) => Effect.orDie(countStatement(send, version))

      /** The first included version of the send on the current chain, if any. */
      const included = (chain: WithdrawalChain, send: Send) =>
        Effect.gen(function*() {
          for (const version of send.versions) {
            const inclusion = yield* chain.inclusion(version.tx_hash)
            if (inclusion !== undefined) return { version, inclusion }
          }
          return undefined
        })

      /**
       * The payload was refused for good: the send is over. An EVM nonce would leave a gap that holds every later
       * transaction of the address, so a 0-value self-transfer takes it (FILLING until that is final).
       */
      const fill = (send: Send, refused: SendVersion) =>
        Effect.gen(function*() {
          const network = catalog.network(send.network_key)!
          // Only where nonces are the service's own sequence (a real EVM node): the simulated chain keeps no gaps.
          if (
            send.nonce === null || refused.max_fee_per_gas === null || refused.max_priority_fee_per_gas === null ||
            sendingChain(send.network_key).chain.accountNonce === undefined
          ) {
            yield* sql`UPDATE outgoing_sends SET state = 'REJECTED' WHERE id = ${send.id} AND state = 'PENDING'`.pipe(Effect.orDie)
            return
          }
          const fillSpec = {
            networkKey: send.network_key,
            key: send.signing_key as SigningKey,
            transfer: { withdrawalId: send.owner_id, from: send.from_address, to: send.from_address, assetId: network.nativeAssetId, amount: 0n }
          }
          // The refused version's fee fields, on a plain transfer's gas.
          const fillParameters: WithdrawalParameters = {
            family: "EVM",
            chainId: network.evmChainId!,
            nonce: Number(send.nonce),
            gas: nativeTransferGas,
            maxFeePerGas: refused.max_fee_per_gas,
            maxPriorityFeePerGas: refused.max_priority_fee_per_gas,
            networkFee: nativeTransferGas * refused.max_fee_per_gas
          }
          // Signed before the transaction (no row locked while the signer works); stored only if the send is still
          // PENDING, else these bytes are dropped unseen.
          yield* Effect.gen(function*() {
            const signed = yield* signRequest(fillSpec, fillParameters)
            const filled = yield* sql.withTransaction(Effect.gen(function*() {
              const moved = yield* sql`UPDATE outgoing_sends SET state = 'FILLING' WHERE id = ${send.id} AND state = 'PENDING' RETURNING id`
              if (moved.length === 0) return false
              yield* insertVersion(send.id, send.network_key, latest(send).version + 1, "FILL", signed, fillParameters)
              return true
            }))
            if (filled) yield* Effect.logWarning(`${send.purpose.toLowerCase()} ${send.owner_id}: nonce ${send.nonce} filled by ${signed.txHash}`)
          }).pipe(
            Effect.catchTag("SqlError", Effect.die),
            // Not signed now: the send stays PENDING and refused, and the next broadcast attempt comes back here.
            Effect.catchTag("SigningStopped", (stopped) => Effect.logWarning(`nonce fill of ${send.id} not signed now: ${stopped.message}`))
          )
          const filling = yield* reload(send)
          if (filling.state === "FILLING") yield* broadcastClaimedVersion(filling, latest(filling)).pipe(Effect.ignore)
        })

      /**
       * Claims the version's broadcast (sql/0030): FIRST when nobody had, AGAIN when the last claim is older than the
       * grace (Config.ts `broadcastClaimGraceMillis`; its claimer may or may not have reached the node), TAKEN while
       * another's claim is fresh. One conditional UPDATE: of two processes at once, one gets it. The claim's time and
       * its age are PostgreSQL's clock (`clock_timestamp()`), never a process's: two processes whose clocks differ
       * still agree on whether a claim is fresh. `token` (the claims counted so far) names this claim.
       */
      const claimBroadcast = (send: Send, version: SendVersion) =>
        Effect.gen(function*() {
          const claimed = yield* sql`
            UPDATE outgoing_versions SET broadcast_claimed_at = clock_timestamp(), broadcast_claims = broadcast_claims + 1
            WHERE send_id = ${send.id} AND version = ${version.version}
              AND (broadcast_claimed_at IS NULL OR broadcast_claimed_at < clock_timestamp() - ${grace})
            RETURNING broadcast_claims`.pipe(Effect.orDie)
          if (claimed.length === 0) return { claim: "TAKEN" as const, token: 0 }
          const token = Number(claimed[0]!["broadcast_claims"])
          return { claim: token === 1 ? "FIRST" as const : "AGAIN" as const, token }
        })

      /**
       * The last look before the bytes leave the process: the claim `token` is still this call's (nobody took it
       * again: the claims count has not moved, it was not given back) and still fresh by PostgreSQL's clock, and
       * then it is stamped again, so another process may take it only once the grace has passed from now. A process
       * that claimed, froze (SIGSTOP, a long pause) past the grace while another took the version over, and then
       * woke, finds its claim gone here and sends nothing. What remains is a freeze longer than the grace between
       * this statement and the node's receipt of the bytes (docs/operations.md, "Broadcast claims").
       */
      const stillClaimed = (send: Send, version: SendVersion, token: number) =>
        sql`
          UPDATE outgoing_versions SET broadcast_claimed_at = clock_timestamp()
          WHERE send_id = ${send.id} AND version = ${version.version} AND broadcast_claims = ${token}
            AND broadcast_claimed_at >= clock_timestamp() - ${grace}
          RETURNING 1`.pipe(Effect.map((rows) => rows.length === 1), Effect.orDie)

      /**
       * Gives the version's bytes to the node under the claim `token` (every path to a node comes here: the first
       * broadcast, the confirmation check's rebroadcast, replacements, renewals and fills): false, without a call,
       * when the claim is no longer this call's. `onSent` runs when the node took them. Once the node has answered
       * (or the call failed), the claim is given back: a fresh claim means a broadcast under way (or a claimer that
       * died or froze within the grace), not a past one, so a rebroadcast after a reorganization need not wait out
       * the grace; whoever claims next asks the node first and finds the bytes there.
       */
      const sendClaimed = <R>(
        send: Send,
        version: SendVersion,
        token: number,
        onSent: Effect.Effect<void, never, R>,
        /** Once the node took the bytes, the claim is given back by the caller's count (`countAndReleaseMany`). */
        releasedByCaller = false
      ): Effect.Effect<boolean, ChainUnavailable | BroadcastRejected, R> =>
        Effect.gen(function*() {
          if (!(yield* stillClaimed(send, version, token))) {
            yield* Effect.logWarning(`${send.purpose.toLowerCase()} ${send.owner_id}: the broadcast claim of ` +
              `${version.tx_hash} is no longer this process's (taken again after its grace); not sent from here`)
            return false
          }
          yield* sendingChain(send.network_key).chain.broadcast(signedOf(send, version)).pipe(
            releasedByCaller
              ? Effect.onError(() => releaseBroadcast(send, version, token))
              : Effect.ensuring(releaseBroadcast(send, version, token))
          )
          yield* onSent
          return true
        })

      /**
       * Gives a claim back once this call is done with it (the node answered, could not be asked, or held the bytes
       * already): the next attempt, here or elsewhere, need not wait out the grace. It asks the node first (its claim
       * is not the first), so bytes a timed-out call did deliver are not sent again. Only the claim this call took
       * (`token`): one taken again since by another process stays that one's.
       */
      const releaseBroadcast = (send: Send, version: SendVersion, token: number) =>
        sql`UPDATE outgoing_versions SET broadcast_claimed_at = NULL
          WHERE send_id = ${send.id} AND version = ${version.version} AND broadcast_claims = ${token}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      /**
       * A version stored by this process (a replacement, a renewal, a fill) given to the node by the process that
       * claims it: a concurrent check that stored nothing, or a process that wakes, does not send it too. Left
       * unclaimed, the check's rebroadcast of bytes the node does not know gets it out.
       */
      const broadcastClaimedVersion = (send: Send, version: SendVersion) =>
        Effect.flatMap(claimBroadcast(send, version), ({ claim, token }) =>
          claim === "FIRST"
            ? Effect.asVoid(sendClaimed(send, version, token, countBroadcast(send, version)))
            : claim === "AGAIN"
            ? releaseBroadcast(send, version, token)
            : Effect.void)

      /**
       * The same bytes again for a node that does not know them: a dropped transaction after a reorganization or a
       * node's restart, a sweep's version waiting out the base fee. Under the claim like every broadcast: while
       * another process's claim is fresh (its broadcast under way, or it froze right before it) this one leaves it;
       * once claimed, the node is asked (again: a broadcast elsewhere may have completed since the caller asked) and
       * given the bytes only if it still does not know them. True when the node was given them.
       */
      const rebroadcast = (send: Send, version: SendVersion) =>
        Effect.gen(function*() {
          const { claim, token } = yield* claimBroadcast(send, version)
          if (claim === "TAKEN") return false
          const state = yield* sendingChain(send.network_key).client.transactionState(version.tx_hash).pipe(
            Effect.tapError(() => releaseBroadcast(send, version, token))
          )
          if (state !== "UNKNOWN") {
            yield* releaseBroadcast(send, version, token)
            return false
          }
          return yield* sendClaimed(send, version, token, countBroadcast(send, version))
        })

      /**
       * The latest version broadcast under its claim; its count written here, or (`countByCaller`) handed back as
       * `count`. Claimed elsewhere or before (a process frozen or killed between its claim and its broadcast, a
       * handler run twice), the node is asked first: bytes it holds are not sent again, so a process that wakes after
       * another took its work over finds them sent and sends nothing (issue 32).
       */
      const broadcastLatest = (send: Send, countByCaller: boolean) =>
        Effect.gen(function*() {
          const { chain, client } = sendingChain(send.network_key)
          const version = latest(send)
          const what = `${send.purpose.toLowerCase()} ${send.owner_id}`
          const { claim, token } = yield* claimBroadcast(send, version)
          if (claim !== "TAKEN") yield* reach(send.purpose, "send-after-claim")
          if (claim !== "FIRST") {
            const state = yield* client.transactionState(version.tx_hash).pipe(Effect.option)
            if (state._tag === "Some" && state.value !== "UNKNOWN") {
              // Nothing under way: the claim this call took (if any) is given back at once.
              if (claim === "AGAIN") yield* releaseBroadcast(send, version, token)
              yield* Effect.logInfo(`${what}: ${version.tx_hash} is held by the node already; not broadcast again`)
              return { outcome: "SENT" as BroadcastOutcome, count: undefined, called: false }
            }
            if (claim === "TAKEN") {
              yield* Effect.logInfo(`${what}: the broadcast of ${version.tx_hash} is claimed by another process; it waits`)
              return { outcome: "LATER" as BroadcastOutcome, count: undefined, called: false }
            }
            if (state._tag === "None") {
              yield* releaseBroadcast(send, version, token)
              yield* Effect.logWarning(`${what}: the node cannot be asked about ${version.tx_hash} now; will retry`)
              return { outcome: "LATER" as BroadcastOutcome, count: undefined, called: false }
            }
            yield* Effect.logWarning(`${what}: ${version.tx_hash} was claimed before and the node does not know it; ` +
              "broadcast again")
          }
          let count: BroadcastCount | undefined
          const sent = sendClaimed(
            send,
            version,
            token,
            countByCaller
              ? Effect.sync(() => {
                count = { sendId: send.id, version: version.version, token }
              })
              : countBroadcast(send, version),
            countByCaller
          )
          const outcome = yield* sent.pipe(
            Effect.flatMap((called) =>
              called
                ? Effect.as(
                  Effect.andThen(
                    reach(send.purpose, "send-after-broadcast"),
                    Effect.logInfo(`${send.purpose.toLowerCase()} ${send.owner_id}: broadcast ${version.tx_hash}` +
                      (send.nonce === null ? "" : ` (nonce ${send.nonce})`))
                  ),
                  "SENT" as BroadcastOutcome | "CLAIM_LOST"
                )
                : Effect.succeed("CLAIM_LOST" as const)
            ),
            Effect.catchTag("ChainUnavailable", (error) =>
              Effect.as(
                Effect.andThen(
                  releaseBroadcast(send, version, token),
                  Effect.logWarning(`${send.purpose.toLowerCase()} ${send.owner_id}: broadcast not possible now (${error.message}); will retry`)
                ),
                "LATER" as const
              )),
            Effect.catchTag("BroadcastRejected", (error) =>
              Effect.gen(function*() {
                if (error.nonceUsed === true) {
                  // BTC has no nonce: there the same answer means an input is spent (chains/btc/BtcWithdrawals.ts).
                  const btc = catalog.network(send.network_key)?.chainFamily === "BTC"
                  // Ours, mined meanwhile (a crash after the node took it), looks the same as somebody else's.
                  const mine = yield* included(chain, send).pipe(Effect.orElseSucceed(() => "UNKNOWN" as const))
                  if (mine === "UNKNOWN") return yield* Effect.as(releaseBroadcast(send, version, token), "LATER" as const)
                  if (mine !== undefined) {
                    yield* Effect.logInfo(`${send.purpose.toLowerCase()} ${send.owner_id}: ` +
                      (btc ? "its inputs are spent by " : `nonce ${send.nonce} is taken by `) +
                      `its own ${mine.version.tx_hash}, already in a block`)
                    return "SENT" as const
                  }
                  yield* Effect.logError(`${send.purpose.toLowerCase()} ${send.owner_id}: ` + (btc
                    ? `an input of ${version.tx_hash} was spent by another transaction`
                    : `nonce ${send.nonce} was used by another transaction`))
                  yield* sql`UPDATE outgoing_sends SET state = 'REJECTED' WHERE id = ${send.id} AND state = 'PENDING'`.pipe(Effect.orDie)
                  return "REJECTED" as const
                }
                yield* Effect.logError(`${send.purpose.toLowerCase()} ${send.owner_id}: ${version.tx_hash} refused for good: ${error.message}`)
                yield* fill(send, version)
                return "REJECTED" as const
              }))
          )
          // Taken again while this process was away: the other claimer's broadcast stands; the next attempt asks the
          // node (its claim is not the first) and finds the bytes there.
          if (outcome === "CLAIM_LOST") return { outcome: "LATER" as BroadcastOutcome, count: undefined, called: false }
          return { outcome, count, called: true }
        })

      const broadcast = Effect.fn("OutgoingSends.broadcast")(function*(send: Send) {
        return (yield* broadcastLatest(send, false)).outcome
      })
      const broadcastCountedByCaller = Effect.fn("OutgoingSends.broadcast")(function*(send: Send) {
        return yield* broadcastLatest(send, true)
      })

      /**
       * Stores `signed` as the version after `version`, signed before this call (no row locked while the signer
       * works): only while the send is in one of `states` and `version` is still its latest, else a concurrent check
       * stored one first and these bytes are dropped unseen. True when stored.
       */
      const storeNextVersion = (
        send: Send,
        version: SendVersion,
        states: ReadonlyArray<"PENDING" | "FILLING">,
        signed: { readonly txHash: string; readonly raw: string },
        parameters: WithdrawalParameters
      ) =>
        sql.withTransaction(Effect.gen(function*() {
          const locked = yield* sql`SELECT id FROM outgoing_sends WHERE id = ${send.id} AND state IN ${sql.in(states)} FOR UPDATE`
          if (locked.length === 0) return false
          const top = yield* sql`SELECT max(version) AS version FROM outgoing_versions WHERE send_id = ${send.id}`
          if (Number(top[0]!["version"]) !== version.version) return false
          yield* insertVersion(send.id, send.network_key, version.version + 1, version.kind, signed, parameters)
          return true
        }))

      /**
       * Signs the next version of a stuck EVM send: same nonce and payload, both fee fields raised by at least
       * 12.5 % and to what the node asks now if more, never above the network's cap (then it only waits).
       */
      const replace = (send: Send, version: SendVersion, network: CatalogNetwork, chain: WithdrawalChain) =>
        Effect.gen(function*() {
          if (version.gas === null || version.max_fee_per_gas === null || version.max_priority_fee_per_gas === null) return
          if (send.purpose === "SWEEP") {
            // A sweep's address holds exactly the fee it signed for (docs/sweeps.md): a version with higher fees
            // could never be paid. It keeps its bytes, given again to a node that dropped them, and waits for the
            // base fee to come back under its maxFeePerGas (twice the base fee when it was signed).
            yield* rebroadcast(send, version).pipe(Effect.ignore)
            return
          }
          // Read now, not from an earlier reading: the base fee may have risen since (that is why it is stuck).
          const current = chain.currentFeesPerGas === undefined
            ? undefined
            : yield* chain.currentFeesPerGas.pipe(Effect.option)
          const currentFees = current?._tag === "Some" ? current.value : undefined
          const bumpedFee = ceilPerMille(version.max_fee_per_gas, replacementBumpPerMille)
          const bumpedTip = ceilPerMille(version.max_priority_fee_per_gas, replacementBumpPerMille)
          const maxFeePerGas = currentFees !== undefined && currentFees.maxFeePerGas > bumpedFee ? currentFees.maxFeePerGas : bumpedFee
          const tip = currentFees !== undefined && currentFees.maxPriorityFeePerGas > bumpedTip ? currentFees.maxPriorityFeePerGas : bumpedTip
          if (maxFeePerGas > network.feeRateCap) {
            yield* Effect.logWarning(`${send.purpose.toLowerCase()} ${send.owner_id}: stuck at nonce ${send.nonce}, but a replacement would pass the fee cap; waiting`)
            return
          }
          const parameters: WithdrawalParameters = {
            family: "EVM",
            chainId: network.evmChainId!,
            nonce: Number(send.nonce),
            gas: version.gas,
            maxFeePerGas,
            maxPriorityFeePerGas: tip > maxFeePerGas ? maxFeePerGas : tip,
            networkFee: version.gas * maxFeePerGas
          }
          const transfer = signedOf(send, version)
          yield* Effect.gen(function*() {
            const signed = yield* signRequest({ networkKey: send.network_key, key: send.signing_key as SigningKey, transfer }, parameters)
            if (!(yield* storeNextVersion(send, version, ["PENDING", "FILLING"], signed, parameters))) return
            yield* Effect.logWarning(
              `${send.purpose.toLowerCase()} ${send.owner_id}: ${version.tx_hash} not included after ${stuckAfterBlocks} blocks; ` +
                `replaced by ${signed.txHash} (nonce ${send.nonce}, maxFeePerGas ${maxFeePerGas})`
            )
          }).pipe(
            Effect.catchTag("SqlError", Effect.die),
            Effect.catchTag("SigningStopped", (stopped) => Effect.logWarning(`replacement of ${send.id} not signed now: ${stopped.message}`))
          )
          const fresh = yield* reload(send)
          if (latest(fresh).version > version.version) yield* broadcastClaimedVersion(fresh, latest(fresh)).pipe(Effect.ignore)
        })

      /**
       * Signs the next version of the send's payload on `parameters` and broadcasts it: a TRON/SOL transaction whose
       * reference expired, or a BTC replacement by fee. Only while the send is open and `version` is still its latest
       * (a concurrent check may have signed one already).
       */
      const resign = (send: Send, version: SendVersion, parameters: WithdrawalParameters, why: string) =>
        Effect.gen(function*() {
          const transfer = signedOf(send, version)
          yield* Effect.gen(function*() {
            const signed = yield* signRequest({ networkKey: send.network_key, key: send.signing_key as SigningKey, transfer }, parameters)
            if (!(yield* storeNextVersion(send, version, ["PENDING"], signed, parameters))) return
            yield* Effect.logWarning(
              `${send.purpose.toLowerCase()} ${send.owner_id}: ${version.tx_hash} ${why}; signed again as ${signed.txHash}`
            )
          }).pipe(
            Effect.catchTag("SqlError", Effect.die),
            Effect.catchTag("SigningStopped", (stopped) => Effect.logWarning(`new version of ${send.id} not signed now: ${stopped.message}`))
          )
          const fresh = yield* reload(send)
          if (latest(fresh).version > version.version) yield* broadcastClaimedVersion(fresh, latest(fresh)).pipe(Effect.ignore)
        })

      /** A version found in a block: Final once the network's confirmation rule holds at `head`, else Waiting. */
      const outcomeOfInclusion = (
        network: CatalogNetwork,
        head: ChainHead,
        found: { readonly version: SendVersion; readonly inclusion: Inclusion }
      ): CheckOutcome =>
        meetsConfirmationRule(network, head, found.inclusion.height)
          ? {
            _tag: "Final",
            succeeded: found.inclusion.succeeded,
            txHash: found.version.tx_hash,
            height: found.inclusion.height,
            networkFee: found.inclusion.networkFee ?? found.version.network_fee_max,
            accountCost: found.inclusion.accountCost ?? 0n,
            kind: found.version.kind
          }
          : { _tag: "Waiting", includedAt: found.inclusion.height }

      const check = Effect.fn("OutgoingSends.check")(function*(send: Send, head: ChainHead) {
        const { chain, client, network } = sendingChain(send.network_key)
        const found = yield* included(chain, send)
        if (found !== undefined) return outcomeOfInclusion(network, head, found)
        const version = latest(send)
        if (version.sent_height === null) {
          yield* sql`UPDATE outgoing_versions SET sent_height = ${head.height.toString()}
            WHERE send_id = ${send.id} AND version = ${version.version} AND sent_height IS NULL`.pipe(Effect.orDie)
        }
        const waited = version.sent_height === null ? 0n : head.height - version.sent_height
        if (send.state === "PENDING" && chain.expired !== undefined && (yield* chain.expired(signedOf(send, version)))) {
          // In no block (checked above, on the current chain) and past its expiry: it can never be included, so the
          // same payload is signed again on a fresh reference (decisions.md: TRON and SOL re-sign only after expiry).
          const fresh = yield* chain.withdrawalParameters(signedOf(send, version))
          yield* resign(send, version, renewedParameters(signedParameters(version.parameters), fresh), "expired unincluded")
          return { _tag: "Waiting" } as CheckOutcome
        }
        const previous = signedParameters(version.parameters)
        if (send.state === "PENDING" && chain.replacementParameters !== undefined && previous !== undefined && waited > 0n) {
          const replacement = yield* chain.replacementParameters(previous, waited)
          if (replacement !== undefined) {
            yield* resign(send, version, replacement, `not included after ${waited} blocks; replaced by fee`)
            return { _tag: "Waiting" } as CheckOutcome
          }
        }
        const stuck = send.nonce !== null && (chain.accountNonce !== undefined || chain.nonceReplacement === true) &&
          version.sent_height !== null &&
          waited >= stuckAfterBlocks
        if (stuck) {
          // Waiting in the pool, or dropped from it for paying too little (anvil drops what a block's base fee
          // leaves behind; geth keeps it queued): either way the same nonce and payload with higher fees.
          yield* replace(send, version, network, chain)
        } else if ((yield* client.transactionState(version.tx_hash)) === "UNKNOWN") {
          // In no block and in no mempool: somebody else's spend may have taken an input (BTC). Only once that
          // spend is final can a reorganization not bring ours back; until then the same bytes are offered again.
          if (send.state === "PENDING" && chain.conflicted !== undefined) {
            const final = (at: ChainHead, height: bigint) => meetsConfirmationRule(network, at, height)
            const hashes = send.versions.map((each) => each.tx_hash)
            // Looked at again after the proof: a version mined meanwhile is never rejected.
            if ((yield* chain.conflicted(signedOf(send, version), hashes, final)) && (yield* included(chain, send)) === undefined) {
              yield* Effect.logError(`${send.purpose.toLowerCase()} ${send.owner_id}: an input of ${version.tx_hash} ` +
                `is spent in a final block by another transaction; no version can be included`)
              return { _tag: "Conflicted" } as CheckOutcome
            }
          }
          // Dropped with a reorganized block, or a node that restarted: the same bytes again, never new ones.
          yield* rebroadcast(send, version).pipe(
            Effect.tap((sent) =>
              sent
                ? Effect.logInfo(`${send.purpose.toLowerCase()} ${send.owner_id}: rebroadcast ${version.tx_hash}`)
                : Effect.void
            ),
            Effect.catchCause((cause) => Effect.logWarning(`${send.purpose.toLowerCase()} ${send.owner_id}: rebroadcast failed`, cause))
          )
        }
        return { _tag: "Waiting" } as CheckOutcome
      })

      const recheckReorganized = Effect.fn("OutgoingSends.recheckReorganized")(function*(send: Send, head: ChainHead, txHash: string) {
        const { chain, client, network } = sendingChain(send.network_key)
        const found = yield* included(chain, send)
        if (found !== undefined) return outcomeOfInclusion(network, head, found)
        const version = send.versions.find((each) => each.tx_hash === txHash) ?? latest(send)
        if ((yield* client.transactionState(version.tx_hash)) === "UNKNOWN") {
          yield* rebroadcast(send, version).pipe(
            Effect.tap((sent) =>
              sent
                ? Effect.logWarning(`${send.purpose.toLowerCase()} ${send.owner_id}: rebroadcast ${version.tx_hash}, ` +
                  "reorganized away after it was final")
                : Effect.void
            ),
            Effect.catchCause((cause) =>
              Effect.logWarning(`${send.purpose.toLowerCase()} ${send.owner_id}: rebroadcast of ${version.tx_hash} failed`, cause)
            )
          )
        }
        return { _tag: "Waiting" } as CheckOutcome
      })

      // The fee is booked in the statement's transaction (the owner's): recorded final and booked, or neither. The
      // tenant is the payer's: a withdrawal's, or the sweep's (its deposit address or GAS wallet is the tenant's).
      const markFinal = (send: Send, final: FinalInclusion) =>
        Effect.gen(function*() {
          const marked = yield* sql`
            WITH marked AS (
              UPDATE outgoing_sends SET
                state = ${final.kind === "FILL" ? "REJECTED" : final.succeeded ? "CONFIRMED" : "REVERTED"},
                included_tx_hash = ${final.txHash}, included_height = ${final.height.toString()},
                network_fee = ${final.networkFee.toString()}, account_cost = ${final.accountCost.toString()}
              -- A send reopened by a reorganization is restored by ReorganizedSends.ts, which books nothing again.
              WHERE id = ${send.id} AND state IN ('PENDING', 'FILLING') AND reorganized_from_state IS NULL
              RETURNING purpose, owner_id
            )
            SELECT CASE m.purpose
                WHEN 'WITHDRAWAL' THEN (SELECT t.tenant_id FROM transactions t WHERE t.id = m.owner_id)
                ELSE (SELECT w.tenant_id FROM sweeps w WHERE w.id = m.owner_id)
              END AS tenant_id
            FROM marked m`.pipe(Effect.orDie, Effect.flatMap(markedRows))
          const entry = Postings.sendNetworkFee(catalog.network(send.network_key)!.nativeAssetId, sendCost(send.purpose, final))
          if (marked.length === 0 || entry === undefined) return
          const tenantId = marked[0]!.tenant_id
          if (tenantId === null) {
            return yield* Effect.die(new Error(`send ${send.id}: its ${send.purpose} ${send.owner_id} has no tenant`))
          }
          yield* ledger.post(entryRequest(tenantId, send.id, entry)).pipe(Effect.orDie)
        })

      const markRejected = (send: Send) =>
        sql`UPDATE outgoing_sends SET state = 'REJECTED' WHERE id = ${send.id} AND state = 'PENDING'`.pipe(Effect.asVoid, Effect.orDie)

      const reservedPart = (networkKey: string, from: string): ReadPart<ReadonlyMap<string, bigint>> => {
        const nativeAssetId = catalog.network(networkKey)!.nativeAssetId
        return {
          // Driven from the first versions never broadcast (sql/0035_unsent_versions.sql), not from the address's
          // PENDING sends, most of which wait for their blocks: each unsent send gives its amount and its fee. Its
          // send and its other versions are reached by key (scalar subqueries): on tables not analyzed yet the planner
          // otherwise chose to scan the address's open sends once per unsent version (7 ms in the bench's burst).
          columns: sql`(
            SELECT json_agg(json_build_object('asset_id', r.asset_id, 'amount', r.amount))
            FROM outgoing_versions v
              CROSS JOIN LATERAL (SELECT (SELECT s FROM outgoing_sends s WHERE s.id = v.send_id) AS s OFFSET 0) x
              CROSS JOIN LATERAL (VALUES ((x.s).asset_id, (x.s).amount::text), (${nativeAssetId}, v.network_fee_max::text))
                AS r(asset_id, amount)
            WHERE v.network_key = ${networkKey} AND v.broadcasts = 0 AND v.version = 1
              AND (x.s).network_key = ${networkKey} AND (x.s).from_address = ${from} AND (x.s).state = 'PENDING'
              AND (SELECT max(w.broadcasts) FROM outgoing_versions w WHERE w.send_id = v.send_id) = 0
            ) AS reserved_sends`,
          decode: (row) =>
            Effect.map(reservedRow(row), ({ reserved_sends }) => {
              const sums = new Map<string, bigint>()
              for (const entry of reserved_sends ?? []) {
                sums.set(entry.asset_id, (sums.get(entry.asset_id) ?? 0n) + entry.amount)
              }
              return sums as ReadonlyMap<string, bigint>
            })
        }
      }
      const reserved = (networkKey: string, from: string) => readAlone(sql, reservedPart(networkKey, from))

      const settleFills = Effect.fn("OutgoingSends.settleFills")(function*(networkKey: string) {
        const client = clients.get(networkKey)
        if (client?.withdrawals === undefined) return 0
        const filling = yield* sql`SELECT ${sendColumns(sql)} FROM outgoing_sends s
          WHERE s.network_key = ${networkKey} AND s.state = 'FILLING' AND s.reorganized_from_state IS NULL
          ORDER BY s.nonce LIMIT 100`
          .pipe(Effect.orDie, Effect.flatMap(sendRows))
        if (filling.length === 0) return 0
        const head = yield* client.head
        let settled = 0
        for (const send of filling) {
          const outcome = yield* check(send, head)
          if (outcome._tag === "Final") {
            // The fill's fee is booked with the mark: one transaction (there is no owner's transition here).
            yield* sql.withTransaction(markFinal(send, outcome)).pipe(Effect.orDie)
            settled++
          }
        }
        return settled
      }, (effect) => effect.pipe(Effect.catchTag("ChainUnavailable", (error) =>
        Effect.as(Effect.logWarning(`nonce fills: ${error.message}`), 0))))

      return OutgoingSends.of({ forOwner, sign, broadcast, broadcastCountedByCaller, check, markFinal, markRejected, reserved, reservedPart, settleFills, recheckReorganized })
    })
  ).pipe(Layer.provide(CrashPoints.layer), Layer.orDie)
}

export { ChainUnavailable }
