/**
 * `npm run dev:anvil` (test/dev/anvil-service.ts, README "A real EVM chain on your desk", issue 37): a taken port is
 * named with what to do before anything starts; the documented setup funds HOT with a real transfer, so `npm run
 * ledger:check -- --chain` passes on it; a deposit sent with `npm run dev:anvil:send` is credited; when its service
 * dies (here: a second dev:anvil on a DATA_DIR in use) it stops its anvil and ends at once; Ctrl-C to the process
 * group stops the service, its PostgreSQL and anvil.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { rmSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { freePort, isAlive, makeDataDir, postmasterPid, repositoryRoot, waitUntilDead } from "./ServiceProcess.ts"

interface Run {
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
}

/** Environment of a developer's shell that would point the script elsewhere (vitest sets DATABASE_URL). */
const cleanEnv = (extra: Record<string, string>): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !["DATABASE_URL", "TEST_DATABASE_URL", "CHAIN_RPC_URLS", "OPS_TOKEN"].includes(name)) {
      env[name] = value
    }
  }
  return { ...env, ...extra }
}

const runScript = (script: string, args: ReadonlyArray<string>, env: Record<string, string>): Run => {
  // Its own process group, as a terminal's foreground job: Ctrl-C is a SIGINT to the group.
  const child = spawn(process.execPath, [script, ...args], { cwd: repositoryRoot, env: cleanEnv(env), detached: true })
  let text = ""
  child.stdout.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
  child.stderr.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, output: () => text, exited }
}

const listen = (port: number) =>
  new Promise<Server>((resolve) => {
    const server = createServer()
    server.listen(port, "127.0.0.1", () => resolve(server))
  })

const waitFor = async (run: Run, text: string, timeoutMs: number) => {
  const deadline = performance.now() + timeoutMs
  while (!run.output().includes(text)) {
    if (run.child.exitCode !== null) throw new Error(`dev:anvil ended before "${text}":\n${run.output()}`)
    if (performance.now() > deadline) throw new Error(`no "${text}" within ${timeoutMs} ms:\n${run.output()}`)
    await sleep(200)
  }
}

const groupAlive = (pgid: number) => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}

const within = <A>(promise: Promise<A>, ms: number) => Promise.race([promise, sleep(ms).then(() => "timeout" as const)])

