/**
 * Recovery: a server a previous run left on the cluster. Linux only: it is identified through /proc.
 */
import { existsSync, readFileSync, realpathSync } from "node:fs"
import { readFile, rm } from "node:fs/promises"
import { join, resolve } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Effect } from "effect"
import { describeCause, EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"
import * as OwnerLock from "./OwnerLock.ts"
import { stopTimeoutMs } from "./Postmaster.ts"

/** A postmaster whose parent died stays a zombie until pid 1 reaps it, which took about a second. */
const zombieWaitMs = 5_000
/** Line 7 of postmaster.pid: the key and id of the server's System V shared memory segment (PostgreSQL 16). */
const segmentLine = 6
const pollIntervalMs = 50

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

/**
 * PostgreSQL's own test for a dead server's leftovers (its shared memory interlock): whether any process, an old
 * backend that outlived its postmaster, is still attached to the segment postmaster.pid names. `undefined` when
 * that cannot be read, so the caller keeps to the slower, always safe wait.
 */
const segmentAttached = (pidFileText: string): boolean | undefined => {
  const id = pidFileText.split("\n")[segmentLine]?.trim().split(/\s+/)[1]
  if (id === undefined || !/^\d+$/.test(id)) return undefined
  let table: string
  try {
    table = readFileSync("/proc/sysvipc/shm", "utf8")
  } catch {
    return undefined
  }
  // Columns: key shmid perms size cpid lpid nattch ...
  for (const line of table.split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/)
    if (fields[1] === id) return fields[6] !== "0"
  }
  return false
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
export const stopLeftoverServer = async (pgdata: string): Promise<void> => {
  const pidFile = join(pgdata, "postmaster.pid")
  if (!existsSync(pidFile)) return
  const pidFileText = await readFile(pidFile, "utf8")
  const pid = Number(pidFileText.split("\n")[0])
  // Malformed content is PostgreSQL's to report ("bogus data in lock file").
  if (!Number.isSafeInteger(pid) || pid <= 0) return
  const state = processState(pid)
  if (state === "gone") return // PostgreSQL removes a stale file by itself.
  if (state === "zombie") {
    // A zombie is dead: no port, no files, only its pid until pid 1 reaps it (about a second here, most of a
    // restart's readiness promise). PostgreSQL takes a live pid for a running server, so the file goes; but not while
    // a backend that outlived the postmaster is still attached to its shared memory, which is what PostgreSQL's own
    // interlock guards against and the removal would bypass.
    await waitWhile(() => processState(pid) === "zombie" && segmentAttached(pidFileText) !== false, zombieWaitMs)
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

/**
 * Stops a server a previous run left on `<dataDir>/pg`, if any (`start` in EmbeddedPostgres.ts does this first). Fails without
 * touching anything while a process owns `dataDir`: its server is no leftover. A missing `dataDir` holds nothing.
 */
export const stopLeftover = (dataDir: string): Effect.Effect<void, EmbeddedPostgresError> => {
  const directory = resolve(dataDir)
  return Effect.suspend(() =>
    existsSync(directory) ? Effect.acquireUseRelease(
      OwnerLock.acquire(directory),
      () =>
        Effect.tryPromise({
          try: () => stopLeftoverServer(join(directory, "pg")),
          catch: (cause) =>
            cause instanceof EmbeddedPostgresError ? cause : new EmbeddedPostgresError({
              message: `cannot stop the PostgreSQL left running under ${directory}: ${describeCause(cause)}`,
              cause
            })
        }),
      (lock) => Effect.sync(lock.release)
    ) : Effect.void
  )
}

