/**
 * `npm run dev:anvil`: a real EVM chain on the desk. Starts a local anvil (chain id 11155111, the catalog's
 * ETH_SEPOLIA, a block every 2 s) and the service wired to it (`CHAIN_RPC_URLS`), on `DATA_DIR` (default
 * `./.data-anvil`, apart from `npm start`'s `./.data`: the chain and the service's books belong together), then funds
 * the platform HOT address with 1,000 ETH by a real transfer from anvil's first dev account (AnvilDevAccount.ts), so
 * withdrawals can be sent and `npm run ledger:check -- --chain` explains HOT's balance (a `platform_receipts` row; an
 * `anvil_setBalance` would leave it UNEXPLAINED). ETH_SEPOLIA deposits and withdrawals then happen on anvil; every
 * other network stays on the simulated chain. Deposits: `npm run dev:anvil:send` (anvil-send.ts).
 *
 * It owns what it starts: the ports are checked first (a taken one is named, with what to do, before anything
 * starts: anvil would otherwise fail on it, or this script would talk to another anvil); when the service or anvil
 * ends, the other is stopped and this script ends with the service's status; Ctrl-C (or SIGTERM) stops the service,
 * then anvil, then this script.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { parseScriptArgs } from "../../src/ScriptArgs.ts"
import { spawnAnvil } from "../support/AnvilProcess.ts"
import { devAccount, sendFromDevAccount } from "./AnvilDevAccount.ts"

const usage = `Usage: npm run dev:anvil

Starts a local anvil (chain id 11155111, a block every 2 s) and the service with ETH_SEPOLIA on it, then funds the
platform HOT address with 1,000 ETH from anvil's dev account ${devAccount}. Ctrl-C stops both.
Every other network stays on the simulated chain. Send a deposit with
  npm run dev:anvil:send -- --to <deposit address> --eth 0.05

Environment (no flags):
  ANVIL_PORT   anvil's port on 127.0.0.1 (default 8545)
  DATA_DIR     the service's data directory (default ./.data-anvil)
  PORT, OPS_PORT, HOST, OPS_HOST   the service's listeners, as for npm start (default 127.0.0.1:8080 and :8081)
`
parseScriptArgs(usage, {})

const anvilPort = Number(process.env.ANVIL_PORT ?? 8545)
const dataDir = process.env.DATA_DIR ?? "./.data-anvil"
const host = process.env.HOST ?? "127.0.0.1"
const port = Number(process.env.PORT ?? 8080)
const opsHost = process.env.OPS_HOST ?? "127.0.0.1"
const opsPort = Number(process.env.OPS_PORT ?? 8081)
const opsDialHost = opsHost === "0.0.0.0" || opsHost === "" ? "127.0.0.1" : opsHost
/** HOT funding waits this long for the service to answer; its death ends the wait earlier. */
const fundingWaitMs = 120_000
/** A graceful stop of the service (drain, PostgreSQL) takes a few seconds; then it is killed. */
const stopGraceMs = 20_000

const say = (line: string) => process.stderr.write(`dev:anvil: ${line}\n`)

/** Whether something already listens there: a listen that fails with EADDRINUSE (any other error is not ours). */
const isTaken = (listenHost: string, listenPort: number) =>
  new Promise<boolean>((resolve) => {
    const probe = createServer()
    probe.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "EADDRINUSE"))
    probe.listen(listenPort, listenHost, () => probe.close(() => resolve(false)))
  })

for (
  const [what, variable, listenHost, listenPort] of [
    ["anvil", "ANVIL_PORT", "127.0.0.1", anvilPort],
    ["the service's API", "PORT", host, port],
    ["the service's operator listener", "OPS_PORT", opsHost, opsPort]
  ] as const
) {
  if (await isTaken(listenHost, listenPort)) {
    say(
      `${listenHost}:${listenPort} (${what}, ${variable}) is already in use: is npm start or another dev:anvil running? ` +
        `Stop it, or choose free ports, e.g. ANVIL_PORT=8546 PORT=8090 OPS_PORT=8091 npm run dev:anvil`
    )
    process.exit(1)
  }
}

