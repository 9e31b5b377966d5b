/**
 * `npm start`: runs the service from its bundle (Bundle.ts), built first when missing or stale. `COFFER_FROM_SOURCE=1`
 * runs src/main.ts as it is instead (profiles that name the sources: the bench's `--profile`), and so does a start
 * whose build failed, after saying why. The compile cache (ProjectRoot.ts) is on before anything else is loaded.
 */
import { enableCompileCache } from "node:module"
import { compileCacheDirectory } from "./ProjectRoot.ts"

enableCompileCache(compileCacheDirectory)

/**
 * When the rest of the bundle is loaded (`preloadBundle`): well after a restart is ready (within 3 s), so it does not
 * delay one, and well before a newer build may remove this one (Bundle.ts `keepBuildingMillis`). A launcher's
 * timer, outside the service and its clock.
 */
const preloadAfterMillis = 10_000

const bundleEntry = async (): Promise<URL | undefined> => {
  try {
    const { buildBundle, defaultCacheDirectory, freshBundle } = await import("./Bundle.ts")
    // COFFER_BUNDLE_CACHE: another directory for the builds (a read-only checkout, or a test that must not touch the
    // project's own cache while other starts use it).
    const cacheDirectory = process.env.COFFER_BUNDLE_CACHE ?? defaultCacheDirectory
    const fresh = freshBundle(cacheDirectory)
    if (fresh !== undefined) return fresh
    // A first start, or one after a source or dependency changed, is otherwise a few silent seconds.
    const started = performance.now()
    process.stderr.write("coffer: building the service's bundle (first start, or the sources or dependencies changed; a few seconds)...\n")
    const built = await buildBundle(cacheDirectory)
    process.stderr.write(`coffer: bundle built in ${((performance.now() - started) / 1000).toFixed(1)} s\n`)
    return built
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error)
    process.stderr.write(`coffer: cannot build the bundle, starting from the sources: ${reason}\n`)
    return undefined
  }
}

const entry = process.env.COFFER_FROM_SOURCE === "1" ? undefined : await bundleEntry()
await import(entry?.href ?? "./main.ts")
if (entry !== undefined) {
  setTimeout(async () => {
    const { preloadBundle } = await import("./Bundle.ts")
    for (const chunk of await preloadBundle(entry)) process.stderr.write(`coffer: the bundle's chunk ${chunk}\n`)
  }, preloadAfterMillis).unref()
}
