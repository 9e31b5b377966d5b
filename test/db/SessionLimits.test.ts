/**
 * The database session limits (src/db/SessionLimits.ts, docs/ledger.md "Locks and timeouts"): a holder of a wallet's
 * balance rows that stops moving stalls another request on that wallet only for seconds. A holder with the service's
 * own limits (a frozen process of this service) is cut off by the server and the waiting request then completes; a
 * holder outside them (another client) makes the waiting request fail fast with the retryable 503
 * PROVIDER_UNAVAILABLE of spec section 7, never a 500, and nothing moves.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { SqlClient, SqlError } from "effect/sql"
import pg from "pg"
import {
  idleInTransactionTimeoutMillis,
  isSessionLimitError,
  lockTimeoutMillis,
  sessionLimitParameters,
  withoutSessionLimits
} from "../../src/db/SessionLimits.ts"
import { call, ethWalletOf, expectError, fund } from "../support/Funds.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"

const eth = "ETH_SEPOLIA_ETH"
/** Scheduling slack on a loaded 2-core machine; the bounds under test are seconds, this is on top of them. */
const slackMillis = 7_000


const available = (tenant: TestTenant, walletId: string) =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/assets`), (response) =>
    (response.json as Array<any>).find((item) => item.assetId === eth)?.available as string | undefined)

/**
 * A separate raw connection that opens a transaction, locks the wallet's balance rows and then idles, like a process
 * frozen mid-transaction. `withServiceLimits` gives it the session limits of the service's pool.
 */
const frozenHolder = (walletId: string, withServiceLimits: boolean) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: process.env.DATABASE_URL })
      // The server ending the session arrives as an error event; without a listener it would crash the worker.
      const ended: Array<string> = []
      client.on("error", (error) => ended.push(error.message))
      await client.connect()
      if (withServiceLimits) {
        for (const [name, value] of Object.entries(sessionLimitParameters)) await client.query(`SET ${name} = ${value}`)
      }
      await client.query("BEGIN")
      const locked = await client.query("SELECT id FROM ledger_accounts WHERE wallet_id = $1 FOR UPDATE", [walletId])
      return { client, ended, lockedRows: locked.rowCount ?? 0 }
    }),
    ({ client }) => Effect.promise(() => client.end().catch(() => undefined))
  )

const transfer = (tenant: TestTenant, from: string, to: string, externalTxId: string) =>
  call(tenant, "POST", "/v1/transactions", {
    assetId: eth,
    source: { type: "WALLET", id: from },
    destination: { type: "WALLET", id: to },
    amountRaw: "10",
    externalTxId
  })

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    const value = yield* effect
    return { value, elapsedMillis: (yield* Clock.currentTimeMillis) - started }
  })

const pgError = (code: string) => Object.assign(new Error(`server error ${code}`), { code })

describe("which failures are the session limits (answered 503, spec section 7)", () => {
  it("lock timeout, statement timeout and an ended idle session, bare or down a defect's cause chain; other SQL errors are not", () => {
    const lock = new SqlError.SqlError({ reason: new SqlError.LockTimeoutError({ cause: pgError("55P03") }) })
    const statement = new SqlError.SqlError({ reason: new SqlError.StatementTimeoutError({ cause: pgError("57014") }) })
    const idle = new SqlError.SqlError({ reason: new SqlError.UnknownError({ cause: pgError("25P03") }) })
    const unique = new SqlError.SqlError({ reason: new SqlError.UniqueViolation({ cause: pgError("23505"), constraint: "x" }) })
    assert.isTrue(isSessionLimitError(lock))
    assert.isTrue(isSessionLimitError(statement))
    assert.isTrue(isSessionLimitError(idle))
    // As the ledger wraps it: a defect whose cause is the SqlError.
    assert.isTrue(isSessionLimitError(new Error("ledger entry refused", { cause: lock })))
    assert.isFalse(isSessionLimitError(unique))
    assert.isFalse(isSessionLimitError(new Error("connection lost")))
    assert.isFalse(isSessionLimitError(undefined))
  })
})

layer(makeTestAppLayer(), { excludeTestServices: true })("database session limits", (it) => {
  describe("every pool connection carries them; maintenance can lift them for one transaction", () => {
    it.effect("SHOW on a pool connection gives the configured values; withoutSessionLimits gives 0 inside, the pool keeps them", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const show = (name: string) =>
          Effect.map(sql<{ value: string }>`SELECT current_setting(${name}) AS value`, ([row]) => row!.value)
        assert.strictEqual(yield* show("lock_timeout"), `${lockTimeoutMillis / 1000}s`)
        assert.strictEqual(yield* show("idle_in_transaction_session_timeout"), `${idleInTransactionTimeoutMillis / 1000}s`)
        assert.strictEqual(yield* show("statement_timeout"), "15s")
        const inside = yield* withoutSessionLimits(Effect.all([
          show("lock_timeout"),
          show("statement_timeout"),
          show("idle_in_transaction_session_timeout")
        ]))
        assert.deepStrictEqual(inside, ["0", "0", "0"])
        assert.strictEqual(yield* show("lock_timeout"), `${lockTimeoutMillis / 1000}s`)
      }))
  })

  describe("a frozen holder of the payer's balance rows", () => {
    it.effect("with the service's limits (a frozen process of ours): the server ends its session, and the transfer waiting behind it completes 202", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* ethWalletOf(tenant, "frozen-own-payer")
        const payee = yield* ethWalletOf(tenant, "frozen-own-payee")
        yield* fund(tenant, payer, eth, 1_000n)
        const holder = yield* frozenHolder(payer, true)
        assert.isAbove(holder.lockedRows, 0)
        const { value: response, elapsedMillis } = yield* timed(transfer(tenant, payer, payee, "behind-own"))
        assert.strictEqual(response.status, 202, response.text)
        assert.isBelow(elapsedMillis, idleInTransactionTimeoutMillis + slackMillis)
        assert.strictEqual(yield* available(tenant, payer), "990")
        assert.isAbove(holder.ended.length, 0, "the server ended the idle session")
      }).pipe(Effect.scoped))

    it.effect("outside the service's limits (another client): the transfer fails within the lock timeout with 503 PROVIDER_UNAVAILABLE, retryable, nothing moved", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const payer = yield* ethWalletOf(tenant, "frozen-foreign-payer")
        const payee = yield* ethWalletOf(tenant, "frozen-foreign-payee")
        yield* fund(tenant, payer, eth, 1_000n)
        yield* Effect.scoped(Effect.gen(function*() {
          const holder = yield* frozenHolder(payer, false)
          assert.isAbove(holder.lockedRows, 0)
          const { value: response, elapsedMillis } = yield* timed(transfer(tenant, payer, payee, "behind-foreign"))
          expectError(response, 503, "PROVIDER_UNAVAILABLE")
          assert.isTrue(response.json.error.retryable)
          // It waited for the lock, and no longer than the lock timeout allows.
          assert.isAtLeast(elapsedMillis, lockTimeoutMillis - 1_000)
          assert.isBelow(elapsedMillis, lockTimeoutMillis + slackMillis)
        }))
        // The holder is gone: nothing moved, and a new request goes through at once.
        assert.strictEqual(yield* available(tenant, payer), "1000")
        const after = yield* transfer(tenant, payer, payee, "after-foreign")
        assert.strictEqual(after.status, 202, after.text)
        assert.strictEqual(yield* available(tenant, payer), "990")
      }))
  })
})
