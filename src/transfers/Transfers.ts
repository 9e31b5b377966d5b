/**
 * Over 300 lines: the spec's ordered checks of a submission (below) are one sequence and read best in one place.
 *
 * `POST /v1/transactions` (spec 4.4) for recipients inside the tenant: internal transfers, settled in the ledger
 * (decisions.md "Internal transfer"). Created COMPLETED in one database transaction (payer debited amount + fee,
 * recipient credited the amount, the fee to the tenant), or PENDING_AUTHORIZATION with amount + fee frozen when the
 * tenant's `transferApprovalAbove` is exceeded; the operator then approves (COMPLETED) or rejects (REJECTED /
 * REJECTED_BY_OPERATOR, unfrozen). Recipients outside the tenant settle on chain: an on-chain withdrawal is created
 * SUBMITTED with amount + fee frozen (withdrawals/Withdrawals.ts) and carried on by its entity; a destination on the
 * tenant's blocked list is not an HTTP error there but ends REJECTED / BLOCKED_BY_POLICY (spec section 3).
 *
 * Order of checks after the request's shape: payer wallet (404), payer user frozen or closed (403), cooldown and
 * two-step verification, payer wallet ACTIVE, recipient (404 / RECIPIENT_NOT_FOUND / SAME_USER_USE_WALLET_TRANSFER /
 * RECIPIENT_NO_WALLET / ASSET_MISMATCH / WALLET_NOT_ACTIVE), then the quote's checks (asset, family, network, address,
 * platform address, same wallet, limits; TransferQuotes.ts), the tenant's blocked addresses, the balance. The daily
 * limit is checked again, binding, inside the creating statement (DailyLimit.ts, Movements.ts), so parallel
 * requests never overshoot it together.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { decodeFirstRow, decodeRows, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import {
  AssetMismatch,
  BlockedByPolicy,
  Forbidden,
  InsufficientBalance,
  InvalidState,
  NotFound,
  RecipientNoWallet,
  RecipientNotFound,
  SameUserUseWalletTransfer,
  WalletNotActive
} from "../domain/ApiError.ts"
import { Ids, uuidPattern } from "../domain/Ids.ts"
import type { StoreInStatement } from "../idempotency/Idempotency.ts"
import { Ledger } from "../ledger/Ledger.ts"
import { entryRequest, Postings } from "../ledger/Postings.ts"
import { isBlockedAddress } from "../tenants/BlockedAddresses.ts"
import type { Tenant } from "../tenants/Tenants.ts"
import { type NewTransaction, transactionAsInserted } from "../transactions/NewTransaction.ts"
import type { Transaction } from "../transactions/Transaction.ts"
import { TransactionEvents } from "../transactions/TransactionEvents.ts"
import { TransactionRepository } from "../transactions/TransactionRepository.ts"
import { TwoFactor, type TwoFactorError } from "../users/TwoFactor.ts"
import { userFrozenMessage } from "../users/UserRules.ts"
import { type Wallet, WalletRepository, WalletStatus } from "../wallets/WalletRepository.ts"
import { type OnChainReceipt, Withdrawals } from "../withdrawals/Withdrawals.ts"
import { Movements, payerNotActiveMessage } from "./Movements.ts"
import { makePayerRead, type PrefetchedRecipient } from "./PayerRead.ts"
import { type QuoteError, TransferQuotes } from "./TransferQuotes.ts"

export type Destination =
  | { readonly type: "WALLET"; readonly id: string }
  | { readonly type: "END_USER"; readonly uid?: string | undefined; readonly customerRefId?: string | undefined }
  | { readonly type: "ONE_TIME_ADDRESS"; readonly address: string }

export interface TransferRequest {
  readonly assetId: string
  readonly sourceWalletId: string
  readonly destination: Destination
  readonly amount: bigint
  readonly externalTxId: string | undefined
  readonly note: string | undefined
  readonly twoFactorCode: string | undefined
  /**
   * Stores the receipt the call returns in the statement that creates the transaction: the idempotency record is
   * settled there (Idempotency.ts `StoreInStatement`), so the effect never commits without it.
   */
  readonly recordReceipt?: StoreInStatement<InternalTransferReceipt | OnChainReceipt> | undefined
  /**
   * Takes the idempotency key's claim when it was left to the statement (Idempotency.ts `Commit.claim`): called
   * before any write but the transfer's statement (a two-step code's check, a withdrawal's submission).
   */
  readonly claimKey?: Effect.Effect<void> | undefined
}

/** Spec section 2, "Internal transfer receipt". */
export interface InternalTransferReceipt {
  readonly settlement: "OFF_CHAIN"
  readonly transferId: string
  readonly transactionId: string
  readonly status: "COMPLETED" | "PENDING_AUTHORIZATION"
  readonly fromWalletId: string
  readonly toWalletId: string
  readonly assetId: string
  readonly amount: string
  readonly fee: string
}

