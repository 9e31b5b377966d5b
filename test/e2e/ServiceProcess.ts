/**
 * The service as an operator runs it: `node src/start.ts` (`npm start`) in a child process, on a throw-away
 * DATA_DIR and free loopback ports, with the embedded PostgreSQL. Used by the start test (Start.test.ts) and the
 * benchmark (test/bench/bench.ts). Plain promises: the benchmark runs outside Effect and vitest.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { fileURLToPath } from "node:url"

export const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url))

/** Environment a developer's shell might carry that would point the child elsewhere (vitest sets DATABASE_URL). */
const inheritedVariablesDropped = [
  "DATABASE_URL",
  "TEST_DATABASE_URL",
  "HOST",
  "PORT",
  "OPS_HOST",
  "OPS_PORT",
  "DATA_DIR",
  "OPS_TOKEN",
  "SERVICE_ENV",
  "TRUSTED_PROXIES",
  "SIGNER_MNEMONIC",
  "NODE_OPTIONS"
]

// Enough for every line of a test's run: each request writes an access line (observability/), and tests count lines
// the service logged minutes earlier (a withdrawal's `signed`, a shard takeover), which a short window lost.
const logLinesMax = 50_000
const pollIntervalMs = 25

/** A DATA_DIR the `postgres` account can enter when we are root (mkdtemp makes it 0700). */
export const makeDataDir = (prefix: string): string => {
  const directory = mkdtempSync(join(tmpdir(), prefix))
  chmodSync(directory, 0o755)
  return directory
}

/** A free loopback port: the embedded PostgreSQL's own helper. */
export { freePort } from "../../src/db/postgres/Postmaster.ts"

export interface ServiceProcess {
  readonly child: ChildProcess
  readonly dataDir: string
  readonly publicUrl: string
  readonly opsUrl: string
  /** When the child was spawned (performance.now()). */
  readonly spawnedAt: number
  /** Settles when the child has exited. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
  /** The last lines the service printed, for failure messages. */
  readonly output: () => string
}

export interface SpawnOptions {
  readonly dataDir: string
  readonly port: number
  readonly opsPort: number
  /** Extra environment (OPS_TOKEN, SERVICE_ENV, ...). */
  readonly env?: Record<string, string>
  /** Extra node flags (`--cpu-prof`, ...). */
  readonly nodeArgs?: ReadonlyArray<string>
  /** Runs src/main.ts as it is rather than the bundle (`COFFER_FROM_SOURCE`): profiles that name the sources. */
  readonly fromSource?: boolean
}

/** Starts `node src/start.ts` (`npm start`: the bundle, src/Bundle.ts) with this process's Node (24 under npm). */
export const spawnService = (options: SpawnOptions): ServiceProcess => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !inheritedVariablesDropped.includes(name)) env[name] = value
  }
  Object.assign(env, {
    DATA_DIR: options.dataDir,
    HOST: "127.0.0.1",
    PORT: String(options.port),
    OPS_HOST: "127.0.0.1",
    OPS_PORT: String(options.opsPort),
    ...(options.fromSource === true ? { COFFER_FROM_SOURCE: "1" } : {}),
    ...options.env
  })
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), "src/start.ts"], {
    cwd: repositoryRoot,
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  const collect = (chunk: Buffer) => {
    lines.push(...chunk.toString("utf8").split("\n").filter((line) => line.length > 0))
    if (lines.length > logLinesMax) lines.splice(0, lines.length - logLinesMax)
  }
  child.stdout?.on("data", collect)
  child.stderr?.on("data", collect)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolvePromise) =>
    child.once("exit", (code, signal) => resolvePromise({ code, signal }))
  )
  return {
    child,
    dataDir: options.dataDir,
    publicUrl: `http://127.0.0.1:${options.port}`,
    opsUrl: `http://127.0.0.1:${options.opsPort}`,
    spawnedAt: performance.now(),
    exited,
    output: () => lines.join("\n")
  }
}

const hasExited = (service: ServiceProcess) => service.child.exitCode !== null || service.child.signalCode !== null

/**
 * Polls `GET /ops/health` until it answers 200; resolves with the milliseconds since the spawn. Fails early, with
 * the service's output, when the process exits.
 */
