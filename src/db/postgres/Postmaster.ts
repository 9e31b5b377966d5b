/**
 * The postmaster: started on a port, ready when it says so, stopped with escalating signals, each with a bound.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createWriteStream } from "node:fs"
import net from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import type { Option } from "effect"
import type { PostgresBinaries } from "./PostgresBinaries.ts"
import { type ServerAccount, serverProcessOptions } from "./ServerAccount.ts"

/** Crash recovery of a development database; also bounds a start that never reports ready. */
const startTimeoutMs = 60_000
/** Fast shutdown rolls back open transactions; it only takes long when a checkpoint has much to write. */
export const stopTimeoutMs = 30_000
/** After SIGQUIT (immediate shutdown, crash recovery on the next start). */
const quitTimeoutMs = 5_000
const logLinesMax = 50
const readyLine = "database system is ready to accept connections"

export const portIsFree = (port: number): Promise<boolean> =>
  new Promise((resolvePromise) => {
    const server = net.createServer().once("error", () => resolvePromise(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolvePromise(true)))
  })

export const freePort = (): Promise<number> =>
  new Promise((resolvePromise, reject) => {
    const server = net.createServer().once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolvePromise(port))
    })
  })

export interface Postmaster {
  readonly child: ChildProcess
  readonly pid: number
  readonly exited: Promise<void>
  readonly log: Array<string>
  readonly isRunning: () => boolean
}

/** The port was taken between our check and postgres's bind: worth another attempt on another port. */
export class BindFailed extends Error {}

