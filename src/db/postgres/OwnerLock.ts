/**
 * One owner per DATA_DIR: the node process that runs the embedded PostgreSQL holds an exclusive lock on
 * `<dataDir>/owner.lock` from before it touches the cluster until its server has stopped. A second start on the same
 * directory finds the lock taken and stops there, so it never mistakes the owner's live server for one left behind by
 * a crash (`stopLeftoverServer` in LeftoverServer.ts stops whatever runs on the cluster).
 *
 * The lock is a kernel record lock (fcntl F_SETLK), not a pid file:
 *   - the kernel drops it when its process ends, however it ends (kill -9 included), so a lock is never stale and
 *     nothing has to tell a dead owner from a live one (pid reuse, start times from /proc, zombies, and pids of
 *     another container's namespace that shares the volume);
 *   - the kernel grants it to exactly one of two processes that ask at the same instant. With a pid file, replacing a
 *     stale file is a read-then-replace that two starters can both win, unless a second lock guards it, which has the
 *     same problem when its own holder is killed.
 * Node has no fcntl in core, but its built-in SQLite (`node:sqlite`, no extra package) takes exactly this lock on its
 * database file: an empty database held in `BEGIN EXCLUSIVE` is the lock. Nothing is ever written to it.
 *
 * Two rules keep it sound:
 *   - `owner.lock` is never deleted or replaced, not even when no one holds it: a process that locked the old inode
 *     would keep its lock while another locks the new file.
 *   - nothing else in this process opens `owner.lock`: closing any descriptor of a file drops every fcntl lock the
 *     process holds on it (POSIX). SQLite guards its own descriptors against that; our code must not open it at all.
 *
 * `<dataDir>/owner.pid` names the owner, for the message a second start prints and for operators
 * (`kill $(cat .data/owner.pid)`). It is information only: the lock decides, so a stale or wrong pid in it changes
 * nothing.
 */
import { chmodSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { setTimeout as sleep } from "node:timers/promises"
import { Effect } from "effect"
import { describeCause, EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"

export const lockFileName = "owner.lock"
export const pidFileName = "owner.pid"

/** SQLite's result code for a lock held by another connection; with a busy timeout of 0 it is returned at once. */
const sqliteBusy = 5
/**
 * The owner writes its pid right after it got the lock; a second start that arrives in between waits this long for
 * the pid to appear before it reports an unknown owner.
 */
const ownerPidWaitMs = 500
const ownerPidPollIntervalMs = 10

export interface Held {
  readonly _tag: "Held"
  /** Removes `owner.pid` and gives the lock back; idempotent. */
  readonly release: () => void
}

export interface Taken {
  readonly _tag: "Taken"
  /** The owner's pid, when `owner.pid` names a running process; undefined when it could not be learnt. */
  readonly ownerPid: number | undefined
}

const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The pid `owner.pid` names, or undefined when it is absent, malformed or names no running process. */
const recordedOwner = (dataDir: string): number | undefined => {
  let text: string
  try {
    text = readFileSync(join(dataDir, pidFileName), "utf8")
  } catch {
    return undefined
  }
  const pid = Number(text.trim())
  return Number.isSafeInteger(pid) && pid > 0 && isRunning(pid) ? pid : undefined
}

const waitForRecordedOwner = async (dataDir: string): Promise<number | undefined> => {
  const deadline = performance.now() + ownerPidWaitMs
  for (;;) {
    const pid = recordedOwner(dataDir)
    if (pid !== undefined || performance.now() >= deadline) return pid
    await sleep(ownerPidPollIntervalMs)
  }
}

/**
 * Takes the lock of `dataDir` (which must exist) without waiting: `Held` when this call got it, `Taken` when another
 * holder has it, in this process or another. Rejects on anything else (unreadable directory, `owner.lock` that is not
 * a SQLite file, a file system without record locks).
 */
/**
 * SQLite takes an exclusive lock in steps (shared, then reserved, pending, exclusive). Two processes that ask at the
 * same instant can each hold the shared step the other needs gone, and both give up: measured in CI, two racing
 * starts both answered "in use". A loser therefore asks again a few times, after a pause that differs per process
 * (from its pid), so the racers fall out of step and one wins; a lock held by a live owner stays taken throughout.
 */
const lockAttemptsMax = 8
const lockRetryBaseMs = 15

const lockOnce = (lockFile: string): DatabaseSync | "busy" => {
  const database = new DatabaseSync(lockFile, { timeout: 0 })
  try {
    // A rollback journal would be one more file for a kill -9 to leave behind; nothing is written anyway. (With
    // `OFF` node's SQLite kept its default, DELETE, and wrote `owner.lock-journal`.)
    database.exec("PRAGMA journal_mode = MEMORY")
    database.exec("BEGIN EXCLUSIVE")
    return database
  } catch (error) {
    database.close()
    if ((error as { errcode?: unknown }).errcode === sqliteBusy) return "busy"
    throw error
  }
}

export const tryAcquire = async (dataDir: string): Promise<Held | Taken> => {
  const lockFile = join(dataDir, lockFileName)
  let database: DatabaseSync | "busy" = "busy"
  for (let attempt = 1; attempt <= lockAttemptsMax; attempt++) {
    database = lockOnce(lockFile)
    if (database !== "busy" || attempt === lockAttemptsMax) break
    await sleep(lockRetryBaseMs + (process.pid % 31) * 2 + attempt * 3)
  }
  if (database === "busy") return { _tag: "Taken", ownerPid: await waitForRecordedOwner(dataDir) }
  let released = false
  const pidFile = join(dataDir, pidFileName)
  const release = () => {
    if (released) return
    released = true
    try {
      // The pid file first: once the lock is free a new owner may write its own.
      rmSync(pidFile, { force: true })
    } finally {
      // Closing rolls the transaction back and the kernel drops the lock with SQLite's descriptor.
      database.close()
    }
  }
  try {
    // chmod works on the path and opens no descriptor (see the second rule above).
    chmodSync(lockFile, 0o600)
    // Written aside and renamed into place, so a reader never sees a half-written pid.
    const staging = `${pidFile}.${process.pid}`
    writeFileSync(staging, `${process.pid}\n`, { mode: 0o600 })
    renameSync(staging, pidFile)
  } catch (error) {
    release()
    throw error
  }
  return { _tag: "Held", release }
}

// ---------------------------------------------------------------------------------------------------------------
// The lock as the embedded PostgreSQL uses it: taken, or a failure that names the owner

const inUseError = (directory: string, ownerPid: number | undefined) => {
  const owner = ownerPid === undefined
    ? `another process (its pid is unknown: ${join(directory, pidFileName)} names no running process)`
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
export const acquire = (directory: string): Effect.Effect<Held, EmbeddedPostgresError> =>
  Effect.tryPromise({
    try: () => tryAcquire(directory),
    catch: (cause) =>
      new EmbeddedPostgresError({
        message: `cannot take the owner lock ${join(directory, lockFileName)}: ${describeCause(cause)}`,
        cause
      })
  }).pipe(
    Effect.flatMap((attempt) =>
      attempt._tag === "Held" ? Effect.succeed(attempt) : Effect.fail(inUseError(directory, attempt.ownerPid))
    )
  )
