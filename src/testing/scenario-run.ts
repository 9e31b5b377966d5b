/**
 * `npm run scenario -- --seed S --steps N`: the seeded workload (Workload.ts) on the whole service under the
 * testers' kit, on a throw-away embedded PostgreSQL (or the server of TEST_DATABASE_URL, a superuser URL: a template
 * and one database per run are made there and dropped). docs/scenarios.md, "The seeded workload".
 *
 * A run that holds exits 0 and ends with `seed: S`, `steps: N`, `fingerprint: <hex>`. A failure prints the step and
 * the check that failed, the shortest prefix of steps that still fails (its steps listed), whether it failed again,
 * and the command that reproduces it; exit 1. Exit 2: bad flags, or the database could not be had.
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Console, Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Reactivity from "effect/reactivity/Reactivity"
import { parseScriptArgs, usageError } from "../ScriptArgs.ts"
import type { ScenarioServer } from "./ScenarioDatabase.ts"

const usage = `Usage: npm run scenario -- [--seed S] [--steps N] [--verbose] [--dump FILE]

Runs a seeded workload of mixed operations (users, deposit addresses, deposits, blocks, internal transfers,
withdrawals, cancels, approvals, reorgs, node outages, failing broadcasts, webhook failures, jumps of time) on the
whole service under the testers' kit (virtual clock, seeded ids), checking the ledger audit and the event
invariants after every step. The same seed makes the same steps and the same fingerprint on every run.

  --seed S      the seed (default: a random one, printed at the end)
  --steps N     how many steps (default 100, at most 100000)
  --verbose     print each step as it completes
  --dump FILE   write the steps and the rows the fingerprint hashes to FILE (diff two runs' files to see
                where two fingerprints part)
  -h, --help    this text

On a failure: the failing step and check, then the shortest prefix of steps that still fails (found by rerunning
prefixes, bisecting), run once more to see it fail again, and the command that reproduces it.

PostgreSQL: a throw-away embedded server in a temporary directory, or TEST_DATABASE_URL (a superuser URL).
Exit status: 0 every check held, 1 a check failed, 2 bad flags or no database.
`

const args = parseScriptArgs(usage, {
  seed: { type: "string" },
  steps: { type: "string", default: "100" },
  verbose: { type: "boolean", default: false },
  dump: { type: "string" }
})
const steps = Number(args.steps)
if (!/^\d+$/.test(args.steps) || !Number.isSafeInteger(steps) || steps < 1 || steps > 100_000) {
  usageError(`--steps must be a whole number from 1 to 100000, got ${args.steps}`)
}
const seed = args.seed ?? randomBytes(8).toString("hex")
if (seed.length === 0 || seed.length > 200) usageError("--seed must be 1-200 characters")

// The whole service is loaded only now: `--help` and a bad flag answer at once.
const EmbeddedPostgres = await import("../db/postgres/EmbeddedPostgres.ts")
const { prepareTemplate, relaxDurability } = await import("./ScenarioDatabase.ts")
const { findFailure, isShrunkFailure } = await import("./Workload.ts")

/** The server the runs copy their databases from: TEST_DATABASE_URL's, else an embedded one for this process. */
const server: Effect.Effect<ScenarioServer, never, import("effect").Scope.Scope> = Effect.gen(function*() {
  const adminUrl = process.env.TEST_DATABASE_URL
  if (adminUrl !== undefined && adminUrl !== "") {
    const template = `coffer_workload_template_${process.pid}`
    yield* Effect.addFinalizer(() =>
      Effect.scoped(Effect.flatMap(
        PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer)),
        (admin) => admin.unsafe(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`)
      )).pipe(Effect.ignore)
    )
    return yield* prepareTemplate(adminUrl, template)
  }
  const directory = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const made = mkdtempSync(join(tmpdir(), "coffer-scenario-pg-"))
      // mkdtemp makes it 0700; as root, PostgreSQL runs as `postgres` and must pass through it.
      chmodSync(made, 0o755)
      return made
    }),
    (made) => Effect.sync(() => rmSync(made, { recursive: true, force: true }))
  )
  const embedded = yield* EmbeddedPostgres.start(directory).pipe(
    Effect.catch((error) =>
      Effect.sync(() => {
        process.stderr.write(`scenario cannot run: embedded PostgreSQL did not start: ${error.message}\n`)
        process.exit(2)
      })
    )
  )
  yield* relaxDurability(Redacted.value(embedded.url))
  return yield* prepareTemplate(Redacted.value(embedded.url), "coffer_workload_template")
})

const program = Effect.scoped(Effect.gen(function*() {
  const started = performance.now()
  const databaseServer = yield* server
  let last = performance.now()
  const dumped: Array<string> = []
  const progress = (line: string) => {
    const now = performance.now()
    console.log(`${line}  [${Math.round(now - last)} ms]`)
    last = now
  }
  const result = yield* findFailure({
    server: databaseServer,
    seed,
    steps,
    ...(args.verbose ? { onStep: progress } : {}),
    ...(args.dump !== undefined ? { onRows: (rows: ReadonlyArray<string>) => dumped.push(...rows) } : {}),
    onShrink: (prefix, failed) => console.log(`shrinking: ${prefix} steps ${failed ? "fail" : "hold"}`)
  })
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  if (!isShrunkFailure(result)) {
    if (args.dump !== undefined) writeFileSync(args.dump, [...result.log, ...dumped, ""].join("\n"))
    yield* Console.log(`every check held after each of ${steps} steps and the closing phase (${seconds} s)`)
    yield* Console.log(`seed: ${seed}`)
    yield* Console.log(`steps: ${steps}`)
    yield* Console.log(`fingerprint: ${result.fingerprint}`)
    return 0
  }
  const failure = result.first.failure!
  const where = failure.step > result.first.steps ? "the closing phase" : `step ${failure.step}`
  yield* Console.log(`FAILED after ${where} of ${result.first.steps}: ${failure.message}`)
  yield* Console.log(`shortest failing prefix: ${result.prefix} steps (${result.runs} runs, ${seconds} s):`)
  for (const line of result.shrunk.log.slice(0, result.prefix)) yield* Console.log(line)
  yield* Console.log(`it fails with: ${result.shrunk.failure?.detail ?? "(no failure)"}`)
  yield* Console.log(`failed again on a rerun: ${result.reproduced ? "yes" : "NO (not reproducible)"}`)
  yield* Console.log(`reproduce: npm run scenario -- --seed ${seed} --steps ${result.prefix}`)
  yield* Console.log(`seed: ${seed}`)
  yield* Console.log(`steps: ${result.prefix}`)
  return 1
}))

NodeRuntime.runMain(Effect.flatMap(program, (code) => Effect.sync(() => process.exit(code))))
