/**
 * The operator's wallet switch (operator-interface.md, "Switches"): `ACTIVE`, `HIDDEN` or `FROZEN`. A wallet's
 * status is read from the database wherever it matters (sending, receiving, deposit settlement), so the change
 * holds in every process once it commits. What each status implies is documented in docs/operations.md.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { ReadPart } from "../db/ReadPart.ts"
import { decodeFirstRow, decodeRow, Nullable } from "../db/RowSchemas.ts"
import { InvalidState, NotFound } from "../domain/ApiError.ts"
import { type Wallet, WalletRepository, WalletStatus } from "./WalletRepository.ts"

/** The statuses an operator may set; `PROVISIONING` and `CLOSED` are not switches (spec: they cannot be set). */
export const switchableWalletStatuses = ["ACTIVE", "HIDDEN", "FROZEN"] as const
export type SwitchableWalletStatus = (typeof switchableWalletStatuses)[number]

const walletSendsRow = decodeRow(Schema.Struct({ wallet_sends: Nullable(Schema.Boolean) }), "walletSendsPart")

/**
 * Whether the wallet may send now, as a part of another statement (db/ReadPart.ts): only an `ACTIVE` wallet sends
 * (spec 2: `FROZEN` "cannot send"; a `HIDDEN` one is refused at submission too). Read where a send is about to
 * start, so a freeze also holds what was submitted before it (docs/operations.md). `walletId` is the id, or a column
 * of the host's rows (a batch of withdrawals, each its own wallet).
 */
export const walletSendsPart = (sql: SqlClient.SqlClient, walletId: string | Statement.Fragment): ReadPart<boolean> => ({
  columns: sql`(SELECT status = 'ACTIVE' FROM wallets WHERE id = ${walletId}) AS wallet_sends`,
  decode: (row) => Effect.map(walletSendsRow(row), (decoded) => decoded.wallet_sends === true)
})

const lockedWallet = decodeFirstRow(Schema.Struct({ status: Schema.Literals(WalletStatus) }), "WalletSwitch.set (lock)")

export class WalletSwitch extends Context.Service<WalletSwitch, {
  readonly set: (
    tenantId: string,
    walletId: string,
    status: SwitchableWalletStatus
  ) => Effect.Effect<Wallet, NotFound | InvalidState>
}>()("coffer/WalletSwitch") {
  static readonly layer = Layer.effect(
    WalletSwitch,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const wallets = yield* WalletRepository

      const set = Effect.fn("WalletSwitch.set")(function*(tenantId: string, walletId: string, status: SwitchableWalletStatus) {
        const at = new Date(yield* Clock.currentTimeMillis)
        // The row lock orders this change with the provisioning entity's PROVISIONING -> ACTIVE step.
        yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* sql`
            SELECT status FROM wallets WHERE id = ${walletId} AND tenant_id = ${tenantId} FOR UPDATE`.pipe(
            Effect.orDie,
            Effect.flatMap(lockedWallet)
          )
          if (row === undefined) return yield* new NotFound({ message: "wallet not found" })
          if (row.status === "PROVISIONING") {
            return yield* new InvalidState({ message: "the wallet is still provisioning" })
          }
          if (row.status === "CLOSED") return yield* new InvalidState({ message: "a closed wallet cannot be reopened" })
          if (row.status === status) return
          yield* sql`UPDATE wallets SET status = ${status}, updated_at = ${at} WHERE id = ${walletId}`.pipe(Effect.orDie)
          yield* sql`INSERT INTO switch_changes (target, target_id, tenant_id, change, changed_at)
            VALUES ('WALLET', ${walletId}, ${tenantId}, ${JSON.stringify({ status })}::jsonb, ${at})`.pipe(Effect.orDie)
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return (yield* wallets.find(tenantId, walletId))!
      })

      return WalletSwitch.of({ set })
    })
  )
}
