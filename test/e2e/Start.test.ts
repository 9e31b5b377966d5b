/**
 * `npm start` as an operator runs it (operator-interface.md, "Running the service"): `node src/start.ts` (the
 * bundle, src/Bundle.ts) with no DATABASE_URL, so the embedded PostgreSQL under DATA_DIR; ready when GET /ops/health
 * answers 200; the first development start provisions a tenant and key a signed call works with; a second start on the same DATA_DIR
 * keeps all data, even after node and PostgreSQL were both killed with -9; SIGTERM stops both. A start on a DATA_DIR
 * whose service still runs fails, naming the directory and the owner's pid, and leaves that service serving.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { FetchHttpClient } from "effect/http"
import { createPrivateKey } from "node:crypto"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { afterAll } from "vitest"
import { freshBundle } from "../../src/Bundle.ts"
import { makeOpsClient } from "../../src/client/OpsClient.ts"
import { makeTenantClient } from "../../src/client/TenantClient.ts"
import {
  cleanUpNow,
  freePort,
  isAlive,
  killHard,
  makeDataDir,
  postmasterPid,
  type ServiceProcess,
  spawnService,
  stopService,
  waitForHealth,
  waitUntilDead
} from "./ServiceProcess.ts"

/** First start: initdb, migrations, provisioning; generous for a loaded 2-core machine. */
const firstStartTimeoutMs = 60_000
/**
 * A restart after a crash must come up by itself, in bounded time. The 3 s readiness promise is a speed target, so
 * `npm run bench` measures it (line `restart after kill -9`; 2.2-2.5 s on a quiet machine): as a timed assertion
 * here it failed CI runs at 3.0-3.5 s on a busy machine. This bound only catches a restart that hangs or waits on
 * something it should not (the zombie wait of LeftoverServer.ts took it to 3.3 s before).
 */
const restartHealthyWithinMs = 15_000
const stopTimeoutMs = 15_000
/** A start on a DATA_DIR in use fails before it opens anything: node's start-up plus the lock attempt. */
const refusedStartTimeoutMs = 20_000

const dataDir = makeDataDir("coffer-e2e-")
let current: ServiceProcess | undefined
afterAll(() => cleanUpNow(current, dataDir))

const promise = <A>(run: () => Promise<A>) => Effect.promise(run)

const modeOf = (file: string) => statSync(file).mode & 0o777

/** The token the service generated on its first start; it exists before the listeners open. */
const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()

