/**
 * The bundle `npm start` runs (src/start.ts): the service's code and its dependencies in a few files, built by
 * rolldown from src/main.ts the first time and again whenever one of its inputs changed.
 *
 * Why: a start from the sources resolves, reads and links about a thousand modules before it can serve, and a restart
 * after a crash has to answer within 3 s (README "Running"). With Node's compile cache warm in both cases, importing
 * the service's modules took 1.1-1.2 s from the sources and 0.41-0.44 s from the bundle (README, the sixteenth
 * measurement).
 *
 * Freshness: the build records every input module's path, size and modification time (`manifest.json`); a start
 * checks them all (about a thousand `stat` calls) and builds again on any difference, so an edited source or an
 * updated dependency never runs stale. A failed build is reported and the start goes on from the sources.
 *
 * Where: `node_modules/.cache/coffer/bundle-<build>/`, beside the compile cache and as trusted as the rest of
 * `node_modules`. Its modules resolve the packages kept outside it (the PostgreSQL binaries' platform package) from
 * there. Files the service reads beside its code are found through ProjectRoot.ts, to which the build gives the
 * project's directory; a build made for another directory (a copied project) is not reused.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { projectFile, projectRoot } from "./ProjectRoot.ts"

/** Raised when the layout of a build changes (an option below), so older builds are not reused. */
const buildFormat = 1
export const defaultCacheDirectory = fileURLToPath(projectFile("node_modules/.cache/coffer"))
/** A service started from an older build imports its signing chunks at its first signature (signer/Signer.ts). */
const keepReplacedMillis = 24 * 60 * 60 * 1000

export interface BundleManifest {
  readonly format: number
  readonly node: string
  readonly root: string
  /** The build's directory, in the cache directory. */
  readonly directory: string
  /** Every input module: path, size and modification time in ms. */
  readonly inputs: ReadonlyArray<readonly [string, number, number]>
}

export const manifestFile = (cacheDirectory: string): string => join(cacheDirectory, "manifest.json")

const readManifest = (cacheDirectory: string): BundleManifest | undefined => {
  try {
    return JSON.parse(readFileSync(manifestFile(cacheDirectory), "utf8")) as BundleManifest
  } catch {
    return undefined
  }
}

const unchanged = ([path, size, mtimeMs]: readonly [string, number, number]): boolean => {
  const stats = statSync(path, { throwIfNoEntry: false })
  return stats !== undefined && stats.size === size && stats.mtimeMs === mtimeMs
}

/** The entry of the current build, if there is one, made by this Node for this project, none of its inputs changed. */
export const freshBundle = (cacheDirectory: string = defaultCacheDirectory): URL | undefined => {
  const manifest = readManifest(cacheDirectory)
  if (
    manifest === undefined || manifest.format !== buildFormat || manifest.node !== process.version ||
    manifest.root !== projectRoot.href || !manifest.inputs.every(unchanged)
  ) return undefined
  const entry = join(cacheDirectory, manifest.directory, "main.js")
  return statSync(entry, { throwIfNoEntry: false }) === undefined ? undefined : pathToFileURL(entry)
}

/**
 * Builds src/main.ts into a new directory, then points the manifest at it (written to a temporary file and renamed,
 * so two starts building at once each end with a whole build) and removes the builds replaced more than a day ago.
 * Answers the new entry.
 */
export const buildBundle = async (cacheDirectory: string = defaultCacheDirectory): Promise<URL> => {
  const { rolldown } = await import("rolldown")
  const started = Date.now()
  const directory = `bundle-${started.toString(36)}-${process.pid}`
  const build = await rolldown({
    input: fileURLToPath(projectFile("src/main.ts")),
    platform: "node",
    transform: { define: { COFFER_PROJECT_ROOT: JSON.stringify(projectRoot.href) } },
    // Warnings about the dependencies' own code (eval in a polyfill, circular imports) are theirs, not the start's.
    logLevel: "silent"
  })
  try {
    const output = await build.write({
      dir: join(cacheDirectory, directory),
      format: "esm",
      entryFileNames: "main.js",
      // For a maintainer's `node --enable-source-maps`: stack traces that name the sources.
      sourcemap: true
    })
    const ids = new Set(output.output.flatMap((file) => file.type === "chunk" ? file.moduleIds : []))
    const inputs = [...ids].filter((id) => id.startsWith("/")).sort().map((path) => {
      const stats = statSync(path)
      return [path, stats.size, stats.mtimeMs] as const
    })
    const manifest: BundleManifest = { format: buildFormat, node: process.version, root: projectRoot.href, directory, inputs }
    mkdirSync(cacheDirectory, { recursive: true })
    const temporary = `${manifestFile(cacheDirectory)}.${process.pid}`
    writeFileSync(temporary, JSON.stringify(manifest))
    renameSync(temporary, manifestFile(cacheDirectory))
  } finally {
    await build.close()
  }
  for (const entry of readdirSync(cacheDirectory)) {
    // A build goes only once no start can still be running it unnoticed: a day after it was replaced. Replacing
    // node_modules under a service started from the sources has the same hazard.
    const path = join(cacheDirectory, entry)
    if (entry.startsWith("bundle-") && entry !== directory && olderThan(path, started - keepReplacedMillis)) {
      rmSync(path, { recursive: true, force: true })
    }
  }
  return pathToFileURL(join(cacheDirectory, directory, "main.js"))
}

const olderThan = (path: string, millis: number): boolean =>
  (statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? millis) < millis
