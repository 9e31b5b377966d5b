/**
 * Separate node processes for the storage tests: what a `kill -9` or a second service does can only be seen from
 * another process. Each runs an ES module given as text, from the repository root, with this process's Node.
 */
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url))
const pollIntervalMs = 25

/** The URL of `src/<path>`, to import from the child's module text. */
export const moduleUrl = (path: string): string => new URL(`../../src/${path}`, import.meta.url).href

/** A separate node process running `code` (an ES module); its stdin is a pipe, for `go` (below). */
export const runNode = (code: string): ChildProcess =>
  spawn(process.execPath, ["--input-type=module", "-e", code], {
    cwd: repositoryRoot,
    stdio: ["pipe", "pipe", "pipe"]
  })

/** Module text that waits for a line on stdin: children started with it go on together when `go` writes it. */
export const awaitGo = `await new Promise((resolve) => process.stdin.once("data", resolve))`

export const go = (child: ChildProcess): void => {
  child.stdin?.write("go\n")
}

/** Everything the child has written to stdout and stderr so far. */
export const outputOf = (child: ChildProcess): () => string => {
  let output = ""
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  return () => output
}

/** Alive and not a zombie (a killed orphan stays `Z` until pid 1 reaps it). */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}

export const waitFor = (what: string, condition: () => boolean, timeoutMs: number) =>
  Effect.promise(async () => {
    const deadline = Date.now() + timeoutMs
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, pollIntervalMs))
    }
  })

/** The exit code, or the signal that ended the child. */
export const exitOf = (child: ChildProcess) =>
  Effect.promise(() =>
    new Promise<number | NodeJS.Signals | null>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode ?? child.signalCode)
      else child.once("exit", (code, signal) => resolve(code ?? signal))
    })
  )