export const waitForHealth = async (service: ServiceProcess, token: string, timeoutMs: number): Promise<number> => {
  const deadline = performance.now() + timeoutMs
  // What the last probe got: a failure says whether the service never listened or listened and did not answer.
  let last = "no probe yet"
  for (;;) {
    if (hasExited(service)) {
      throw new Error(`the service exited before it was healthy:\n${service.output()}`)
    }
    try {
      const response = await fetch(`${service.opsUrl}/ops/health`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(1_000)
      })
      await response.arrayBuffer()
      if (response.status === 200) return performance.now() - service.spawnedAt
      last = `HTTP ${response.status}`
    } catch (error) {
      // Not listening yet, or no answer within the probe's second.
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : ""
      last = `${error instanceof Error ? error.message : String(error)}${cause}`
    }
    if (performance.now() > deadline) {
      throw new Error(`GET /ops/health did not answer 200 within ${timeoutMs} ms (last probe: ${last}):\n${service.output()}`)
    }
    await sleep(pollIntervalMs)
  }
}

/** The postmaster's pid, from the first line of `<DATA_DIR>/pg/postmaster.pid` (absent when it is stopped). */
export const postmasterPid = (dataDir: string): number | undefined => {
  const file = join(dataDir, "pg", "postmaster.pid")
  if (!existsSync(file)) return undefined
  const pid = Number(readFileSync(file, "utf8").split("\n")[0])
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined
}

/** Alive and not a zombie (a killed orphan stays `Z` until pid 1 reaps it). */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return false
  }
}

export const waitUntilDead = async (pid: number, timeoutMs: number): Promise<boolean> => {
  const deadline = performance.now() + timeoutMs
  while (isAlive(pid)) {
    if (performance.now() > deadline) return false
    await sleep(pollIntervalMs)
  }
  return true
}

const signal = (pid: number, name: NodeJS.Signals) => {
  try {
    process.kill(pid, name)
  } catch {
    // Already gone.
  }
}

/** `kill -9` of node and of the postmaster: a power cut, as far as both processes can tell. */
export const killHard = async (service: ServiceProcess): Promise<void> => {
  const postmaster = postmasterPid(service.dataDir)
  if (service.child.pid !== undefined) signal(service.child.pid, "SIGKILL")
  if (postmaster !== undefined) signal(postmaster, "SIGKILL")
  await service.exited
  if (postmaster !== undefined) await waitUntilDead(postmaster, 5_000)
}

/**
 * SIGTERM, then after `timeoutMs` SIGKILL (and the postmaster, which a killed node leaves behind). Never throws:
 * it is also the cleanup path. Resolves with how the child ended.
 */
export const stopService = async (service: ServiceProcess, timeoutMs: number) => {
  if (!hasExited(service)) service.child.kill("SIGTERM")
  const ended = await Promise.race([service.exited, sleep(timeoutMs).then(() => undefined)])
  if (ended !== undefined) return ended
  await killHard(service)
  return service.exited
}

/** Whatever is left of a run: the child, an orphaned postmaster, the directory. Synchronous, for `exit` handlers. */
export const cleanUpNow = (service: ServiceProcess | undefined, dataDir: string | undefined): void => {
  if (service !== undefined && !hasExited(service) && service.child.pid !== undefined) {
    signal(service.child.pid, "SIGKILL")
  }
  if (dataDir === undefined) return
  const postmaster = postmasterPid(dataDir)
  if (postmaster !== undefined && isAlive(postmaster)) signal(postmaster, "SIGKILL")
  try {
    rmSync(dataDir, { recursive: true, force: true })
  } catch {
    // A postmaster still exiting may hold files for a moment; the temp directory is cleaned by the OS later.
  }
}

/** Seconds of CPU (user + system) a process has used, from /proc (Linux); 0 when it is gone. */
export const cpuSeconds = (pid: number): number => {
  try {
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15 (clock ticks).
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
    const ticksPerSecond = 100
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
  } catch {
    return 0
  }
}

/** The postmaster and its backends, as they are now. */
export const postgresPids = (dataDir: string): ReadonlyArray<number> => {
  const postmaster = postmasterPid(dataDir)
  if (postmaster === undefined) return []
  const children: Array<number> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const parent = Number(readFileSync(`/proc/${entry}/stat`, "utf8").replace(/^.*\) /, "").split(" ")[1])
      if (parent === postmaster) children.push(Number(entry))
    } catch {
      // Exited meanwhile.
    }
  }
  return [postmaster, ...children]
}
