/**
 * The payer's standing, checked again inside the transaction that moves its funds. The handlers check the user and
 * wallet status first (spec 4.4, the ordered checks), but an operator freeze (PATCH /ops/tenants/{id}/wallets/{id},
 * a user freeze) may commit between that read and the movement. Here the wallet and user rows are read `FOR SHARE`:
 * a freeze's UPDATE and a movement then serialize, so a movement either commits before the freeze or sees it and
 * fails with the same error the early check gives (operator-interface.md, "Switches": a `FROZEN` wallet cannot send).
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { decodeFirstRow, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { Forbidden, type LimitExceeded, NotFound, WalletNotActive } from "../domain/ApiError.ts"
import { userFrozenMessage } from "../users/UserRules.ts"
import { dailyLimitLockKey, exceedsDailyLimit, startOfUtcDay } from "./DailyLimit.ts"

export const payerNotActiveMessage = "the paying wallet is not active"

// Compiled once (db/RowSchemas.ts): the row decoded at this edge, a mismatch a defect naming the query.
const payerRow = decodeFirstRow(
  Schema.Struct({ wallet_status: Text, user_status: Text, spent: Nullable(Numeric) }),
  "PayerHold.holdPayerSpending"
)

/**
 * The first locks of every transaction that moves a payer's funds (an internal transfer, a withdrawal), in the lock
 * order of docs/ledger.md, in one call (`hold_payer`, sql/0020_payer_hold.sql): the daily limit's lock when the asset
 * has a limit (DailyLimit.ts), then, in a statement started only once the lock is held, the payer's standing
 * `FOR SHARE` and the day's sum. The limit is checked first, then the user, then the wallet.
 *
 * The transaction inserts the movement's own rows (transaction, event, idempotency receipt) before this: they lock
 * nothing another creator waits on, and done first they are not part of the time the lock is held, which is what
 * bounds one payer's movements per second. The movement's row is left out of the sum (`movementId`).
 */
export const holdPayerSpending = (request: {
  readonly tenantId: string
  readonly walletId: string
  readonly userId: string
  readonly assetId: string
  readonly amount: bigint
  readonly dailyLimit: bigint | undefined
  readonly nowMillis: number
  /** The movement this transaction inserted already. */
  readonly movementId: string
}): Effect.Effect<void, LimitExceeded | Forbidden | NotFound | WalletNotActive | SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const limit = request.dailyLimit
    const row = yield* sql`
      SELECT wallet_status, user_status, spent::text AS spent
      FROM hold_payer(${request.walletId}, ${limit === undefined ? null : dailyLimitLockKey(request)}, ${request.tenantId},
        ${request.userId}, ${request.assetId}, ${startOfUtcDay(request.nowMillis)}, ${request.movementId})`.pipe(
      Effect.flatMap(payerRow)
    )
    if (row === undefined) return yield* new NotFound({ message: "wallet not found" })
    if (limit !== undefined) yield* exceedsDailyLimit({ ...request, limit }, row.spent ?? 0n)
    if (row.user_status !== "ACTIVE") return yield* new Forbidden({ message: userFrozenMessage })
    if (row.wallet_status !== "ACTIVE") return yield* new WalletNotActive({ message: payerNotActiveMessage })
  })
