/**
 * Launches the service: every listener and worker lives in the app layer.
 *
 * Two process settings come first, before anything is loaded:
 * - libuv's thread pool verifies request signatures (src/auth/Ed25519.ts). Measured on 2 cores (docs/benchmarks.md):
 *   with the default four threads signed throughput was 2.8k req/s, with two 3.3k, with one 5.0k: extra threads
 *   only compete with the event loop, which serves every request. Nothing a tenant can make long runs on that thread
 *   (issue 36): password hashes have a worker thread of their own (users/PasswordHash.ts) and webhook names are
 *   resolved by an asynchronous DNS client (webhooks/AddressPolicy.ts), since anything queued there delays every
 *   tenant's signature check. `UV_THREADPOOL_SIZE` in the environment overrides this.
 * - the compile cache halves the import time of a restart, which the 3 s readiness promise after a crash depends on.
 *   Where it lives and why: ProjectRoot.ts. Where node_modules is read-only the cache is off and the start slower;
 *   `NODE_COMPILE_CACHE` in the environment names another place (Node enables it before this line runs). It is
 *   written once the start is done (below), not only at a normal exit (README, the fifteenth measurement).
 *   `npm start` (start.ts) enables it before this module, so the bundle's first files are cached too.
 * Modules come from their own paths (`@effect/platform-node/NodeRuntime`, not the package index, which loads every
 * Node adapter): measured 0.2 s less of a restart's 2 s.
 *
 * Storage starts first and the rest of the service (App.ts, about 0.8 s of module loading; viem's client and the
 * other node clients load only for networks with a node, chains/NodeClients.ts) is imported once the
 * embedded postmaster is spawned: loading blocks the event loop, but PostgreSQL's crash recovery runs in its own
 * process meanwhile. Measured on 2 cores: 0.5 s of a restart's 2.8 s overlapped.
 */
import { enableCompileCache, flushCompileCache } from "node:module"
import { compileCacheDirectory } from "./ProjectRoot.ts"

process.env.UV_THREADPOOL_SIZE ??= "1"
enableCompileCache(compileCacheDirectory)

const NodeRuntime = await import("@effect/platform-node/NodeRuntime")
const { Cause, Deferred, Effect, Fiber, Layer, Runtime } = await import("effect")
const { StorageUnderway } = await import("./db/Database.ts")
const { StorageLayer } = await import("./StorageLayer.ts")
// LOG_FORMAT and LOG_LEVEL (observability/Logging.ts) hold from the first line, storage's included.
const { LoggingLayer } = await import("./observability/Logging.ts")

const main = Effect.gen(function*() {
  const underway = yield* Deferred.make<void>()
  const storage = yield* Layer.build(StorageLayer).pipe(
    Effect.provideService(StorageUnderway, () => Deferred.doneUnsafe(underway, Effect.void)),
    Effect.forkScoped
  )
  // A storage failure before the spawn ends the wait too (and the start, at the join).
  yield* Effect.raceFirst(Deferred.await(underway), Fiber.await(storage))
  const { ServiceOnStorage } = yield* Effect.promise(() => import("./App.ts"))
  const context = yield* Fiber.join(storage)
  const slowSpansMillis = Number(process.env.COFFER_SLOW_SPANS_MS ?? "")
  const { slowSpansLayer } = yield* Effect.promise(() => import("./observability/SlowSpans.ts"))
  // The OTLP trace export when configured (observability/Tracing.ts), around the whole service.
  const { TracingLayer } = yield* Effect.promise(() => import("./observability/Tracing.ts"))
  // Node writes the compile cache when the process exits normally: a service that only ever ends by kill -9 would
  // never write it, and every restart would compile everything again. Written once the start is done instead.
  const service = ServiceOnStorage.pipe(
    Layer.provide(Layer.succeedContext(context)),
    Layer.tap(() => Effect.sync(flushCompileCache))
  )
  const traced = Number.isFinite(slowSpansMillis) && slowSpansMillis > 0
    ? service.pipe(Layer.provide(slowSpansLayer(slowSpansMillis)))
    : service
  return yield* Layer.launch(traced.pipe(Layer.provide(TracingLayer)))
}).pipe(Effect.scoped)

const { knownStartFailure } = await import("./StartFailure.ts")

/** A known start failure, already printed as its one line: exits 1 without the runner's report of the cause. */
class StartFailed extends Error {
  override readonly [Runtime.errorReported] = false
  override readonly [Runtime.errorExitCode] = 1
}

main.pipe(
  Effect.provide(LoggingLayer),
  Effect.catchCause((cause) => {
    const line = Cause.hasInterruptsOnly(cause) ? undefined : knownStartFailure(cause)
    if (line === undefined) return Effect.failCause<unknown>(cause)
    process.stderr.write(`coffer: ${line}\n`)
    return Effect.fail<unknown>(new StartFailed(line))
  }),
  NodeRuntime.runMain
)
