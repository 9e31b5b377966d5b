/**
 * What the journal must hold for one transaction, restated from docs/ledger.md, docs/transfers.md and
 * docs/deposits.md rather than imported from the code that builds the postings (ledger/Postings.ts): the audit is a
 * second, independent statement of the rules, so a bug in a writer shows as a difference instead of being copied
 * into the check.
 *
 * | Transaction | Status | Entries |
 * |---|---|---|
 * | deposit | CONFIRMING, FAILED, COMPLETED with a sub-status (not credited) | none |
 * | deposit | COMPLETED without sub-status (credited) | one credit: DEPOSIT_CREDIT, or MANUAL_DEPOSIT_CREDIT (operator) |
 * | deposit | REVERSED | the credit and DEPOSIT_REVERSAL (the credit negated) |
 * | withdrawal | SUBMITTED, PENDING_AUTHORIZATION, QUEUED, PENDING_SIGNATURE, CONFIRMING | WITHDRAWAL_FREEZE |
 * | withdrawal | FAILED, REJECTED, CANCELLED | WITHDRAWAL_FREEZE and WITHDRAWAL_RELEASE (the freeze negated) |
 * | withdrawal | COMPLETED | WITHDRAWAL_FREEZE, WITHDRAWAL_SETTLE, and NETWORK_FEE when its network fee is above 0 |
 * | internal transfer | PENDING_AUTHORIZATION | TRANSFER_FREEZE |
 * | internal transfer | REJECTED | TRANSFER_FREEZE and TRANSFER_RELEASE (the freeze negated) |
 * | internal transfer | COMPLETED | TRANSFER, or TRANSFER_FREEZE and TRANSFER_SETTLE (it waited for approval) |
 *
 * | send (outgoing_sends) of a sweep or top-up, final with a fee above 0 (CONFIRMED, REVERTED, REJECTED after a fill) | SEND_NETWORK_FEE of fee + account cost, referencing the send |
 * | send of a withdrawal, REJECTED and its nonce's fill included with a fee above 0 | SEND_NETWORK_FEE of fee + account cost |
 * | send of a withdrawal, CONFIRMED or REVERTED | the withdrawal's NETWORK_FEE of the same fee; SEND_NETWORK_FEE of its account cost (SOL rent) when above 0 |
 *
 * Posting shapes (docs/ledger.md): a credit is CHAIN −amount, WALLET +(amount − fee), FEES +fee; a freeze moves
 * amount + fee from the payer's available to its frozen; a withdrawal settles frozen −(amount + fee), CHAIN +amount,
 * FEES +fee; a network fee (NETWORK_FEE, SEND_NETWORK_FEE) is NETWORK_FEES −fee, CHAIN +fee in the native coin; a transfer (or its settlement) pays
 * the recipient the amount and FEES the fee. A FEES posting of 0 is never written.
 */
import type { AccountKind, Bucket, EntryKind } from "./Ledger.ts"

/** The columns of a `transactions` row that decide its bookings. */
export interface BookedTransaction {
  readonly id: string
  readonly kind: string
  readonly status: string
  readonly subStatus: string | null
  readonly assetId: string
  readonly amount: bigint
  /** Deposits: null until credited. Withdrawals and transfers: charged on top of the amount. */
  readonly fee: bigint | null
  readonly networkFee: bigint | null
  readonly networkFeeAssetId: string | null
  readonly sourceWalletId: string | null
  readonly destinationWalletId: string | null
}

export interface ExpectedPosting {
  readonly accountKind: AccountKind
  /** Only for WALLET accounts. */
  readonly walletId: string | null
  readonly assetId: string
  readonly bucket: Bucket
  readonly amount: bigint
}

export type Expectation =
  | { readonly _tag: "Entries"; readonly entries: ReadonlyMap<EntryKind, ReadonlyArray<ExpectedPosting>> }
  /** A kind and status the documents give no bookings for: itself a discrepancy. */
  | { readonly _tag: "NoRule"; readonly reason: string }

const posting = (
  accountKind: AccountKind,
  walletId: string | null,
  assetId: string,
  bucket: Bucket,
  amount: bigint
): ExpectedPosting => ({ accountKind, walletId, assetId, bucket, amount })

