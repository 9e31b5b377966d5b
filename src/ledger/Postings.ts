/**
 * Every movement of funds as a balanced journal entry, in one place (docs/ledger.md, "Entries"): the pipelines say
 * what happened (a transfer of this amount and fee, a withdrawal settled, a deposit credited net of its fee) and take
 * the entry from here; `Ledger.post`/`postMany` are the one path that writes it. Pure: no I/O, no clock.
 *
 * A few shapes make up all of them: a freeze moves amount + fee from the payer's available to its frozen (and a
 * release is the freeze negated); a payout takes amount + fee from the payer (available, or frozen when it waited)
 * and gives the amount to its destination (a wallet, or CHAIN when it leaves custody) and the fee to FEES; a deposit
 * credit takes the amount from CHAIN and gives it to the wallet net of the fee, the fee to FEES. A FEES posting of 0
 * is never written (the ledger refuses zero postings). ledger/ExpectedEntries.ts restates these rules on purpose,
 * independently, for the audit.
 */
import type { AccountRef, EntryKind, EntryRequest, Posting } from "./Ledger.ts"

/** An entry before it names its tenant and the transaction it books. */
export interface Entry {
  readonly kind: EntryKind
  readonly postings: ReadonlyArray<Posting>
}

/** The entry as the ledger takes it: booked for `tenantId`, referencing the transaction `referenceId`. */
export const entryRequest = (tenantId: string, referenceId: string, entry: Entry): EntryRequest => ({
  tenantId,
  referenceId,
  kind: entry.kind,
  postings: entry.postings
})

/** A payer's movement: amount + fee leave its wallet (a withdrawal, or an internal transfer). */
export interface Payment {
  readonly walletId: string
  readonly assetId: string
  readonly amount: bigint
  readonly fee: bigint
}

/** A deposit credited (or reversed) to the wallet its address belongs to. */
export interface CreditedDeposit {
  readonly walletId: string
  readonly assetId: string
  readonly amount: bigint
}

const negated = (postings: ReadonlyArray<Posting>): ReadonlyArray<Posting> =>
  postings.map((posting) => ({ ...posting, amount: -posting.amount }))

const wallet = (walletId: string): AccountRef => ({ kind: "WALLET", walletId })

const feePostings = (assetId: string, fee: bigint): ReadonlyArray<Posting> =>
  fee > 0n ? [{ account: { kind: "FEES" }, assetId, bucket: "AVAILABLE", amount: fee }] : []

/** amount + fee from the payer's available to its frozen. */
const freeze = (payment: Payment): ReadonlyArray<Posting> => {
  const total = payment.amount + payment.fee
  return [
    { account: wallet(payment.walletId), assetId: payment.assetId, bucket: "AVAILABLE", amount: -total },
    { account: wallet(payment.walletId), assetId: payment.assetId, bucket: "FROZEN", amount: total }
  ]
}

/** amount + fee from the payer's `from` bucket: the amount to `to`, the fee to FEES. */
const payout = (payment: Payment, from: Posting["bucket"], to: AccountRef): ReadonlyArray<Posting> => [
  { account: wallet(payment.walletId), assetId: payment.assetId, bucket: from, amount: -(payment.amount + payment.fee) },
  { account: to, assetId: payment.assetId, bucket: "AVAILABLE", amount: payment.amount },
  ...feePostings(payment.assetId, payment.fee)
]

/** CHAIN −amount, wallet +(amount − fee), FEES +fee; the fee is in [0, amount). */
const depositCredit = (deposit: CreditedDeposit, fee: bigint): ReadonlyArray<Posting> => {
  if (fee < 0n || fee >= deposit.amount) throw new RangeError(`deposit fee ${fee} must be in [0, ${deposit.amount})`)
  return [
    { account: { kind: "CHAIN" }, assetId: deposit.assetId, bucket: "AVAILABLE", amount: -deposit.amount },
    { account: wallet(deposit.walletId), assetId: deposit.assetId, bucket: "AVAILABLE", amount: deposit.amount - fee },
    ...feePostings(deposit.assetId, fee)
  ]
}

