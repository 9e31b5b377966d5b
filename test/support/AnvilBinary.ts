/**
 * Where npm put the anvil binary (`@foundry-rs/anvil-linux-amd64`, see Anvil.ts), and a free loopback port, without
 * vitest: the benchmark (test/bench/WithdrawalsPhase.ts) starts anvil outside the test runner (AnvilProcess.ts).
 */
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

const require = createRequire(import.meta.url)

export const anvilBinary = () => {
  const binary = join(dirname(require.resolve("@foundry-rs/anvil-linux-amd64/package.json")), "bin", "anvil")
  if (!existsSync(binary)) throw new Error(`no anvil binary at ${binary}: run npm ci`)
  return binary
}

/** A free loopback port, found synchronously so the app layer can be configured when the file is collected. */
export const freePortSync = (): number => {
  const probe = spawnSync(process.execPath, [
    "-e",
    "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{process.stdout.write(String(s.address().port));s.close()})"
  ], { encoding: "utf8" })
  const port = Number(probe.stdout)
  if (!Number.isSafeInteger(port) || port <= 0) throw new Error(`no free port: ${probe.stderr}`)
  return port
}
