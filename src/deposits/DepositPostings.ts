/**
 * The ledger shape of a deposit credit, in one place for the watcher (automatic crediting and reorg reversal) and
 * the operator's manual credit: the amount leaves the tenant's CHAIN account, the user's wallet gets it net of the
 * deposit fee, and the fee goes to the tenant's FEES account (docs/ledger.md).
 */
import type { Posting } from "../ledger/Ledger.ts"

export interface CreditedDeposit {
  readonly walletId: string
  readonly assetId: string
  readonly amount: bigint
}

export const depositCreditPostings = (deposit: CreditedDeposit, fee: bigint): ReadonlyArray<Posting> => {
  if (fee < 0n || fee >= deposit.amount) throw new RangeError(`deposit fee ${fee} must be in [0, ${deposit.amount})`)
  return [
    { account: { kind: "CHAIN" }, assetId: deposit.assetId, bucket: "AVAILABLE", amount: -deposit.amount },
    { account: { kind: "WALLET", walletId: deposit.walletId }, assetId: deposit.assetId, bucket: "AVAILABLE", amount: deposit.amount - fee },
    ...(fee > 0n ? [{ account: { kind: "FEES" }, assetId: deposit.assetId, bucket: "AVAILABLE", amount: fee } as const] : [])
  ]
}

/** Undoes a credit (a reorganization removed the deposit): the same postings, negated. */
export const depositReversalPostings = (deposit: CreditedDeposit, fee: bigint): ReadonlyArray<Posting> =>
  depositCreditPostings(deposit, fee).map((posting) => ({ ...posting, amount: -posting.amount }))
