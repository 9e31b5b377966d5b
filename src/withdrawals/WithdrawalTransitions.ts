/**
 * The on-chain withdrawal life cycle as data (decisions.md "Withdrawal life cycle", spec section 3): every legal
 * transition, by name, with the statuses it may leave, the status and sub-status it enters, its ledger effect and
 * its event. Nothing here does I/O; `WithdrawalProcessor.transition` applies one entry as a conditional UPDATE with
 * its ledger entries and event in one database transaction, and treats a request the table does not allow as a
 * defect (a caller that asks for it is wrong; the database must never see it), while a transition that lost a race
 * (the row moved on between the read and the UPDATE) is an ordinary `false`.
 *
 * Creation (SUBMITTED with amount + fee frozen, TRANSACTION_CREATED) is an INSERT, not a transition: `creation`
 * names its ledger effect so that Withdrawals.submit builds it through the same function.
 */
import { Data, Schema } from "effect"
import { type Entry, type Payment, Postings } from "../ledger/Postings.ts"
import { type SubStatus, TransactionStatus } from "../transactions/Transaction.ts"

/**
 * What a transition does to the books (docs/ledger.md): `freeze` amount + fee from available to frozen, `release`
 * the freeze negated (FAILED, REJECTED, CANCELLED), `settle` frozen consumed (COMPLETED), `networkFee` the miner's
 * fee the vault paid (COMPLETED, when above zero).
 */
export type LedgerEffect = "freeze" | "release" | "settle" | "networkFee"

export interface TransitionRule {
  /** The statuses this transition may leave; from any other it is illegal. */
  readonly from: ReadonlyArray<TransactionStatus>
  /**
   * Only while the withdrawal has no sub-status: part of the UPDATE's guard, so that setting a sub-status twice
   * changes nothing and emits one event (a repeat is a lost race, not an illegal transition).
   */
  readonly fromWithoutSubStatus?: boolean
  readonly to: TransactionStatus
  readonly subStatus: SubStatus | null
  readonly ledger: ReadonlyArray<LedgerEffect>
  /** decisions.md: every status change emits TRANSACTION_STATUS_UPDATED. */
  readonly event: "TRANSACTION_STATUS_UPDATED"
}

/** The entry SUBMITTED is born with (decisions.md: amount + fee frozen from SUBMITTED until a terminal state). */
export const creation = {
  to: "SUBMITTED",
  ledger: ["freeze"],
  event: "TRANSACTION_CREATED"
} as const satisfies { to: TransactionStatus; ledger: ReadonlyArray<LedgerEffect>; event: string }

const statusUpdated = "TRANSACTION_STATUS_UPDATED" as const

