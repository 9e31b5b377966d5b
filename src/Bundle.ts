/**
 * The bundle `npm start` runs (src/start.ts): the service's code and its dependencies in a few files, built by
 * rolldown from src/main.ts the first time and again whenever one of its inputs changed.
 *
 * Why: a start from the sources resolves, reads and links about a thousand modules before it can serve, and a
 * restart after a crash has to answer within 3 s (README "Two commands"; figures in its sixteenth measurement).
 *
 * Freshness: the build records every input module's path, size and modification time (`manifest.json`); a start
 * checks them all (about a thousand `stat` calls) and builds again on any difference, so an edited source or an
 * updated dependency never runs stale. A failed build is reported and the start goes on from the sources.
 *
 * Where: `node_modules/.cache/coffer/bundle-<build>/`, beside the compile cache and as trusted as the rest of
 * `node_modules`. Its modules resolve the packages kept outside it (the PostgreSQL binaries' platform package) from
 * there. Files the service reads beside its code are found through ProjectRoot.ts, to which the build gives the
 * project's directory; a build made for another directory (a copied project) is not reused. A build keeps the one it
 * replaced and removes the older ones (`keepBuildingMillis`), so the cache holds two or three (about 25 MB each,
 * source maps included).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { projectFile, projectRoot } from "./ProjectRoot.ts"

/** Raised when the layout of a build changes (an option below), so older builds are not reused. */
const buildFormat = 1
export const defaultCacheDirectory = fileURLToPath(projectFile("node_modules/.cache/coffer"))
/**
 * At a build, every other build but the one it replaced is removed if it was made this much before the new one (by
 * the directories' modification times, so no clock of this process is read; a build younger than that may be one
 * another start is still writing). A service started from a removed build has long since imported all of its
 * chunks (start.ts preloads them 10 s after a start); only two builds within those 10 s of a start could take its
 * directory away before, and its first signature of a family would then fail.
 */
const keepBuildingMillis = 2 * 60 * 1000

export interface BundleManifest {
  readonly format: number
  readonly node: string
  readonly root: string
  /** The build's directory, in the cache directory. */
  readonly directory: string
  /** The build it replaced, kept until the next build. */
  readonly previous: string | undefined
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
 * so two starts building at once each end with a whole build) and removes the older builds (`keepBuildingMillis`).
 * Answers the new entry.
 */
export const buildBundle = async (cacheDirectory: string = defaultCacheDirectory): Promise<URL> => {
  const { rolldown } = await import("rolldown")
  const previous = readManifest(cacheDirectory)?.directory
  mkdirSync(cacheDirectory, { recursive: true })
  // A name of its own even when several starts build at once.
  const directory = basename(mkdtempSync(join(cacheDirectory, "bundle-")))
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
    const manifest: BundleManifest = {
      format: buildFormat,
      node: process.version,
      root: projectRoot.href,
      directory,
      previous,
      inputs
    }
    const temporary = `${manifestFile(cacheDirectory)}.${process.pid}`
    writeFileSync(temporary, JSON.stringify(manifest))
    renameSync(temporary, manifestFile(cacheDirectory))
  } finally {
    await build.close()
  }
  const builtAt = statSync(join(cacheDirectory, directory)).mtimeMs
  for (const entry of readdirSync(cacheDirectory)) {
    const path = join(cacheDirectory, entry)
    const madeAt = statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? builtAt
    const replacedLongAgo = entry !== directory && entry !== previous && madeAt < builtAt - keepBuildingMillis
    if (entry.startsWith("bundle-") && replacedLongAgo) {
      rmSync(path, { recursive: true, force: true })
    }
  }
  return pathToFileURL(join(cacheDirectory, directory, "main.js"))
}

/**
 * Imports every chunk of the build `entry` belongs to, after a start: those the start did not need are each family's
 * signing code (imported at its first signature, signer/Signer.ts) and the node clients of networks without a node.
 * Afterwards the service needs nothing more from the build's directory, so a newer build may remove it
 * (`buildBundle`). Answers the chunks that failed to load, with why.
 */
export const preloadBundle = async (entry: URL): Promise<ReadonlyArray<string>> => {
  const directory = dirname(fileURLToPath(entry))
  const failed: Array<string> = []
  for (const file of readdirSync(directory).filter((name) => name.endsWith(".js")).sort()) {
    await import(pathToFileURL(join(directory, file)).href).catch((error: unknown) => {
      failed.push(`${file}: ${error instanceof Error ? error.message : String(error)}`)
    })
  }
  return failed
}
