/**
 * `npm run dev:anvil`: a real EVM chain on the desk. Starts a local anvil (chain id 11155111, the catalog's
 * ETH_SEPOLIA, a block every 2 s) and the service wired to it (`CHAIN_RPC_URLS`), on `DATA_DIR` (default
 * `./.data-anvil`, apart from `npm start`'s `./.data`: the chain and the service's books belong together), then gives
 * the platform HOT address 1,000 ETH so withdrawals can be sent. ETH_SEPOLIA deposits and withdrawals then happen on
 * anvil; every other network stays on the simulated chain. Ctrl-C stops both.
 *
 * anvil's dev accounts (mnemonic `test test ... junk`) are unlocked: send a deposit with e.g.
 * `cast send --unlocked --from 0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266 <deposit address> --value 1ether` or any
 * wallet pointed at the printed URL.
 */
import { spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { anvilRequest, spawnAnvil } from "../support/AnvilProcess.ts"

const anvilPort = Number(process.env["ANVIL_PORT"] ?? 8545)
const dataDir = process.env["DATA_DIR"] ?? "./.data-anvil"
const opsPort = Number(process.env["OPS_PORT"] ?? 8081)

const anvil = spawnAnvil({ port: anvilPort, chainId: 11155111, mining: { blockTimeSeconds: 2 }, silent: true, stdout: "inherit" })
const { url } = anvil
await anvil.ready().catch((error: unknown) => {
  anvil.stop("SIGTERM")
  throw error
})
const service = spawn(process.execPath, ["src/start.ts"], {
  stdio: "inherit",
  env: { ...process.env, DATA_DIR: dataDir, OPS_PORT: String(opsPort), CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: url }) }
})
const stop = () => {
  service.kill("SIGTERM")
  service.once("exit", () => anvil.stop("SIGTERM"))
}
process.on("SIGINT", stop)
process.on("SIGTERM", stop)
service.once("exit", (code) => {
  anvil.stop("SIGTERM")
  process.exitCode = code ?? 1
})

// Once the service answers, fund its HOT address on anvil (the operator's job on a real network).
const tokenFile = join(dataDir, "ops-token")
for (let attempt = 0; attempt < 600; attempt++) {
  await sleep(200)
  if (!existsSync(tokenFile)) continue
  const headers = { authorization: `Bearer ${readFileSync(tokenFile, "utf8").trim()}` }
  const response = await fetch(`http://127.0.0.1:${opsPort}/ops/platform/addresses`, { headers }).catch(() => undefined)
  if (response?.status !== 200) continue
  const addresses = await response.json() as Array<{ networkKey: string; role: string; address: string }>
  const hot = addresses.find((entry) => entry.networkKey === "ETH_SEPOLIA" && entry.role === "HOT")
  if (hot === undefined) break
  await anvilRequest(url, "anvil_setBalance", [hot.address, `0x${(1000n * 10n ** 18n).toString(16)}`])
  process.stderr.write(`\nanvil on ${url} (chain id 11155111, a block every 2 s); ETH_SEPOLIA HOT ${hot.address} holds 1000 ETH\n`)
  break
}
