/**
 * What a start loads (README restart promise: healthy within 3 s of a kill -9, most of it module loading). The
 * service's modules are imported in a node process of their own, as `node src/main.ts` imports them, with a load
 * hook that lists every module; viem's client (its package index, about a quarter of a second) and tronweb must not
 * be among them: chains/NodeClients.ts imports each family's node client only for a network that has a node. Nor
 * must the EVM, BTC and TRON signing code: the signer imports it at the first signature of its family.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { repositoryRoot } from "./ServiceProcess.ts"

const run = promisify(execFile)

const listLoadedModules = `
import { registerHooks } from "node:module"
const loaded = []
registerHooks({ load(url, context, nextLoad) { loaded.push(url); return nextLoad(url, context) } })
await import("./src/App.ts")
process.stdout.write(JSON.stringify(loaded))
`

describe("the modules a start loads", () => {
  it("the service's modules load without viem's client, tronweb or the signing code", async () => {
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", listLoadedModules], {
      cwd: repositoryRoot,
      maxBuffer: 64 * 1024 * 1024
    })
    const loaded: ReadonlyArray<string> = JSON.parse(stdout)
    // The list is real: the signer's viem/accounts and the app's own modules are there.
    assert.isTrue(loaded.some((url) => url.includes("/node_modules/viem/_esm/accounts/")), "viem/accounts is loaded")
    assert.isTrue(loaded.some((url) => url.endsWith("/src/App.ts")))
    assert.deepStrictEqual(loaded.filter((url) => url.endsWith("/node_modules/viem/_esm/index.js")), [])
    assert.deepStrictEqual(loaded.filter((url) => url.includes("/node_modules/viem/_esm/clients/")), [])
    assert.deepStrictEqual(loaded.filter((url) => url.includes("/node_modules/tronweb/")), [])
    assert.deepStrictEqual(loaded.filter((url) => url.includes("/src/chains/evm/EvmChainClient.ts")), [])
    // The signer imports each family's signing code at its first signature (signer/Signer.ts).
    for (const family of ["Evm", "Btc", "Tron"]) {
      assert.deepStrictEqual(loaded.filter((url) => url.endsWith(`/src/signer/${family}Signing.ts`)), [], family)
    }
    assert.deepStrictEqual(loaded.filter((url) => url.includes("/node_modules/ecpair/")), [])
  }, 60_000)
})
