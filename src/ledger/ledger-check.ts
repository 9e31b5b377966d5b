/**
 * `npm run ledger:check`: audits the ledger of the database the service uses (LedgerAudit.ts; README "Ledger
 * audit"). Connects like the service (DATABASE_URL, else the embedded PostgreSQL under DATA_DIR, see
 * db/ExistingDatabase.ts), safely beside a running service. Prints each check and what it found, then a last line:
 * `ledger ok: N accounts, M entries`, or the first discrepancy.
 *
 * `--chain` (`npm run ledger:check -- --chain`) then also compares the chain books (ChainBooks.ts, docs/ledger.md
 * "Chain books") with the nodes of CHAIN_RPC_URLS, every family: EVM at the books' block, TRON and SOL balances and
 * BTC unspent outputs at a quiet head (HeadBalances.ts). One line per network, asset and address with its role,
 * expected and on-chain balance, difference and verdict, closing with `chain ok: ...` or the first unexplained
 * difference.
 *
 * Exit status: 0 when the ledger (and with `--chain` the chain) is sound, 1 on any discrepancy or unexplained
 * difference, 2 when the audit could not run (a node that cannot answer included).
 */
import { Console, Effect, Exit, Runtime } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../Config.ts"
import { parseScriptArgs } from "../ScriptArgs.ts"
import * as ExistingDatabase from "../db/ExistingDatabase.ts"
import { makeEvmBalanceReader } from "./ChainBalances.ts"
import { makeHeadBalanceReader } from "./HeadBalances.ts"
import { loadCatalogFile } from "../catalog/Catalog.ts"
import { auditChain, type BalanceReader, chainReportLines } from "./ChainBooks.ts"
import { auditLedger, LedgerAuditError, reportLines } from "./LedgerAudit.ts"

const exitDiscrepancy = 1
const exitCannotRun = 2
const cannotRun = (error: { readonly message: string }) =>
  Effect.as(Console.error(`ledger check cannot run: ${error.message}`), exitCannotRun)

const usage = `Usage: npm run ledger:check [-- --chain]

Audits the ledger of the database the service uses (DATABASE_URL, else the embedded PostgreSQL under DATA_DIR),
safely beside a running service: every entry balances, every balance is its postings, the books close per tenant
and asset (README "Ledger audit").

  --chain      also compare the chain books with the nodes of CHAIN_RPC_URLS, one line per network, asset and
               address (EVM at the books' block; TRON, SOL and BTC at the node's head once the watcher has
               reached it: the check waits up to about 30 s for that)
  -h, --help   this text

Exit status: 0 sound, 1 a discrepancy or an unexplained difference, 2 the audit could not run.
`
const withChain = parseScriptArgs(usage, { chain: { type: "boolean", default: false } }).chain

const program: Effect.Effect<number> = Effect.scoped(Effect.gen(function*() {
  const config = yield* AppConfig
  const database = yield* ExistingDatabase.connect("coffer-ledger-check")
  const report = yield* auditLedger.pipe(
    Effect.provideService(SqlClient.SqlClient, database.client),
    Effect.mapError((error) => new LedgerAuditError({ message: `${database.location}: ${error.message}`, cause: error }))
  )
  for (const line of reportLines(database.location, report)) yield* Console.log(line)
  if (!withChain) return report.ok ? 0 : exitDiscrepancy
  // The node URL is never printed: it may carry an API key (ChainBalances.ts and the chain clients keep it out of
  // messages too). Every family is compared: EVM at the books' block, the others at a quiet head (ChainBooks.ts).
  const catalog = yield* loadCatalogFile(config.serviceEnv).pipe(
    Effect.mapError((error) => new LedgerAuditError({ message: `catalog: ${error.message}` }))
  )
  const readers = new Map<string, BalanceReader>()
  for (const [networkKey, url] of Object.entries(config.chainRpcUrls)) {
    const network = catalog.networks.find((entry) => entry.networkKey === networkKey)
    if (network === undefined) {
      yield* Console.log(`${networkKey}: not in the catalog, not compared`)
      continue
    }
    if (network.chainFamily === "EVM") readers.set(networkKey, makeEvmBalanceReader(networkKey, url))
    else {
      const assets = catalog.assets.filter((asset) => asset.networkKey === networkKey)
      readers.set(networkKey, yield* makeHeadBalanceReader({ network, assets, rpcUrl: url }))
    }
  }
  if (readers.size === 0) return yield* cannotRun({ message: "--chain: CHAIN_RPC_URLS names no node of a catalog network" })
  const chain = yield* auditChain(readers).pipe(
    Effect.provideService(SqlClient.SqlClient, database.client),
    Effect.catchTag("SqlError", (error) => Effect.fail(new LedgerAuditError({ message: `cannot read the chain books: ${error.message}` })))
  )
  for (const line of chainReportLines(chain)) yield* Console.log(line)
  return report.ok && chain.ok ? 0 : exitDiscrepancy
})).pipe(
  Effect.provide(AppConfig.layerConfig),
  Effect.catchTags({
    DatabaseStartupError: cannotRun,
    LedgerAuditError: cannotRun,
    ChainAuditError: cannotRun,
    ConfigError: cannotRun,
    ConfigInvalid: cannotRun
  })
)

const NodeRuntime = await import("@effect/platform-node/NodeRuntime")
NodeRuntime.runMain(program, {
  // The status is the program's result, given once the pool (and a PostgreSQL started here) has closed.
  teardown: (exit, onExit) => Exit.isSuccess(exit) ? onExit(exit.value as number) : Runtime.defaultTeardown(exit, onExit)
})
