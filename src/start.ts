/**
 * `npm start`: runs the service from its bundle (Bundle.ts), built first when missing or stale. `COFFER_FROM_SOURCE=1`
 * runs src/main.ts as it is instead (profiles that name the sources: the bench's `--profile`), and so does a start
 * whose build failed, after saying why. The compile cache (ProjectRoot.ts) is on before anything else is loaded.
 */
import { enableCompileCache } from "node:module"
import { compileCacheDirectory } from "./ProjectRoot.ts"

enableCompileCache(compileCacheDirectory)

const bundled = async (): Promise<URL | undefined> => {
  if (process.env.COFFER_FROM_SOURCE === "1") return undefined
  try {
    const { buildBundle, freshBundle } = await import("./Bundle.ts")
    return freshBundle() ?? await buildBundle()
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error)
    process.stderr.write(`coffer: cannot build the bundle (${reason}); starting from the sources\n`)
    return undefined
  }
}

const entry = await bundled()
await import(entry?.href ?? "./main.ts")
