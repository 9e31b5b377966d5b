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
import { auditLedger, type CheckResult, type LedgerAuditReport, summaryLine } from "./LedgerAudit.ts"

const exitDiscrepancy = 1
const exitCannotRun = 2
/** Discrepancies printed per check; the report holds up to LedgerAudit's own bound. */
const printedPerCheckMax = 20

const checkLines = (check: CheckResult): ReadonlyArray<string> => {
  const found = check.discrepancies.length
  const head = `${found === 0 ? "ok  " : "FAIL"} ${check.check}: ${check.examined} ${check.unit}; ${check.description}`
  if (found === 0) return [head]
  const count = `${found}${check.truncated ? "+" : ""} discrepanc${found === 1 && !check.truncated ? "y" : "ies"}`
  return [
    `${head}: ${count}`,
    ...check.discrepancies.slice(0, printedPerCheckMax).map((discrepancy) => `       ${discrepancy.message}`),
    ...(found > printedPerCheckMax ? [`       ... ${found - printedPerCheckMax} more`] : [])
  ]
}

export const reportLines = (location: string, report: LedgerAuditReport): ReadonlyArray<string> => [
  `ledger audit of ${location}`,
  `one REPEATABLE READ, READ ONLY snapshot: ${report.accounts} accounts, ${report.entries} entries, ` +
  `${report.postings} postings, ${report.transactions} transactions`,
  ...report.checks.flatMap(checkLines),
  summaryLine(report)
]

const cannotRun = (error: { readonly message: string }) =>
  Effect.as(Console.error(`ledger check cannot run: ${error.message}`), exitCannotRun)

const program: Effect.Effect<number> = Effect.scoped(Effect.gen(function*() {
  const database = yield* ExistingDatabase.connect("coffer-ledger-check")
  const report = yield* auditLedger.pipe(Effect.provideService(SqlClient.SqlClient, database.client))
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