export type SubmitError =
  | QuoteError
  | TwoFactorError
  | NotFound
  | Forbidden
  | WalletNotActive
  | RecipientNotFound
  | RecipientNoWallet
  | SameUserUseWalletTransfer
  | AssetMismatch
  | BlockedByPolicy
  | InsufficientBalance

/**
 * Wallets that can take an internal transfer from `payer`: ACTIVE ones; HIDDEN ones only from their owner's other
 * wallets (spec 2, "still receives transfers from the owner's other wallets"); FROZEN, CLOSED, PROVISIONING none.
 */
const canReceive = (wallet: Pick<Wallet, "status" | "userId">, payer: Pick<Wallet, "userId">) =>
  wallet.status === "ACTIVE" || (wallet.status === "HIDDEN" && wallet.userId === payer.userId)

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const recipientUserRow = decodeFirstRow(Schema.Struct({ id: Text, status: Text }), "Transfers.recipientWallet (user)")
const defaultWalletRow = decodeFirstRow(Schema.Struct({ id: Text }), "Transfers.recipientWallet (default wallet)")
const decidedWalletRows = decodeRows(
  Schema.Struct({ id: Text, status: Schema.Literals(WalletStatus), user_id: Text }),
  "Transfers.decide (wallets)"
)
const heldTransferRow = decodeFirstRow(
  Schema.Struct({
    kind: Text,
    status: Text,
    asset_id: Text,
    amount: Numeric,
    // Null on a deposit (no source wallet, no fee before crediting): any transaction id of the tenant can arrive
    // here, and only an internal transfer's row is read past its kind.
    fee: Nullable(Numeric),
    source_wallet_id: Nullable(Text),
    destination_wallet_id: Nullable(Text)
  }),
  "Transfers.decide"
)