describe("npm run dev:anvil", () => {
  it("a taken port (anvil's or the service's): one line naming it and what to do, exit 1, nothing started", async () => {
    const dataDir = makeDataDir("coffer-devanvil-taken-")
    const [anvilPort, port, opsPort] = [await freePort(), await freePort(), await freePort()]
    for (const [variable, taken] of [["ANVIL_PORT", anvilPort], ["OPS_PORT", opsPort]] as const) {
      const server = await listen(taken)
      try {
        const run = runScript("test/dev/anvil-service.ts", [], {
          DATA_DIR: dataDir,
          ANVIL_PORT: String(anvilPort),
          PORT: String(port),
          OPS_PORT: String(opsPort)
        })
        assert.strictEqual(await within(run.exited, 20_000), 1, run.output())
        assert.include(run.output(), `dev:anvil: 127.0.0.1:${taken} (`)
        assert.include(run.output(), `${variable}) is already in use: is npm start or another dev:anvil running?`)
        assert.notMatch(run.output(), /^\s+at /m, "no stack trace")
        assert.isFalse(groupAlive(run.child.pid!), "nothing of it still runs")
      } finally {
        server.close()
      }
    }
    rmSync(dataDir, { recursive: true, force: true })
  }, 60_000)

  it("funds HOT by a real transfer (ledger:check --chain passes), sends a deposit with dev:anvil:send, ends with its service, and Ctrl-C stops everything", async () => {
    const dataDir = makeDataDir("coffer-devanvil-")
    const [anvilPort, port, opsPort] = [await freePort(), await freePort(), await freePort()]
    const env = { DATA_DIR: dataDir, ANVIL_PORT: String(anvilPort), PORT: String(port), OPS_PORT: String(opsPort) }
    const run = runScript("test/dev/anvil-service.ts", [], env)
    try {
      await waitFor(run, "funded with 1000 ETH", 120_000)
      const chainEnv = cleanEnv({ DATA_DIR: dataDir, CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: `http://127.0.0.1:${anvilPort}` }) })
      // The watcher records the funding transfer once its block is read: a few seconds at a block every 2 s.
      let check = spawnSync(process.execPath, ["src/ledger/ledger-check.ts", "--chain"], { cwd: repositoryRoot, env: chainEnv, encoding: "utf8" })
      for (let attempt = 0; attempt < 10 && check.status !== 0; attempt++) {
        await sleep(2_000)
        check = spawnSync(process.execPath, ["src/ledger/ledger-check.ts", "--chain"], { cwd: repositoryRoot, env: chainEnv, encoding: "utf8" })
      }
      assert.strictEqual(check.status, 0, check.stdout + check.stderr)
      assert.match(check.stdout, /HOT {2}expected 1000000000000000000000 {2}on chain 1000000000000000000000 {2}difference 0 {2}ok/)

      // The README's deposit: a deposit address through the CLI, then dev:anvil:send.
      const callEnv = cleanEnv({ DATA_DIR: dataDir, PORT: String(port), OPS_PORT: String(opsPort) })
      const address = spawnSync(process.execPath, ["src/ops/cli.ts", "POST", "/v1/users/alice/deposit_address", `{"networkKey":"ETH_SEPOLIA"}`], {
        cwd: repositoryRoot,
        env: callEnv,
        encoding: "utf8"
      })
      assert.strictEqual(address.status, 0, address.stderr)
      const to = JSON.parse(address.stdout).address as string
      const sent = spawnSync(process.execPath, ["test/dev/anvil-send.ts", "--to", to, "--eth", "0.05"], {
        cwd: repositoryRoot,
        env: cleanEnv({ ANVIL_PORT: String(anvilPort) }),
        encoding: "utf8"
      })
      assert.strictEqual(sent.status, 0, sent.stderr)
      assert.match(sent.stdout, new RegExp(`^sent 50000000000000000 wei from 0x[0-9a-f]{40} to ${to}: transaction 0x[0-9a-f]{64} in block \\d+`))

      // A second dev:anvil on the same DATA_DIR: its service refuses the directory, so it stops its anvil and ends.
      const [anvilPort2, port2, opsPort2] = [await freePort(), await freePort(), await freePort()]
      const second = runScript("test/dev/anvil-service.ts", [], {
        DATA_DIR: dataDir,
        ANVIL_PORT: String(anvilPort2),
        PORT: String(port2),
        OPS_PORT: String(opsPort2)
      })
      assert.strictEqual(await within(second.exited, 60_000), 1, second.output())
      assert.include(second.output(), `DATA_DIR ${dataDir} is in use`)
      assert.include(second.output(), "dev:anvil: the service ended (status 1); stopping anvil")
      assert.isFalse(groupAlive(second.child.pid!), "its anvil was stopped too")

      // Ctrl-C: a SIGINT to the foreground group.
      const postmaster = postmasterPid(dataDir)
      assert.isDefined(postmaster)
      process.kill(-run.child.pid!, "SIGINT")
      assert.strictEqual(await within(run.exited, 40_000), 130, run.output())
      assert.isFalse(groupAlive(run.child.pid!), "the service and anvil ended")
      assert.isTrue(await waitUntilDead(postmaster!, 10_000), "the service's PostgreSQL ended")
    } finally {
      if (groupAlive(run.child.pid!)) process.kill(-run.child.pid!, "SIGKILL")
      const postmaster = postmasterPid(dataDir)
      if (postmaster !== undefined && isAlive(postmaster)) process.kill(postmaster, "SIGKILL")
      rmSync(join(dataDir), { recursive: true, force: true })
    }
  }, 240_000)
})
