/**
 * The project's directory: the files the service reads beside its code (`sql/`, the catalogs) and its caches are
 * found from here, not from each module's own place. From the sources this module sits in `src/`; the bundle that
 * `npm start` runs (Bundle.ts) lives elsewhere, and its build defines `COFFER_PROJECT_ROOT`, the directory it was
 * built from.
 */
import { fileURLToPath } from "node:url"

declare const COFFER_PROJECT_ROOT: string | undefined

export const projectRoot: URL = typeof COFFER_PROJECT_ROOT === "string"
  ? new URL(COFFER_PROJECT_ROOT)
  : new URL("../", import.meta.url)

/** A path below the project's directory, e.g. `sql/`. */
export const projectFile = (path: string): URL => new URL(path, projectRoot)

/**
 * Node's compile cache (node:module `enableCompileCache`): in the project's node_modules/.cache, not Node's default
 * under the shared /tmp, where another local user able to write could plant compiled code for this process (an entry
 * is matched to its source by a checksum, which proves nothing of who wrote it).
 */
export const compileCacheDirectory = fileURLToPath(projectFile("node_modules/.cache/node-compile-cache"))
