/**
 * The bundle `npm start` runs (src/Bundle.ts): built from src/main.ts with every input recorded, reused while no
 * input changed, built again otherwise, with each family's signing code off what a start loads. Built here into a
 * cache directory of its own; that the bundle serves (its migrations, catalog and signing chunks found) is held by
 * every other test of this directory, which start the service through `npm start`'s src/start.ts. A start whose
 * build fails says why and serves from the sources.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll } from "vitest"
import {
  type BundleManifest,
  buildBundle,
  freshBundle,
  manifestFile,
  preloadBundle
} from "../../src/Bundle.ts"
import { compileCacheDirectory, projectFile, projectRoot } from "../../src/ProjectRoot.ts"
import { sqlDirectory } from "../../src/db/Migrations.ts"
import { cleanUpNow, freePort, makeDataDir, spawnService, stopService, waitForHealth } from "./ServiceProcess.ts"

const cache = mkdtempSync(join(tmpdir(), "coffer-bundle-"))
const fallbackToken = "bundle-fallback-0123456789abcdef0123456789abcdef"
afterAll(() => rmSync(cache, { recursive: true, force: true }))

const readManifest = (): BundleManifest => JSON.parse(readFileSync(manifestFile(cache), "utf8"))
const writeManifest = (manifest: BundleManifest) => writeFileSync(manifestFile(cache), JSON.stringify(manifest))

const staticImport = /(?:^|\n)import\s(?:[^;"]*?\sfrom\s)?"\.\/([^"]+)"/g
const dynamicImport = /import\("\.\/([^"]+)"\)/g
const importsOf = (directory: string, chunk: string, pattern: RegExp) =>
  [...readFileSync(join(directory, chunk), "utf8").matchAll(pattern)].map((match) => match[1]!)

/** main.js, its dynamic imports (all made while starting, src/main.ts), and everything those import statically. */
const startChunks = (directory: string): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const visit = (chunk: string) => {
    if (seen.has(chunk)) return
    seen.add(chunk)
    importsOf(directory, chunk, staticImport).forEach(visit)
  }
  visit("main.js")
  importsOf(directory, "main.js", dynamicImport).forEach(visit)
  return [...seen]
}

/** The source files a chunk holds, from its source map (rolldown's own runtime chunk has none). */
const sourcesOf = (directory: string, chunk: string): ReadonlyArray<string> => {
  const map = join(directory, `${chunk}.map`)
  return existsSync(map)
    ? (JSON.parse(readFileSync(map, "utf8")) as { sources: Array<string> }).sources.map((source) => resolve(directory, source))
    : []
}

