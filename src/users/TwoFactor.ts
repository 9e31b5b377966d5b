/**
 * Two-step verification of a payer before funds move (spec 4.4, "Two-step verification"; decisions.md "Security
 * cooldown"). Cases in the spec's order: no TOTP bound, cooldown, code missing, too many checks, wrong or reused code.
 * A cooldown blocks whether or not the tenant requires 2FA.
 *
 * Each code is usable once: the accepted time step is stored (`users.totp_last_step`) by a conditional update, so two
 * concurrent requests with one code cannot both pass.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Secret, TOTP } from "otpauth"
import { decodeFirstRow, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { CooldownActive, RateLimited, TwoFactorInvalid, TwoFactorRequired } from "../domain/ApiError.ts"

/** Section 8: two-step code checks per user. */
export const twoFactorChecksMax = 10
export const twoFactorWindowMillis = 15 * 60_000
/** RFC 6238 defaults, as authenticator apps use them. */
const periodSeconds = 30
/** One step either way for clock drift between the user's phone and us. */
const driftSteps = 1

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
/** A user's `totp_secret` and `cooldown_until`, as `users` holds them. */
export const PayerTotp = Schema.Struct({ totp_secret: Nullable(Text), cooldown_until: Nullable(Timestamp) })
export type PayerTotp = typeof PayerTotp.Type
const payerRow = decodeFirstRow(PayerTotp, "TwoFactor.verify (payer)")

export type TwoFactorError = CooldownActive | TwoFactorRequired | TwoFactorInvalid | RateLimited

export class TwoFactor extends Context.Service<TwoFactor, {
  /**
   * Checks the payer `userId`; `required` is the tenant's `apiRequireUser2fa`. `payer`: the user's TOTP columns when
   * the caller read them already (with the user's status, Transfers.ts), so they are not read twice.
   */
  readonly verify: (
    userId: string,
    required: boolean,
    code: string | undefined,
    payer?: PayerTotp
  ) => Effect.Effect<void, TwoFactorError>
}>()("coffer/TwoFactor") {
  static readonly layer = Layer.effect(
    TwoFactor,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const verify = Effect.fn("TwoFactor.verify")(function*(
        userId: string,
        required: boolean,
        code: string | undefined,
        payer?: PayerTotp
      ) {
        const now = yield* Clock.currentTimeMillis
        const user = payer ?? (yield* sql`
          SELECT totp_secret, cooldown_until FROM users WHERE id = ${userId}`.pipe(Effect.flatMap(payerRow)))
        const inCooldown = user?.cooldown_until != null && user.cooldown_until.getTime() > now
        if (!required) {
          if (inCooldown) return yield* new CooldownActive({ message: "security cooldown is active" })
          return
        }
        if (user?.totp_secret == null) return yield* new TwoFactorRequired({ message: "bind TOTP before moving funds" })
        if (inCooldown) return yield* new CooldownActive({ message: "security cooldown is active" })
        if (code === undefined || code.length === 0) return yield* new TwoFactorRequired({ message: "TOTP code required" })

        // Counting and recording the check are one step under a lock per user: counted then inserted apart, 40
        // concurrent wrong codes were 22 checks against the 10 allowed (issue 36). The lock is a transaction-scoped
        // advisory lock rather than the user's row, which transfers read FOR SHARE while they move funds.
        const windowStart = new Date(now - twoFactorWindowMillis)
        const recorded = yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_advisory_xact_lock(hashtextextended(${`coffer-2fa:${userId}`}, 0))`
          return yield* sql`
            WITH expired AS (
              DELETE FROM two_factor_checks WHERE user_id = ${userId} AND checked_at < ${windowStart}
            )
            INSERT INTO two_factor_checks (user_id, checked_at)
            SELECT ${userId}, ${new Date(now)}
            WHERE (SELECT count(*) FROM two_factor_checks WHERE user_id = ${userId} AND checked_at >= ${windowStart})
              < ${twoFactorChecksMax}
            RETURNING user_id`
        }))
        if (recorded.length === 0) {
          return yield* new RateLimited({ message: "too many two-step code checks; try again later" })
        }

        const totp = new TOTP({ secret: Secret.fromBase32(user.totp_secret), period: periodSeconds })
        const delta = /^[0-9]{6}$/.test(code) ? totp.validate({ token: code, timestamp: now, window: driftSteps }) : null
        if (delta === null) return yield* new TwoFactorInvalid({ message: "invalid TOTP code" })
        const step = Math.floor(now / 1000 / periodSeconds) + delta
        const accepted = yield* sql`
          UPDATE users SET totp_last_step = ${step}
          WHERE id = ${userId} AND (totp_last_step IS NULL OR totp_last_step < ${step})
          RETURNING id`
        if (accepted.length === 0) return yield* new TwoFactorInvalid({ message: "TOTP code already used" })
      }, (effect) => Effect.catchTag(effect, "SqlError", Effect.die))

      return TwoFactor.of({ verify })
    })
  )
}
