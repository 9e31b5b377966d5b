/**
 * `npm run ledger:check`: audits the ledger of the database the service uses (LedgerAudit.ts; README "Ledger
 * audit"). Connects like the service (DATABASE_URL, else the embedded PostgreSQL under DATA_DIR, see
 * db/ExistingDatabase.ts), safely beside a running service. Prints each check and what it found, then a last line:
 * `ledger ok: N accounts, M entries`, or the first discrepancy.
 *
 * Exit status: 0 when the ledger is sound, 1 on any discrepancy, 2 when the audit could not run.
 */
import { Console, Effect, Exit, Runtime } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../Config.ts"
import * as ExistingDatabase from "../db/ExistingDatabase.ts"
import { auditLedger, LedgerAuditError, reportLines } from "./LedgerAudit.ts"

const exitDiscrepancy = 1
const exitCannotRun = 2
const cannotRun = (error: { readonly message: string }) =>
  Effect.as(Console.error(`ledger check cannot run: ${error.message}`), exitCannotRun)

const program: Effect.Effect<number> = Effect.scoped(Effect.gen(function*() {
  const database = yield* ExistingDatabase.connect("coffer-ledger-check")
  const report = yield* auditLedger.pipe(
    Effect.provideService(SqlClient.SqlClient, database.client),
    Effect.mapError((error) => new LedgerAuditError({ message: `${database.location}: ${error.message}`, cause: error }))
  )
  for (const line of reportLines(database.location, report)) yield* Console.log(line)
  return report.ok ? 0 : exitDiscrepancy
})).pipe(
  Effect.provide(AppConfig.layerConfig),
  Effect.catchTags({
    DatabaseStartupError: cannotRun,
    LedgerAuditError: cannotRun,
    ConfigError: cannotRun,
    ConfigInvalid: cannotRun
  })
)

const NodeRuntime = await import("@effect/platform-node/NodeRuntime")
NodeRuntime.runMain(program, {
  // The status is the program's result, given once the pool (and a PostgreSQL started here) has closed.
  teardown: (exit, onExit) => Exit.isSuccess(exit) ? onExit(exit.value as number) : Runtime.defaultTeardown(exit, onExit)
})