/** Every transition decisions.md allows; the ones it does not name do not exist. */
export const withdrawalTransitions = {
  /** The tenant's withdrawalApprovalAbove is hit: the operator decides. */
  awaitAuthorization: { from: ["SUBMITTED"], to: "PENDING_AUTHORIZATION", subStatus: null, ledger: [], event: statusUpdated },
  queue: { from: ["SUBMITTED"], to: "QUEUED", subStatus: null, ledger: [], event: statusUpdated },
  /** The operator approves (operator-interface.md). */
  approve: { from: ["PENDING_AUTHORIZATION"], to: "QUEUED", subStatus: null, ledger: [], event: statusUpdated },
  /** The hot wallet cannot cover it; it stays QUEUED and cancellable. */
  awaitPlatformFunds: {
    from: ["QUEUED"],
    fromWithoutSubStatus: true,
    to: "QUEUED",
    subStatus: "INSUFFICIENT_FUNDS_PLATFORM",
    ledger: [],
    event: statusUpdated
  },
  startSigning: { from: ["QUEUED"], to: "PENDING_SIGNATURE", subStatus: null, ledger: [], event: statusUpdated },
  /** Broadcast accepted; the txHash is set with it. */
  broadcast: { from: ["PENDING_SIGNATURE"], to: "CONFIRMING", subStatus: null, ledger: [], event: statusUpdated },
  /** Final by the network's rule; networkFeeRaw is set with it. */
  complete: { from: ["CONFIRMING"], to: "COMPLETED", subStatus: null, ledger: ["settle", "networkFee"], event: statusUpdated },
  /** The destination is in the tenant's blockedAddresses (checked on leaving SUBMITTED today). */
  blockByPolicy: {
    from: ["SUBMITTED", "QUEUED"],
    to: "REJECTED",
    subStatus: "BLOCKED_BY_POLICY",
    ledger: ["release"],
    event: statusUpdated
  },
  /** operator-interface.md reject; also from PENDING_AUTHORIZATION, which is what the operator decides on. */
  rejectByOperator: {
    from: ["SUBMITTED", "PENDING_AUTHORIZATION", "QUEUED"],
    to: "REJECTED",
    subStatus: "REJECTED_BY_OPERATOR",
    ledger: ["release"],
    event: statusUpdated
  },
  /**
   * decisions.md lists PENDING_SIGNATURE/CONFIRMING ─► FAILED for three sub-statuses together; signing and the first
   * broadcast happen in PENDING_SIGNATURE only (a failed rebroadcast of a CONFIRMING withdrawal is never terminal,
   * "Sending on real networks"), so these two leave PENDING_SIGNATURE alone.
   */
  failSigning: { from: ["PENDING_SIGNATURE"], to: "FAILED", subStatus: "SIGNING_FAILED", ledger: ["release"], event: statusUpdated },
  failBroadcast: { from: ["PENDING_SIGNATURE"], to: "FAILED", subStatus: "BROADCAST_FAILED", ledger: ["release"], event: statusUpdated },
  /**
   * The one terminal end of a CONFIRMING withdrawal other than its inclusion: the chain proves that no version of
   * its send can ever be included (sending/OutgoingSends.ts `Conflicted`; BTC: an input spent in a final block by
   * another transaction). A failed rebroadcast alone stays non-terminal; this needs the proof.
   */
  failConflicted: { from: ["CONFIRMING"], to: "FAILED", subStatus: "BROADCAST_FAILED", ledger: ["release"], event: statusUpdated },
  /**
   * Included but failed on chain (decisions.md "Sending on real networks"): the frozen funds go back, and the burned
   * network fee is the platform's cost, booked like a completed withdrawal's.
   */
  revertOnChain: {
    from: ["PENDING_SIGNATURE", "CONFIRMING"],
    to: "FAILED",
    subStatus: "REVERTED_ON_CHAIN",
    ledger: ["release", "networkFee"],
    event: statusUpdated
  },
  cancelByUser: {
    from: ["SUBMITTED", "PENDING_AUTHORIZATION", "QUEUED"],
    to: "CANCELLED",
    subStatus: "CANCELLED_BY_USER",
    ledger: ["release"],
    event: statusUpdated
  }
} as const satisfies Record<string, TransitionRule>

export type TransitionName = keyof typeof withdrawalTransitions

/** The miner's fee a completed withdrawal cost the vault, in the network's native coin. */
export interface NetworkFee {
  readonly amount: bigint
  readonly assetId: string
}

/**
 * The ledger entries of declared effects, built by ledger/Postings.ts for the withdrawal's payment: the one place a
 * table effect becomes an entry. A network fee of 0 books nothing (the ledger refuses an all-zero entry).
 */
export const ledgerEntries = (
  effects: ReadonlyArray<LedgerEffect>,
  payment: Payment,
  networkFee?: NetworkFee
): ReadonlyArray<Entry> =>
  effects.flatMap((effect): ReadonlyArray<Entry> => {
    switch (effect) {
      case "freeze":
        return [Postings.withdrawalFreeze(payment)]
      case "release":
        return [Postings.withdrawalRelease(payment)]
      case "settle":
        return [Postings.withdrawalSettle(payment)]
      case "networkFee": {
        if (networkFee === undefined) throw new Error("a networkFee effect needs the network fee")
        const entry = Postings.networkFee(networkFee.assetId, networkFee.amount)
        return entry === undefined ? [] : [entry]
      }
    }
  })

/** Whether the table allows `name` from `status` (a user's or operator's request from another one is refused). */
export const allows = (name: TransitionName, status: TransactionStatus): boolean =>
  (withdrawalTransitions[name].from as ReadonlyArray<TransactionStatus>).includes(status)

/** A transition asked for from a status the table does not allow: a defect in the caller, never a client error. */
export class IllegalTransition extends Data.TaggedError("IllegalTransition")<{
  readonly transition: TransitionName
  readonly withdrawalId: string
  readonly status: TransactionStatus
}> {
  override get message() {
    return `illegal withdrawal transition ${this.transition} from ${this.status} (withdrawal ${this.withdrawalId}); ` +
      `allowed from ${withdrawalTransitions[this.transition].from.join(", ")}`
  }
}

/**
 * The processor's reply to one `process` (the withdrawal entity's Process and ProcessNow reply): the status the withdrawal
 * stands in once it can go no further now, or MISSING when there is no such withdrawal. Encoded as the bare string
 * it always was, so replies the cluster stored before stay readable.
 */
export const ProcessReply = Schema.Literals([...TransactionStatus, "MISSING"])
export type ProcessReply = typeof ProcessReply.Type

/** What one step of `process` tells its loop: go on from the status it left (NEXT), or stop here (STOP). */
export type StepOutcome = "NEXT" | "STOP"