const waitForFile = (file: string, service: ServiceProcess) =>
  promise(async () => {
    const deadline = performance.now() + firstStartTimeoutMs
    while (!existsSync(file)) {
      if (service.child.exitCode !== null) throw new Error(`the service exited:\n${service.output()}`)
      if (performance.now() > deadline) throw new Error(`${file} never appeared:\n${service.output()}`)
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
  })

const clients = (service: ServiceProcess) =>
  Effect.gen(function*() {
    const { keyId, tenantId } = JSON.parse(readFileSync(join(dataDir, "dev-tenant.json"), "utf8"))
    const privateKey = createPrivateKey(readFileSync(join(dataDir, "dev-api-key.pem")))
    const tenant = yield* makeTenantClient({ baseUrl: service.publicUrl, keyId, privateKey })
    const ops = yield* makeOpsClient({ baseUrl: service.opsUrl, token: Redacted.make(opsToken()) })
    return { tenant, ops, tenantId: tenantId as string }
  })

describe("npm start (operator-interface.md, Running the service)", () => {
  it.live(
    "first start provisions the dev tenant; a second start while it runs fails and leaves it serving; a restart after kill -9 of node and PostgreSQL becomes healthy (the 3 s promise is a bench line) and keeps the data; SIGTERM stops both",
    () =>
      Effect.gen(function*() {
        const [port, opsPort] = [yield* promise(freePort), yield* promise(freePort)]
        // Node's own variable puts the compile cache where this test can look (main.ts otherwise uses node_modules).
        const compileCache = join(dataDir, "compile-cache")
        const start = () => (current = spawnService({ dataDir, port, opsPort, env: { NODE_COMPILE_CACHE: compileCache } }))

        // First start: embedded defaults, development provisioning.
        const first = start()
        yield* waitForFile(join(dataDir, "ops-token"), first)
        yield* promise(() => waitForHealth(first, opsToken(), firstStartTimeoutMs))
        // It ran from the bundle (src/Bundle.ts), built or reused, not from the sources after a failed build.
        assert.notInclude(first.output(), "cannot build the bundle")
        assert.isDefined(freshBundle(), "a current bundle")
        for (const file of ["dev-tenant.json", "dev-api-key.pem", "ops-token"]) {
          assert.strictEqual(modeOf(join(dataDir, file)), 0o600, `${file} is private`)
        }
        const before = yield* clients(first)
        const networks = yield* before.tenant.reference.networks()
        assert.isAbove(networks.length, 0)
        const created = yield* before.tenant.users.create({ payload: { customerRefId: "e2e-alice" } })

        // A second service on the same DATA_DIR (other ports) while the first runs: it fails at start.
        const firstPostmaster = postmasterPid(dataDir)
        const intruder = spawnService({ dataDir, port: yield* promise(freePort), opsPort: yield* promise(freePort) })
        const refused = yield* promise(() =>
          Promise.race([intruder.exited, sleep(refusedStartTimeoutMs, undefined, { ref: false })]).finally(() =>
            stopService(intruder, stopTimeoutMs)
          )
        )
        assert.isDefined(refused, `the second start was still running after ${refusedStartTimeoutMs} ms`)
        assert.strictEqual(refused!.code, 1, intruder.output())
        assert.include(intruder.output(), `DATA_DIR ${dataDir} is in use by another process, pid ${first.child.pid}`)
        // One line that says what to do, not a stack trace (issue 37).
        assert.match(intruder.output(), /^coffer: DATA_DIR .* Stop pid \d+ first/m)
        assert.notMatch(intruder.output(), /^\s+at /m, "no stack trace")
        // ... and the first one did not notice.
        assert.isNull(first.child.exitCode, `the first service exited:\n${first.output()}`)
        assert.strictEqual(postmasterPid(dataDir), firstPostmaster)
        assert.isTrue(isAlive(firstPostmaster!), "the first service's PostgreSQL still runs")
        yield* promise(() => waitForHealth(first, opsToken(), stopTimeoutMs))
        const stillThere = yield* before.tenant.users.get({ params: { customerRefId: "e2e-alice" } })
        assert.strictEqual(stillThere.user.id, created.id)

        // A power cut: node and the postmaster die at once, nothing is shut down.
        const postmaster = postmasterPid(dataDir)
        assert.isDefined(postmaster)
        yield* promise(() => killHard(first))
        assert.isFalse(isAlive(postmaster!), "the postmaster is dead")
        // The compile cache was written once the start was done (main.ts), not left for a normal exit that a service
        // killed with -9 never has: the restart below loads its modules from it (the bundle's 50-odd files; none
        // without the write).
        const cached = readdirSync(compileCache, { recursive: true }).length
        assert.isAbove(cached, 30, "compile cache entries written by a start that was then killed with -9")
        const provisioned = readFileSync(join(dataDir, "dev-tenant.json"), "utf8")

        // Second start on the same DATA_DIR.
        const second = start()
        const readyMs = yield* promise(() => waitForHealth(second, opsToken(), firstStartTimeoutMs))
        assert.isBelow(readyMs, restartHealthyWithinMs, `healthy ${Math.round(readyMs)} ms after the restart's spawn`)
        assert.strictEqual(readFileSync(join(dataDir, "dev-tenant.json"), "utf8"), provisioned, "provisioned once")
        const after = yield* clients(second)
        const tenant = yield* after.ops.tenants.get({ params: { tenantId: after.tenantId } })
        assert.strictEqual(tenant.name, "dev")
        const user = yield* after.tenant.users.get({ params: { customerRefId: "e2e-alice" } })
        assert.strictEqual(user.user.id, created.id)

        // SIGTERM: a graceful stop that takes PostgreSQL with it.
        const secondPostmaster = postmasterPid(dataDir)
        assert.isDefined(secondPostmaster)
        const ended = yield* promise(() => stopService(second, stopTimeoutMs))
        assert.notStrictEqual(ended.signal, "SIGKILL", `stopped within ${stopTimeoutMs} ms of SIGTERM`)
        assert.isTrue(yield* promise(() => waitUntilDead(secondPostmaster!, 5_000)), "the postmaster is gone")
        // The stop says nothing a user would have to look up (the cluster's "No healthy runners available" did).
        assert.notInclude(second.output(), "No healthy runners available")
        assert.notMatch(second.output(), /WARN|ERROR/)
      }).pipe(Effect.provide(FetchHttpClient.layer)),
    90_000
  )

  it.live("a port in use: one line naming the address and what to do, exit 1, no stack trace; the data directory is left free", () =>
    Effect.gen(function*() {
      const dataDir = makeDataDir("coffer-e2e-port-")
      const taken = createServer()
      const port = yield* Effect.promise(freePort)
      yield* Effect.promise(() => new Promise<void>((resolve) => taken.listen(port, "127.0.0.1", resolve)))
      let service: ServiceProcess | undefined
      try {
        service = spawnService({ dataDir, port, opsPort: yield* Effect.promise(freePort) })
        const ended = yield* Effect.promise(() => service!.exited)
        assert.strictEqual(ended.code, 1, service.output())
        assert.include(
          service.output(),
          `coffer: cannot listen on 127.0.0.1:${port}: the port is in use (another npm start, npm run dev:anvil or another program). Stop that one, or choose other ports with PORT and OPS_PORT`
        )
        assert.notMatch(service.output(), /^\s+at /m, "no stack trace")
        assert.notInclude(service.output(), "No healthy runners available")
        // Its PostgreSQL was stopped with it.
        const postmaster = postmasterPid(dataDir)
        if (postmaster !== undefined) assert.isTrue(yield* Effect.promise(() => waitUntilDead(postmaster, 5_000)))
      } finally {
        cleanUpNow(service, dataDir)
        taken.close()
      }
    }), 90_000)
})
