/**
 * The payer's standing, checked again inside the transaction that moves its funds. The handlers check the user and
 * wallet status first (spec 4.4, the ordered checks), but an operator freeze (PATCH /ops/tenants/{id}/wallets/{id},
 * a user freeze) may commit between that read and the movement. Here the wallet and user rows are read `FOR SHARE`:
 * a freeze's UPDATE and a movement then serialize, so a movement either commits before the freeze or sees it and
 * fails with the same error the early check gives (operator-interface.md, "Switches": a `FROZEN` wallet cannot send).
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { decodeFirstRow, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { Forbidden, type InsufficientBalance, type LimitExceeded, NotFound, WalletNotActive } from "../domain/ApiError.ts"
import { Ledger, type PostResult, type PreparedEntries } from "../ledger/Ledger.ts"
import { userFrozenMessage } from "../users/UserRules.ts"
import { dailyLimitLockKey, exceedsDailyLimit, startOfUtcDay } from "./DailyLimit.ts"

export const payerNotActiveMessage = "the paying wallet is not active"

const PayerRow = Schema.Struct({ wallet_status: Text, user_status: Text, spent: Nullable(Numeric) })
type PayerRow = typeof PayerRow.Type

// Compiled once (db/RowSchemas.ts): the row decoded at this edge, a mismatch a defect naming the query.
const heldRow = decodeFirstRow(PayerRow, "PayerHold.holdPayerAndPost")

/**
 * The first locks of every transaction that moves a payer's funds (an internal transfer, a withdrawal), in the lock
 * order of docs/ledger.md, in one call (`hold_payer`, sql/0020_payer_hold.sql): the daily limit's lock when the asset
 * has a limit (DailyLimit.ts), then, in a statement started only once the lock is held, the payer's standing
 * `FOR SHARE` and the day's sum. The limit is checked first, then the user, then the wallet.
 *
 * The transaction inserts the movement's own rows (transaction, event, idempotency receipt) and reads the entry's
 * accounts (`Ledger.prepare`) before this: they lock nothing another creator waits on, and done first they are not
 * part of the time the lock is held, which is what bounds one payer's movements per second. The movement's row is
 * left out of the sum (`movementId`).
 *
 * The hold and the movement's one ledger entry are one statement (`Ledger.postPreparedAfter`): the hold's locks
 * still come first, and the lock is then held for the commit's round trip only. The entry is written before the
 * hold's answer is looked at; a refusal fails the caller's transaction, which takes it back. Only an overdraft
 * reaches the caller before the hold's own refusals then: it fails the statement, so a payer short of funds who also
 * lost a race to the daily limit or to a freeze hears INSUFFICIENT_BALANCE.
 */
export const holdPayerAndPost = (
  request: HoldRequest,
  prepared: PreparedEntries
): Effect.Effect<PostResult, HoldRefusal | InsufficientBalance, SqlClient.SqlClient | Ledger> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* Ledger
    const { first, result } = yield* ledger.postPreparedAfter(prepared, holdStatement(sql, request))
    yield* refuseUnlessHeld(request, yield* heldRow(first === undefined ? [] : [first]))
    return result!
  })

export type HoldRefusal = LimitExceeded | Forbidden | NotFound | WalletNotActive

export interface HoldRequest {
  readonly tenantId: string
  readonly walletId: string
  readonly userId: string
  readonly assetId: string
  readonly amount: bigint
  readonly dailyLimit: bigint | undefined
  readonly nowMillis: number
  /** The movement this transaction inserted already. */
  readonly movementId: string
}

/** The hold as a query: the lock, then the payer's standing and the day's sum (sql/0020_payer_hold.sql). */
const holdStatement = (sql: SqlClient.SqlClient, request: HoldRequest) => {
  const limit = request.dailyLimit
  return sql`
    SELECT wallet_status, user_status, spent::text AS spent
    FROM hold_payer(${request.walletId}, ${limit === undefined ? null : dailyLimitLockKey(request)}, ${request.tenantId},
      ${request.userId}, ${request.assetId}, ${startOfUtcDay(request.nowMillis)}, ${request.movementId})`
}

/** The hold's answer, in the order of the checks: the limit first, then the user, then the wallet. */
const refuseUnlessHeld = (request: HoldRequest, row: PayerRow | undefined): Effect.Effect<void, HoldRefusal> =>
  Effect.gen(function*() {
    if (row === undefined) return yield* new NotFound({ message: "wallet not found" })
    const limit = request.dailyLimit
    if (limit !== undefined) yield* exceedsDailyLimit({ ...request, limit }, row.spent ?? 0n)
    if (row.user_status !== "ACTIVE") return yield* new Forbidden({ message: userFrozenMessage })
    if (row.wallet_status !== "ACTIVE") return yield* new WalletNotActive({ message: payerNotActiveMessage })
  })