const negated = (postings: ReadonlyArray<ExpectedPosting>) =>
  postings.map((entry) => ({ ...entry, amount: -entry.amount }))

/** The tenant's FEES posting, absent when the fee is 0 (postings are never zero). */
const feePosting = (assetId: string, fee: bigint): ReadonlyArray<ExpectedPosting> =>
  fee === 0n ? [] : [posting("FEES", null, assetId, "AVAILABLE", fee)]

const openWithdrawal = new Set(["SUBMITTED", "PENDING_AUTHORIZATION", "QUEUED", "PENDING_SIGNATURE", "CONFIRMING"])
const releasedWithdrawal = new Set(["FAILED", "REJECTED", "CANCELLED"])
const uncreditedDeposit = new Set(["CONFIRMING", "FAILED"])

const entries = (...list: ReadonlyArray<readonly [EntryKind, ReadonlyArray<ExpectedPosting>]>): Expectation => ({
  _tag: "Entries",
  entries: new Map(list)
})

const noRule = (transaction: BookedTransaction): Expectation => ({
  _tag: "NoRule",
  reason: `no bookings are defined for a ${transaction.kind} in status ${transaction.status}` +
    (transaction.subStatus === null ? "" : `/${transaction.subStatus}`)
})

const deposit = (transaction: BookedTransaction, booked: ReadonlySet<EntryKind>): Expectation => {
  if (uncreditedDeposit.has(transaction.status)) return entries()
  if (transaction.status === "COMPLETED" && transaction.subStatus !== null) return entries()
  if (transaction.status !== "COMPLETED" && transaction.status !== "REVERSED") return noRule(transaction)
  if (transaction.destinationWalletId === null) return noRule(transaction)
  const fee = transaction.fee ?? 0n
  const credit = [
    posting("CHAIN", null, transaction.assetId, "AVAILABLE", -transaction.amount),
    posting("WALLET", transaction.destinationWalletId, transaction.assetId, "AVAILABLE", transaction.amount - fee),
    ...feePosting(transaction.assetId, fee)
  ]
  // Which door credited it is known only from the journal: the operator's when that is the only credit booked. Both
  // booked is a double credit: the manual one is then reported as unexpected.
  const creditKind: EntryKind = booked.has("MANUAL_DEPOSIT_CREDIT") && !booked.has("DEPOSIT_CREDIT")
    ? "MANUAL_DEPOSIT_CREDIT"
    : "DEPOSIT_CREDIT"
  return transaction.status === "REVERSED"
    ? entries([creditKind, credit], ["DEPOSIT_REVERSAL", negated(credit)])
    : entries([creditKind, credit])
}

const withdrawal = (transaction: BookedTransaction): Expectation => {
  if (transaction.sourceWalletId === null || transaction.fee === null) return noRule(transaction)
  const { amount, assetId, fee } = transaction
  const payer = transaction.sourceWalletId
  const freeze = [
    posting("WALLET", payer, assetId, "AVAILABLE", -(amount + fee)),
    posting("WALLET", payer, assetId, "FROZEN", amount + fee)
  ]
  if (openWithdrawal.has(transaction.status)) return entries(["WITHDRAWAL_FREEZE", freeze])
  const networkFee = transaction.networkFee ?? 0n
  const networkFeeEntry: ReadonlyArray<[EntryKind, ReadonlyArray<ExpectedPosting>]> =
    networkFee === 0n || transaction.networkFeeAssetId === null ? [] : [["NETWORK_FEE", [
      posting("NETWORK_FEES", null, transaction.networkFeeAssetId, "AVAILABLE", -networkFee),
      posting("CHAIN", null, transaction.networkFeeAssetId, "AVAILABLE", networkFee)
    ]]]
  if (releasedWithdrawal.has(transaction.status)) {
    // A withdrawal reverted on chain released its funds and burned a fee (decisions.md); the others burned none.
    return entries(["WITHDRAWAL_FREEZE", freeze], ["WITHDRAWAL_RELEASE", negated(freeze)], ...networkFeeEntry)
  }
  if (transaction.status !== "COMPLETED") return noRule(transaction)
  const settle = [
    posting("WALLET", payer, assetId, "FROZEN", -(amount + fee)),
    posting("CHAIN", null, assetId, "AVAILABLE", amount),
    ...feePosting(assetId, fee)
  ]
  return entries(["WITHDRAWAL_FREEZE", freeze], ["WITHDRAWAL_SETTLE", settle], ...networkFeeEntry)
}

