/**
 * The flags of the project's npm scripts (`npm run bench`, `ledger:check`, `dev:anvil`, `dev:deposit`, the test
 * prerequisites): parsed by node:util's `parseArgs`, with `--help`/`-h` answering the script's usage on stdout (exit
 * 0) and an unknown or malformed flag answering one line on stderr (exit 2) instead of a stack trace. `npm run call`
 * has its own command line (effect/cli), which answers `--help` too.
 */
import { parseArgs, type ParseArgsOptionsConfig } from "node:util"

export const usageExitCode = 2

export const parseScriptArgs = <const Options extends ParseArgsOptionsConfig>(
  usage: string,
  options: Options,
  argv: ReadonlyArray<string> = process.argv.slice(2)
) => {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(usage.endsWith("\n") ? usage : `${usage}\n`)
    process.exit(0)
  }
  try {
    return parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error))
  }
}

/** A script's own check of a flag's value failed: one line, exit 2. */
export const usageError = (message: string): never => {
  process.stderr.write(`${message}; --help lists the options\n`)
  process.exit(usageExitCode)
}
