/**
 * Runs `npm run ledger:check` (src/ledger/ledger-check.ts) as its own process, as an operator would, with only the
 * environment given (the test's DATABASE_URL is not passed on unless named).
 */
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url))
/** initdb is not run, but a start of the embedded PostgreSQL takes a few seconds on a busy 2-core machine. */
const checkTimeoutMs = 90_000

export interface CheckRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
  /** The last line printed to stdout. */
  readonly lastLine: string
}

export const runLedgerCheck = (env: Record<string, string>, args: ReadonlyArray<string> = []) =>
  Effect.promise(() =>
    new Promise<CheckRun>((resolve) => {
      execFile(
        process.execPath,
        ["src/ledger/ledger-check.ts", ...args],
        {
          cwd: repositoryRoot,
          env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp", ...env },
          timeout: checkTimeoutMs
        },
        (error, stdout, stderr) => {
          const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
          const lines = stdout.trimEnd().split("\n")
          resolve({ code, stdout, stderr, lastLine: lines[lines.length - 1] ?? "" })
        }
      )
    })
  )