export class Transfers extends Context.Service<Transfers, {
  readonly submit: (
    tenant: Tenant,
    request: TransferRequest
  ) => Effect.Effect<InternalTransferReceipt | OnChainReceipt, SubmitError>
  /** The operator's decision on a PENDING_AUTHORIZATION transfer. */
  readonly decide: (
    tenantId: string,
    transactionId: string,
    decision: "APPROVE" | "REJECT"
  ) => Effect.Effect<Transaction, NotFound | InvalidState | WalletNotActive>
}>()("coffer/Transfers") {
  static readonly layer = Layer.effect(
    Transfers,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const wallets = yield* WalletRepository
      const quotes = yield* TransferQuotes
      const twoFactor = yield* TwoFactor
      const ledger = yield* Ledger
      const movements = yield* Movements
      const transactions = yield* TransactionRepository
      const catalog = yield* Catalog
      const ids = yield* Ids
      const transactionEvents = yield* TransactionEvents
      const withdrawals = yield* Withdrawals
      const payerOf = yield* makePayerRead

      /**
       * The recipient wallet a WALLET or END_USER destination names (ONE_TIME_ADDRESS goes through the quote), read
       * with its address on `networkKey` when one is given: what the quote routes and the blocked list matches.
       */
      const recipientWallet = (
        tenant: Tenant,
        payer: Wallet,
        destination: Destination,
        networkKey: string | undefined,
        prefetched: PrefetchedRecipient | undefined
      ) =>
        Effect.gen(function*() {
          const withAddress = (walletId: string) =>
            networkKey === undefined
              ? Effect.map(wallets.find(tenant.id, walletId), (wallet) => wallet === undefined ? undefined : { wallet, address: undefined })
              : wallets.findWithAddressOn(tenant.id, walletId, networkKey)
          if (destination.type === "WALLET") {
            // Read with the payer (transfers/PayerRead.ts, with a recipient) on the asset's network; its address only when the quote
            // uses that network, as `withAddress` reads it.
            if (prefetched !== undefined) {
              if (prefetched.wallet === undefined) return yield* new NotFound({ message: "recipient wallet not found" })
              return { wallet: prefetched.wallet, address: networkKey === undefined ? undefined : prefetched.address }
            }
            // An id that is not a UUID names no wallet.
            const found = uuidPattern.test(destination.id) ? yield* withAddress(destination.id) : undefined
            if (found === undefined) return yield* new NotFound({ message: "recipient wallet not found" })
            return found
          }
          if (destination.type !== "END_USER") return undefined
          const user = yield* sql`
            SELECT id, status FROM users WHERE tenant_id = ${tenant.id} AND ${
            destination.uid !== undefined ? sql`uid = ${destination.uid}` : sql`customer_ref_id = ${destination.customerRefId ?? ""}`
          }`.pipe(Effect.orDie, Effect.flatMap(recipientUserRow))
          if (user === undefined || user.status !== "ACTIVE") {
            return yield* new RecipientNotFound({ message: "recipient not found" })
          }
          if (user.id === payer.userId) {
            return yield* new SameUserUseWalletTransfer({ message: "to move funds between your own wallets use a WALLET destination" })
          }
          const defaultWallet = yield* sql`
            SELECT id FROM wallets WHERE user_id = ${user.id} AND chain_family = ${payer.chainFamily} AND is_default`
            .pipe(Effect.orDie, Effect.flatMap(defaultWalletRow))
          if (defaultWallet === undefined) {
            return yield* new RecipientNoWallet({ message: `recipient has no default ${payer.chainFamily} wallet` })
          }
          return (yield* withAddress(defaultWallet.id))!
        })

      const submit = Effect.fn("Transfers.submit")(function*(tenant: Tenant, request: TransferRequest) {
        const readAt = yield* Clock.currentTimeMillis
        const requested = catalog.asset(request.assetId)
        const destination = request.destination
        // What the checks below read about the destination is read with the payer; they still take it in the spec's
        // order.
        const found = !uuidPattern.test(request.sourceWalletId)
          ? undefined
          : yield* payerOf(tenant.id, request.sourceWalletId, request.assetId, readAt, destination, requested)
        if (found === undefined) return yield* new NotFound({ message: "wallet not found" })
        const { user, wallet: payer } = found
        if (user.user_status !== "ACTIVE") return yield* new Forbidden({ message: userFrozenMessage })
        const requires2fa = tenant.settings.apiRequireUser2fa === true
        // A required code's check is recorded (TwoFactor.ts): under the key's claim, so a replay never spends one.
        if (requires2fa && request.claimKey !== undefined) yield* request.claimKey
        yield* twoFactor.verify(payer.userId, requires2fa, request.twoFactorCode, user)
        if (payer.status !== "ACTIVE") return yield* new WalletNotActive({ message: "the paying wallet is not active" })

        // An unknown asset, one of another family, or the payer's own wallet is the quote's to refuse with its code.
        const usable = requested !== undefined && catalog.network(requested.networkKey)?.chainFamily === payer.chainFamily
        const named = yield* recipientWallet(
          tenant,
          payer,
          destination,
          usable ? requested.networkKey : undefined,
          found.recipient
        )
        let destinationAddress: string
        let knownRecipient: { wallet: Wallet; networkKey: string; address: string } | undefined
        if (named === undefined) {
          destinationAddress = (request.destination as { address: string }).address
        } else {
          const { wallet, address } = named
          if (wallet.chainFamily !== payer.chainFamily) {
            return yield* new AssetMismatch({ message: "payer and recipient wallets are of different chain families" })
          }
          if (wallet.id !== payer.id && (!canReceive(wallet, payer) || (usable && address === undefined))) {
            return yield* new WalletNotActive({ message: "the recipient wallet cannot receive" })
          }
          destinationAddress = address ?? wallet.address ?? ""
          if (address !== undefined) knownRecipient = { wallet, networkKey: requested!.networkKey, address }
        }

        const quote = yield* quotes.quote(tenant, {
          assetId: request.assetId,
          sourceWalletId: payer.id,
          amount: request.amount,
          destination: destinationAddress,
          known: { source: payer, recipient: knownRecipient, spentToday: user.spent_today, byAddress: found.byAddress }
        })
        const recipient = quote.recipient
        if (recipient === undefined) {
          // A withdrawal writes more than one statement: it runs under the key's claim, taken first.
          if (request.claimKey !== undefined) yield* request.claimKey
          return yield* withdrawals.submit({
            tenant,
            payer,
            asset: quote.asset,
            amount: quote.amount,
            fee: quote.fee,
            destination: quote.destination,
            externalTxId: request.externalTxId,
            note: request.note,
            recordReceipt: request.recordReceipt,
            dailyLimit: quote.dailyLimit
          })
        }
        if (!canReceive(recipient, payer)) return yield* new WalletNotActive({ message: "the recipient wallet cannot receive" })
        const network = catalog.network(quote.asset.networkKey)!
        if (isBlockedAddress(tenant.settings.blockedAddresses, network, quote.destination)) {
          return yield* new BlockedByPolicy({ message: "the recipient address is blocked by the tenant's policy" })
        }

        const asset = quote.asset
        const amount = quote.amount
        const fee = quote.fee
        const threshold = tenant.settings.transferApprovalAbove?.[asset.assetId]
        const pending = threshold !== undefined && amount > threshold
        const payment = { walletId: payer.id, assetId: asset.assetId, amount, fee }
        const entry = pending ? Postings.transferFreeze(payment) : Postings.transfer(payment, recipient.id)
        const id = yield* ids.uuidV7For("transaction")
        const now = new Date(yield* Clock.currentTimeMillis)
        const status = pending ? "PENDING_AUTHORIZATION" as const : "COMPLETED" as const
        const receipt: InternalTransferReceipt = {
          settlement: "OFF_CHAIN",
          transferId: id,
          transactionId: id,
          status,
          fromWalletId: payer.id,
          toWalletId: recipient.id,
          assetId: asset.assetId,
          amount: amount.toString(),
          fee: fee.toString()
        }
        const record: NewTransaction = {
          id,
          tenantId: tenant.id,
          kind: "INTERNAL_TRANSFER",
          settlement: "OFF_CHAIN",
          status,
          assetId: asset.assetId,
          networkKey: asset.networkKey,
          amount,
          fee,
          source: { walletId: payer.id, address: payer.address, userId: payer.userId },
          destination: { walletId: recipient.id, address: quote.destination, userId: recipient.userId },
          externalTxId: request.externalTxId,
          note: request.note,
          at: now
        }
        // One statement (Movements.ts): the transfer's rows, the payer's hold, the entry. Its event is built from
        // what the statement writes, the receipt is what the call answers; both as data, so the transfer shares the
        // statement of fixed text with the others of its batch.
        const event = yield* transactionEvents.createdRow(
          transactionAsInserted(record, { source: payer, destination: recipient })
        )
        yield* movements.create({
          transaction: record,
          rows: [],
          events: [event],
          entry: yield* ledger.prepare(entryRequest(tenant.id, id, entry)),
          dailyLimit: quote.dailyLimit,
          receipt: request.recordReceipt === undefined ? undefined : { answer: receipt, store: request.recordReceipt }
        })
        yield* transactionEvents.committed
        return receipt
      })

      const decide = Effect.fn("Transfers.decide")(function*(
        tenantId: string,
        transactionId: string,
        decision: "APPROVE" | "REJECT"
      ) {
        yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* sql`
            SELECT kind, status, asset_id, amount::text AS amount, fee::text AS fee, source_wallet_id, destination_wallet_id
            FROM transactions WHERE tenant_id = ${tenantId} AND id = ${transactionId} FOR UPDATE`.pipe(
            Effect.flatMap(heldTransferRow)
          )
          if (row === undefined) return yield* new NotFound({ message: "transaction not found" })
          if (row.kind !== "INTERNAL_TRANSFER" || row.status !== "PENDING_AUTHORIZATION") {
            return yield* new InvalidState({ message: "transaction is not waiting for approval" })
          }
          const { destination_wallet_id: destinationWalletId, fee, source_wallet_id: sourceWalletId } = row
          if (sourceWalletId === null || destinationWalletId === null || fee === null) {
            return yield* Effect.die(new Error(`internal transfer ${transactionId} lacks its wallets or fee`))
          }
          if (decision === "APPROVE") {
            // The wallets as they are now, not as they were at submission: an operator's freeze since then holds
            // (operator-interface.md, "Switches": a FROZEN wallet cannot send). FOR SHARE orders this with a
            // freeze, which takes the wallet's row FOR UPDATE (WalletSwitch.ts).
            const wallets = yield* sql`
              SELECT id, status, user_id FROM wallets WHERE id IN (${sourceWalletId}, ${destinationWalletId})
              FOR SHARE`.pipe(Effect.flatMap(decidedWalletRows))
            const payer = wallets.find((wallet) => wallet.id === sourceWalletId)
            const recipient = wallets.find((wallet) => wallet.id === destinationWalletId)
            if (payer?.status !== "ACTIVE") return yield* new WalletNotActive({ message: payerNotActiveMessage })
            const receives = recipient !== undefined &&
              canReceive({ status: recipient.status, userId: recipient.user_id }, { userId: payer.user_id })
            if (!receives) return yield* new WalletNotActive({ message: "the recipient wallet cannot receive" })
          }
          const payment = { walletId: sourceWalletId, assetId: row.asset_id, amount: row.amount, fee }
          const entry = decision === "APPROVE"
            ? Postings.transferSettle(payment, destinationWalletId)
            : Postings.transferRelease(payment)
          yield* ledger.post(entryRequest(tenantId, transactionId, entry)).pipe(Effect.orDie)
          const [status, subStatus] = decision === "APPROVE"
            ? ["COMPLETED", null] as const
            : ["REJECTED", "REJECTED_BY_OPERATOR"] as const
          yield* sql`UPDATE transactions SET status = ${status}, sub_status = ${subStatus},
            updated_at = ${new Date(yield* Clock.currentTimeMillis)} WHERE id = ${transactionId}`
          yield* transactionEvents.statusUpdated(tenantId, transactionId, status, subStatus)
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return (yield* transactions.find(tenantId, transactionId))!
      })

      return Transfers.of({ submit, decide })
    })
  )
}
