/**
 * The transaction object as the wire shows it (spec section 2). It lives beside the transaction model, below http/,
 * because events (TransactionEvents, the outbox) carry the same object the API answers with.
 */
import type { TransactionObject } from "../api/TransactionsApi.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { toRfc3339 } from "../domain/Time.ts"
import type { Transaction } from "./Transaction.ts"

const rawOrNull = (value: bigint | null): string | null => (value === null ? null : value.toString())

export const transactionObject = (catalog: Catalog["Service"], transaction: Transaction): TransactionObject => ({
  id: transaction.id,
  kind: transaction.kind,
  settlement: transaction.settlement,
  status: transaction.status,
  subStatus: transaction.subStatus,
  assetId: transaction.assetId,
  networkKey: transaction.networkKey,
  decimals: catalog.asset(transaction.assetId)?.decimals ?? 0,
  amountRaw: transaction.amount.toString(),
  feeRaw: rawOrNull(transaction.fee),
  // Deposits only, once crediting has decided the fee (spec section 2).
  netAmountRaw: transaction.kind === "DEPOSIT" && transaction.fee !== null
    ? (transaction.amount - transaction.fee).toString()
    : null,
  networkFeeRaw: rawOrNull(transaction.networkFee),
  networkFeeAssetId: transaction.networkFeeAssetId,
  source: transaction.source,
  // An on-chain withdrawal's destination is only its address (spec section 2).
  destination: transaction.kind === "WITHDRAWAL"
    ? { walletId: null, address: transaction.destination.address, customerRefId: null, uid: null }
    : transaction.destination,
  txHash: transaction.txHash,
  externalTxId: transaction.externalTxId,
  note: transaction.note,
  createdAt: toRfc3339(transaction.createdAt),
  updatedAt: toRfc3339(transaction.updatedAt)
})