const stopping = new AbortController()
let service: ChildProcess | undefined
const anvil = spawnAnvil({ port: anvilPort, chainId: 11155111, mining: { blockTimeSeconds: 2 }, silent: true, stdout: "inherit" })
const { url } = anvil

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once("exit", () => resolve()))

/** Stops the service (SIGTERM, then SIGKILL after the grace), then anvil, then ends with `code`. Once. */
const shutdown = async (code: number) => {
  if (stopping.signal.aborted) return
  stopping.abort()
  if (service !== undefined) {
    service.kill("SIGTERM")
    const stopped = await Promise.race([exited(service).then(() => true), sleep(stopGraceMs, false)])
    if (!stopped) {
      say(`the service did not stop within ${stopGraceMs / 1000} s of SIGTERM; killing it`)
      service.kill("SIGKILL")
      await exited(service)
    }
  }
  anvil.stop("SIGTERM")
  await exited(anvil.child)
  process.exit(code)
}
// Ctrl-C reaches the whole foreground group (the service and anvil too); this waits for both to end.
process.on("SIGINT", () => void shutdown(130))
process.on("SIGTERM", () => void shutdown(143))
anvil.child.once("exit", (code, signal) => {
  if (stopping.signal.aborted) return
  say(`anvil ended (${signal ?? `status ${code}`}); stopping the service`)
  void shutdown(1)
})

try {
  await anvil.ready()
} catch (error) {
  say(`anvil did not start: ${error instanceof Error ? error.message : String(error)}`)
  await shutdown(1)
}

service = spawn(process.execPath, ["src/start.ts"], {
  stdio: "inherit",
  env: {
    ...process.env,
    DATA_DIR: dataDir,
    HOST: host,
    PORT: String(port),
    OPS_HOST: opsHost,
    OPS_PORT: String(opsPort),
    CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: url })
  }
})
service.once("exit", (code, signal) => {
  if (stopping.signal.aborted) return
  say(`the service ended (${signal ?? `status ${code}`}); stopping anvil`)
  void shutdown(code === null || code === 0 ? 1 : code)
})

/** HOT's ETH_SEPOLIA address, once the service answers on its operator listener; undefined when stopping. */
const hotAddress = async (): Promise<string | undefined> => {
  const tokenFile = join(dataDir, "ops-token")
  const deadline = performance.now() + fundingWaitMs
  while (!stopping.signal.aborted && performance.now() < deadline) {
    await sleep(200)
    if (!existsSync(tokenFile)) continue
    const headers = { authorization: `Bearer ${readFileSync(tokenFile, "utf8").trim()}` }
    const response = await fetch(`http://${opsDialHost}:${opsPort}/ops/platform/addresses`, { headers, signal: stopping.signal })
      .catch(() => undefined)
    if (response?.status !== 200) continue
    const addresses = await response.json() as Array<{ networkKey: string; role: string; address: string }>
    return addresses.find((entry) => entry.networkKey === "ETH_SEPOLIA" && entry.role === "HOT")?.address ?? ""
  }
  if (!stopping.signal.aborted) say(`the service did not answer within ${fundingWaitMs / 1000} s; HOT not funded`)
  return undefined
}

// Once the service answers, fund its HOT address on anvil (the operator's job on a real network).
const hot = await hotAddress()
if (hot === "") say("no ETH_SEPOLIA HOT address; not funded")
if (hot !== undefined && hot !== "") {
  try {
    const sent = await sendFromDevAccount(url, hot, 1000n * 10n ** 18n, stopping.signal)
    say(
      `anvil on ${url} (chain id 11155111, a block every 2 s); ETH_SEPOLIA HOT ${hot} funded with 1000 ETH from ` +
        `${devAccount} (transaction ${sent.hash}, block ${sent.blockNumber}). Deposit: npm run dev:anvil:send -- ` +
        `--to <deposit address> --eth 0.05`
    )
  } catch (error) {
    if (!stopping.signal.aborted) say(`funding HOT failed: ${error instanceof Error ? error.message : String(error)}`)
  }
}