describe("the bundle npm start runs (src/Bundle.ts)", () => {
  it("from the sources, the project's files and caches are found from its directory", () => {
    assert.strictEqual(fileURLToPath(projectRoot), fileURLToPath(new URL("../../", import.meta.url)))
    assert.isTrue(existsSync(join(sqlDirectory, "0001_foundation.sql")))
    assert.isTrue(existsSync(projectFile("src/catalog/development.json")))
    // The compile cache stays in the project, not in Node's default under the shared /tmp (ProjectRoot.ts says why).
    assert.strictEqual(compileCacheDirectory, join(fileURLToPath(projectRoot), "node_modules/.cache/node-compile-cache"))
  })

  it.live("is built with its inputs recorded, reused while none changed, and not reused when one did", () =>
    Effect.gen(function*() {
      assert.isUndefined(freshBundle(cache), "nothing built yet")
      const entry = yield* Effect.promise(() => buildBundle(cache))
      assert.isTrue(existsSync(entry), "the entry was written")
      assert.strictEqual(freshBundle(cache)?.href, entry.href, "reused while nothing changed")

      const manifest = readManifest()
      const inputs = manifest.inputs.map(([path]) => path)
      for (const source of ["src/main.ts", "src/StorageLayer.ts", "src/App.ts", "src/signer/EvmSigning.ts"]) {
        assert.include(inputs, fileURLToPath(projectFile(source)), `${source} is an input`)
      }
      assert.isTrue(inputs.some((path) => path.includes("/node_modules/effect/")), "dependencies are inputs too")
      // The build tells ProjectRoot.ts the project's directory: the bundle lives elsewhere.
      const directory = dirname(fileURLToPath(entry))
      const code = readdirSync(directory).filter((file) => file.endsWith(".js"))
        .map((file) => readFileSync(join(directory, file), "utf8")).join("\n")
      assert.include(code, `new URL(${JSON.stringify(projectRoot.href)})`)

      // What a start of the bundle loads before its preload (StartupModules.test.ts holds the same for the sources):
      // main.js, the chunks it imports while starting (its dynamic imports) and all they import statically. Each
      // family's signing code and tronweb stay out, as from the sources.
      const started = startChunks(directory)
      const loaded = started.flatMap((chunk) => sourcesOf(directory, chunk))
      assert.isTrue(loaded.some((source) => source.endsWith("/src/App.ts")), "App is loaded at start")
      for (const lazy of ["/src/signer/EvmSigning.ts", "/src/signer/TronSigning.ts", "/src/signer/BtcSigning.ts"]) {
        assert.isFalse(loaded.some((source) => source.endsWith(lazy)), `${lazy} is not loaded at start`)
      }
      assert.isFalse(loaded.some((source) => source.includes("/node_modules/tronweb/")), "tronweb is not loaded at start")

      // Each way a build goes stale, then back.
      const [first, ...rest] = manifest.inputs
      writeManifest({ ...manifest, inputs: [[first![0], first![1], first![2] + 1], ...rest] })
      assert.isUndefined(freshBundle(cache), "an input modified since the build")
      writeManifest({ ...manifest, inputs: [[first![0], first![1] + 1, first![2]], ...rest] })
      assert.isUndefined(freshBundle(cache), "an input of another size")
      writeManifest({ ...manifest, inputs: [[join(cache, "gone.ts"), 1, 1], ...rest] })
      assert.isUndefined(freshBundle(cache), "an input gone")
      writeManifest({ ...manifest, node: "v0.0.0" })
      assert.isUndefined(freshBundle(cache), "another Node")
      writeManifest({ ...manifest, root: "file:///elsewhere/" })
      assert.isUndefined(freshBundle(cache), "built for another directory (a copied project)")
      writeManifest({ ...manifest, format: manifest.format + 1 })
      assert.isUndefined(freshBundle(cache), "another build format")
      writeManifest(manifest)
      assert.strictEqual(freshBundle(cache)?.href, entry.href)
      rmSync(entry)
      assert.isUndefined(freshBundle(cache), "its entry gone")

      // A new build keeps the one it replaced; the builds before that go once they are old enough that every start
      // running them has preloaded them (start.ts).
      const second = yield* Effect.promise(() => buildBundle(cache))
      const buildOf = (url: URL) => basename(dirname(fileURLToPath(url)))
      assert.strictEqual(readManifest().previous, manifest.directory)
      const third = yield* Effect.promise(() => buildBundle(cache))
      assert.strictEqual(readManifest().previous, buildOf(second))
      assert.isTrue(existsSync(join(cache, manifest.directory)), "a build of the last two minutes stays")
      const old = new Date(Date.now() - 10 * 60 * 1000)
      utimesSync(join(cache, manifest.directory), old, old)
      utimesSync(join(cache, buildOf(second)), old, old)
      const fourth = yield* Effect.promise(() => buildBundle(cache))
      assert.isFalse(existsSync(join(cache, manifest.directory)), "an old build, neither current nor replaced, removed")
      assert.isFalse(existsSync(join(cache, buildOf(second))), "so is the one two builds back")
      assert.isTrue(existsSync(third) && existsSync(fourth), "the current build and the one it replaced stay")
    }), { timeout: 120_000 })

  it.live("after a start, every chunk of its build is imported, and a chunk that fails is named", () =>
    Effect.gen(function*() {
      const directory = mkdtempSync(join(tmpdir(), "coffer-chunks-"))
      const marks = "__cofferPreloaded"
      writeFileSync(join(directory, "main.js"), `(globalThis.${marks} ??= []).push("main")\n`)
      writeFileSync(join(directory, "Signing-x1.js"), `(globalThis.${marks} ??= []).push("signing")\n`)
      writeFileSync(join(directory, "Broken-x2.js"), `throw new Error("this chunk is broken")\n`)
      writeFileSync(join(directory, "main.js.map"), "not a module")
      const failed = yield* Effect.promise(() => preloadBundle(pathToFileURL(join(directory, "main.js"))))
      assert.deepStrictEqual(failed, ["Broken-x2.js: this chunk is broken"])
      assert.sameMembers((globalThis as Record<string, unknown>)[marks] as Array<string>, ["main", "signing"])
      rmSync(directory, { recursive: true, force: true })
    }))

  it.live("a start whose build fails says why and serves from the sources", () =>
    Effect.gen(function*() {
      // A cache directory that cannot be one (a file stands where it should be), given through COFFER_BUNDLE_CACHE:
      // the project's own cache stays as it is, since the other process tests start services from it meanwhile
      // (moving it away for this test once took a bundle from under a starting service in a clean-clone run).
      const unusable = join(mkdtempSync(join(tmpdir(), "coffer-unusable-cache-")), "cache")
      writeFileSync(unusable, "not a directory")
      const dataDir = makeDataDir("coffer-bundle-fallback-")
      const [port, opsPort] = [yield* Effect.promise(freePort), yield* Effect.promise(freePort)]
      const service = spawnService({ dataDir, port, opsPort, env: { OPS_TOKEN: fallbackToken, COFFER_BUNDLE_CACHE: unusable } })
      yield* Effect.promise(() => waitForHealth(service, fallbackToken, 60_000)).pipe(
        Effect.ensuring(Effect.promise(() => stopService(service, 15_000))),
        Effect.ensuring(Effect.sync(() => {
          cleanUpNow(undefined, dataDir)
          rmSync(dirname(unusable), { recursive: true, force: true })
        }))
      )
      assert.include(service.output(), "coffer: cannot build the bundle, starting from the sources: ")
      assert.include(service.output(), unusable, "the reason names where it could not write")
    }), { timeout: 120_000 })
})
