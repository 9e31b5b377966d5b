/**
 * The payer's standing, checked again inside the transaction that moves its funds. The handlers check the user and
 * wallet status first (spec 4.4, the ordered checks), but an operator freeze (PATCH /ops/tenants/{id}/wallets/{id},
 * a user freeze) may commit between that read and the movement. Here the wallet and user rows are read `FOR SHARE`:
 * a freeze's UPDATE and a movement then serialize, so a movement either commits before the freeze or sees it and
 * fails with the same error the early check gives (operator-interface.md, "Switches": a `FROZEN` wallet cannot send).
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { decodeFirstRow, Text } from "../db/RowSchemas.ts"
import { Forbidden, type LimitExceeded, NotFound, WalletNotActive } from "../domain/ApiError.ts"
import { userFrozenMessage } from "../users/UserRules.ts"
import { holdDailyLimit } from "./DailyLimit.ts"

export const payerNotActiveMessage = "the paying wallet is not active"

// Compiled once (db/RowSchemas.ts): the row decoded at this edge, a mismatch a defect naming the query.
const payerRow = decodeFirstRow(Schema.Struct({ wallet_status: Text, user_status: Text }), "PayerHold.holdPayer")

/** Call inside the moving transaction, after the daily limit's hold (lock order, docs/ledger.md). */
export const holdPayer = (
  walletId: string
): Effect.Effect<void, Forbidden | NotFound | WalletNotActive | SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const row = yield* sql`
      SELECT w.status AS wallet_status, u.status AS user_status
      FROM wallets w JOIN users u ON u.id = w.user_id
      WHERE w.id = ${walletId}
      FOR SHARE OF w, u`.pipe(Effect.flatMap(payerRow))
    if (row === undefined) return yield* new NotFound({ message: "wallet not found" })
    if (row.user_status !== "ACTIVE") return yield* new Forbidden({ message: userFrozenMessage })
    if (row.wallet_status !== "ACTIVE") return yield* new WalletNotActive({ message: payerNotActiveMessage })
  })

/**
 * The first steps of every transaction that moves a payer's funds (an internal transfer, a withdrawal), in the lock
 * order of docs/ledger.md: the daily limit, checked and taken atomically when the asset has one, then the payer's
 * standing.
 */
export const holdPayerSpending = (request: {
  readonly tenantId: string
  readonly walletId: string
  readonly userId: string
  readonly assetId: string
  readonly amount: bigint
  readonly dailyLimit: bigint | undefined
  readonly nowMillis: number
}): Effect.Effect<void, LimitExceeded | Forbidden | NotFound | WalletNotActive | SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    if (request.dailyLimit !== undefined) {
      yield* holdDailyLimit({
        tenantId: request.tenantId,
        userId: request.userId,
        assetId: request.assetId,
        amount: request.amount,
        limit: request.dailyLimit,
        nowMillis: request.nowMillis
      })
    }
    yield* holdPayer(request.walletId)
  })