export const spawnPostmaster = (
  pgdata: string,
  port: number,
  binaries: PostgresBinaries,
  account: Option.Option<ServerAccount>,
  onSpawned: () => void = () => {},
  socketDirectory?: string
): Promise<Postmaster> =>
  new Promise((resolvePromise, reject) => {
    const explainLog = process.env.COFFER_PG_EXPLAIN || undefined
    const explained = explainLog === undefined ? undefined : createWriteStream(explainLog, { flags: "a" })
    const child = spawn(binaries.postgres, [
      "-D",
      pgdata,
      "-p",
      String(port),
      "-c",
      "listen_addresses=127.0.0.1",
      // The service's own connections go through a Unix-domain socket in the data directory (EmbeddedPostgres.ts
      // `socketDirectoryFor`), cheaper per round trip than loopback TCP; never the default in /tmp, which the whole
      // machine shares. TCP stays for tools that use the port.
      "-c",
      `unix_socket_directories=${socketDirectory ?? ""}`,
      // The ready line below is matched in English.
      "-c",
      "lc_messages=C",
      // A crash's recovery replays the WAL written since the last completed checkpoint, then writes every buffer it
      // dirtied before it takes connections: both grow with that WAL, and bound the README's 3 s restart promise.
      // With the defaults (5 min or 1 GB) the bench's restart replayed 157 MB; at 64 MB still 42-44 MB and 10,000
      // buffers (3.2-3.5 s in full runs); at 32 MB or 30 s, 19 MB and 3,400 buffers (2.3 s). Figures and method:
      // README "Benchmark", the restart line and the fifteenth measurement. A DATABASE_URL server keeps its own.
      "-c",
      "max_wal_size=32MB",
      "-c",
      "min_wal_size=32MB",
      "-c",
      "checkpoint_timeout=30s",
      // Before it replays anything, a recovery makes sure every file of the data directory is on disk: file by file
      // (the default) 0.5 s here and growing with the files, one `syncfs` call 0.02-0.05 s (errors reported since
      // Linux 5.8; it also flushes the rest of that file system). README, the fifteenth measurement.
      "-c",
      "recovery_init_sync_method=syncfs",
      // `npm run bench -- --statements` (test/bench/BenchSupport.ts): per-statement times, to see where the database's
      // share of a figure goes. Loading the library changes nothing until the extension is created. Nested statements
      // too (triggers, foreign-key checks, functions), each under its own text: a statement's own time then includes
      // theirs, and they show where it goes. Planning too: a statement planned at each execution shows it there.
      // `npm run bench -- --explain` (test/bench/BenchSupport.ts `printTriggerCounts`): every statement's plan with the
      // triggers and foreign-key checks it fired, how many times each, written with the server's other lines to the
      // file COFFER_PG_EXPLAIN names. Every statement runs instrumented, so that run's rates are not comparable.
      ...(explainLog === undefined
        ? []
        : [
          "-c",
          "session_preload_libraries=auto_explain",
          "-c",
          "auto_explain.log_min_duration=0",
          "-c",
          "auto_explain.log_analyze=on",
          "-c",
          "auto_explain.log_timing=off",
          "-c",
          "auto_explain.log_triggers=on",
          "-c",
          "auto_explain.log_nested_statements=on"
        ]),
      ...(process.env.COFFER_PG_STATEMENTS === "1"
        ? [
          "-c",
          "shared_preload_libraries=pg_stat_statements",
          "-c",
          "pg_stat_statements.track=all",
          "-c",
          "pg_stat_statements.track_planning=on"
        ]
        : [])
    ], {
      ...serverProcessOptions(account),
      // Its own process group: a Ctrl-C in the terminal reaches node, which stops the server after draining.
      detached: true,
      stdio: ["ignore", "ignore", "pipe"]
    })
    onSpawned()
    const log: Array<string> = []
    let running = true
    let ready = false
    let partial = ""
    const exited = new Promise<void>((resolveExit) =>
      child.once("exit", () => {
        running = false
        explained?.end()
        resolveExit()
      })
    )
    const fail = (message: string, cause?: unknown) => {
      clearTimeout(timer)
      const tail = log.slice(-8).join("\n")
      const Failure = /could not bind|could not create any TCP\/IP sockets/.test(tail) ? BindFailed : Error
      reject(new Failure(`${message}${tail === "" ? "" : `; its last lines:\n${tail}`}`, { cause }))
    }
    child.stderr?.on("data", (chunk: Buffer) => {
      const lines = (partial + chunk.toString("utf8")).split("\n")
      partial = lines.pop() ?? ""
      for (const line of lines) {
        explained?.write(`${line}\n`)
        log.push(line)
        if (log.length > logLinesMax) log.shift()
        if (!ready && line.includes(readyLine)) {
          ready = true
          clearTimeout(timer)
          resolvePromise({ child, pid: child.pid!, exited, log, isRunning: () => running })
        }
      }
    })
    child.once("error", (error) => fail(`cannot run ${binaries.postgres}: ${error.message}`, error))
    child.once("exit", (code, signal) => {
      if (ready) return
      // Its last lines may still be in the pipe: wait for it to close, briefly.
      const closed = new Promise((resolveClose) => child.once("close", resolveClose))
      void Promise.race([closed, sleep(200)]).then(() => fail(`postgres exited with ${code ?? signal} before it was ready`))
    })
    const timer = setTimeout(() => {
      child.kill("SIGQUIT")
      fail(`postgres was not ready within ${startTimeoutMs} ms`)
    }, startTimeoutMs)
  })

/** Never fails: after SIGINT, SIGQUIT, then SIGKILL, each with a bound. */
export const stopPostmaster = async (postmaster: Postmaster): Promise<void> => {
  const steps: ReadonlyArray<readonly [NodeJS.Signals, number]> = [
    ["SIGINT", stopTimeoutMs],
    ["SIGQUIT", quitTimeoutMs],
    ["SIGKILL", quitTimeoutMs]
  ]
  for (const [signal, timeoutMs] of steps) {
    if (!postmaster.isRunning()) return
    postmaster.child.kill(signal)
    // Unreferenced: the timer alone must not keep the process alive once the server is gone.
    await Promise.race([postmaster.exited, sleep(timeoutMs, undefined, { ref: false })])
  }
}