export const Postings = {
  /** An internal transfer settled at once (TRANSFER): the payer pays, the recipient gets the amount. */
  transfer: (payment: Payment, recipientWalletId: string): Entry => ({
    kind: "TRANSFER",
    postings: payout(payment, "AVAILABLE", wallet(recipientWalletId))
  }),
  /** An internal transfer waiting for the operator (TRANSFER_FREEZE). */
  transferFreeze: (payment: Payment): Entry => ({ kind: "TRANSFER_FREEZE", postings: freeze(payment) }),
  /** The operator approved it (TRANSFER_SETTLE): paid from frozen. */
  transferSettle: (payment: Payment, recipientWalletId: string): Entry => ({
    kind: "TRANSFER_SETTLE",
    postings: payout(payment, "FROZEN", wallet(recipientWalletId))
  }),
  /** The operator rejected it (TRANSFER_RELEASE): the freeze negated. */
  transferRelease: (payment: Payment): Entry => ({ kind: "TRANSFER_RELEASE", postings: negated(freeze(payment)) }),

  /** A withdrawal submitted (WITHDRAWAL_FREEZE), frozen until a terminal state (decisions.md). */
  withdrawalFreeze: (payment: Payment): Entry => ({ kind: "WITHDRAWAL_FREEZE", postings: freeze(payment) }),
  /** FAILED, REJECTED, CANCELLED (WITHDRAWAL_RELEASE): the freeze negated. */
  withdrawalRelease: (payment: Payment): Entry => ({ kind: "WITHDRAWAL_RELEASE", postings: negated(freeze(payment)) }),
  /** COMPLETED (WITHDRAWAL_SETTLE): frozen consumed, the amount left custody (CHAIN), the fee is the tenant's. */
  withdrawalSettle: (payment: Payment): Entry => ({
    kind: "WITHDRAWAL_SETTLE",
    postings: payout(payment, "FROZEN", { kind: "CHAIN" })
  }),
  /** The miner's fee the vault paid, in the native coin (NETWORK_FEE); none when it is 0. */
  networkFee: (assetId: string, fee: bigint): Entry | undefined =>
    fee > 0n
      ? {
        kind: "NETWORK_FEE",
        postings: [
          { account: { kind: "NETWORK_FEES" }, assetId, bucket: "AVAILABLE", amount: -fee },
          { account: { kind: "CHAIN" }, assetId, bucket: "AVAILABLE", amount: fee }
        ]
      }
      : undefined,

  /**
   * The network fee of a send that no withdrawal entry books (SEND_NETWORK_FEE: a sweep's, a GAS top-up's, a nonce
   * fill's), charged to the tenant whose vault paid it, the same postings as NETWORK_FEE; none when it is 0.
   */
  sendNetworkFee: (assetId: string, fee: bigint): Entry | undefined =>
    fee > 0n
      ? {
        kind: "SEND_NETWORK_FEE",
        postings: [
          { account: { kind: "NETWORK_FEES" }, assetId, bucket: "AVAILABLE", amount: -fee },
          { account: { kind: "CHAIN" }, assetId, bucket: "AVAILABLE", amount: fee }
        ]
      }
      : undefined,

  /** A deposit credited by the watcher (DEPOSIT_CREDIT), net of its fee. */
  depositCredit: (deposit: CreditedDeposit, fee: bigint): Entry => ({
    kind: "DEPOSIT_CREDIT",
    postings: depositCredit(deposit, fee)
  }),
  /** A credited deposit a reorganization removed (DEPOSIT_REVERSAL): the credit negated. */
  depositReversal: (deposit: CreditedDeposit, fee: bigint): Entry => ({
    kind: "DEPOSIT_REVERSAL",
    postings: negated(depositCredit(deposit, fee))
  }),
  /** A deposit held for review, credited by the operator (MANUAL_DEPOSIT_CREDIT): the same shape as a credit. */
  manualDepositCredit: (deposit: CreditedDeposit, fee: bigint): Entry => ({
    kind: "MANUAL_DEPOSIT_CREDIT",
    postings: depositCredit(deposit, fee)
  })
} as const