const internalTransfer = (transaction: BookedTransaction, booked: ReadonlySet<EntryKind>): Expectation => {
  const payer = transaction.sourceWalletId
  const recipient = transaction.destinationWalletId
  if (payer === null || recipient === null || transaction.fee === null) return noRule(transaction)
  const { amount, assetId, fee } = transaction
  const freeze = [
    posting("WALLET", payer, assetId, "AVAILABLE", -(amount + fee)),
    posting("WALLET", payer, assetId, "FROZEN", amount + fee)
  ]
  const paid = [posting("WALLET", recipient, assetId, "AVAILABLE", amount), ...feePosting(assetId, fee)]
  switch (transaction.status) {
    case "PENDING_AUTHORIZATION":
      return entries(["TRANSFER_FREEZE", freeze])
    case "REJECTED":
      return entries(["TRANSFER_FREEZE", freeze], ["TRANSFER_RELEASE", negated(freeze)])
    case "COMPLETED":
      // Whether it waited for approval is known only from the journal: a freeze booked means it did.
      return booked.has("TRANSFER_FREEZE")
        ? entries(["TRANSFER_FREEZE", freeze], ["TRANSFER_SETTLE", [
          posting("WALLET", payer, assetId, "FROZEN", -(amount + fee)),
          ...paid
        ]])
        : entries(["TRANSFER", [posting("WALLET", payer, assetId, "AVAILABLE", -(amount + fee)), ...paid]])
    default:
      return noRule(transaction)
  }
}

/** The entries `transaction` must have, by kind; `booked` is the set of entry kinds the journal holds for it. */
export const expectedEntries = (transaction: BookedTransaction, booked: ReadonlySet<EntryKind>): Expectation => {
  switch (transaction.kind) {
    case "DEPOSIT":
      return deposit(transaction, booked)
    case "WITHDRAWAL":
      return withdrawal(transaction)
    case "INTERNAL_TRANSFER":
      return internalTransfer(transaction, booked)
    default:
      return noRule(transaction)
  }
}

/** One posting as a line a person reads and a set compares: `WALLET:<id> ETH_SEPOLIA_ETH FROZEN -5`. */
export const describePosting = (entry: ExpectedPosting): string =>
  `${entry.accountKind}${entry.walletId === null ? "" : `:${entry.walletId}`} ${entry.assetId} ${entry.bucket} ${entry.amount}`

/** The columns of an `outgoing_sends` row that decide the booking of its network fee. */
export interface BookedSend {
  readonly id: string
  readonly purpose: string
  readonly state: string
  /** What its inclusion cost (null until final, or never included). */
  readonly networkFee: bigint | null
  /** What it paid into accounts it created (SOL rent), beside the fee; null when not recorded. */
  readonly accountCost: bigint | null
  readonly nativeAssetId: string
}

/**
 * The SEND_NETWORK_FEE postings a send must have (docs/ledger.md "Costs paid on chain"): every inclusion paid its
 * fee from one of our addresses, and what no withdrawal entry books is booked on the send. A withdrawal's payload
 * that was included (CONFIRMED, REVERTED) is booked by the withdrawal (NETWORK_FEE): none here. Empty when nothing
 * was paid.
 */
export const expectedSendFee = (send: BookedSend): ReadonlyArray<ExpectedPosting> => {
  const bookedByWithdrawal = send.purpose === "WITHDRAWAL" && (send.state === "CONFIRMED" || send.state === "REVERTED")
  // Rent of the accounts it created is never a withdrawal's networkFeeRaw: always here.
  const fee = (bookedByWithdrawal ? 0n : send.networkFee ?? 0n) + (send.accountCost ?? 0n)
  if (fee === 0n) return []
  return [
    posting("NETWORK_FEES", null, send.nativeAssetId, "AVAILABLE", -fee),
    posting("CHAIN", null, send.nativeAssetId, "AVAILABLE", fee)
  ]
}
