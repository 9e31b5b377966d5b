/**
 * One way to start a local anvil node (AnvilBinary.ts) and wait until it answers, as plain Promises without vitest or
 * Effect: the tests' Anvil.ts builds its Effect version on it, and the maintainer's `npm run dev:anvil`
 * (test/dev/anvil-service.ts) and the benchmark (test/bench/WithdrawalsPhase.ts) use it as is. Each caller keeps its
 * own flags (port, host, chain id, mining, silence) and decides when the node is stopped.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { setTimeout as sleep } from "node:timers/promises"
import { anvilBinary } from "./AnvilBinary.ts"

/** anvil answers within a second on an idle machine; 15 s allows for a busy 2-core one. */
const readyTimeoutMs = 15_000
const readyPollIntervalMs = 100
/** A request to a node that accepted the connection but hangs is given up, and asked again, after this long. */
const requestTimeoutMs = 2_000

export interface AnvilProcessOptions {
  readonly port: number
  /** `--host`; absent, anvil listens on its own default (127.0.0.1). */
  readonly host?: string
  readonly chainId: number
  /**
   * "manual": blocks only when asked (`--no-mining`); "auto": each transaction mined as it arrives (anvil's default,
   * no flag); `blockTimeSeconds`: a block every that many seconds (`--block-time`).
   */
  readonly mining: "manual" | "auto" | { readonly blockTimeSeconds: number }
  /** `--silent`: no banner and no per-request log. */
  readonly silent: boolean
  /** Where anvil's stdout goes; its stderr is always this process's, so a failure to start is seen. */
  readonly stdout: "ignore" | "inherit"
}

export interface AnvilProcess {
  readonly url: string
  readonly child: ChildProcess
  /**
   * Resolves once the node answers eth_chainId with the chain id asked for; rejects if anvil ends (or cannot be
   * spawned) first, or has not answered within 15 s. Each call asks anew.
   */
  readonly ready: () => Promise<void>
  /** Sends `signal` (default SIGKILL) unless anvil has already ended. */
  readonly stop: (signal?: NodeJS.Signals) => void
}

/** One JSON-RPC call to the node; rejects on a transport failure or an error answer. */
export const anvilRequest = async (url: string, method: string, params: ReadonlyArray<unknown> = []): Promise<unknown> => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(requestTimeoutMs)
  })
  const answer = await response.json() as { result?: unknown; error?: { message?: string } }
  if (answer.error !== undefined) throw new Error(`${method}: ${answer.error.message ?? JSON.stringify(answer.error)}`)
  return answer.result
}

export const spawnAnvil = (options: AnvilProcessOptions): AnvilProcess => {
  const url = `http://${options.host ?? "127.0.0.1"}:${options.port}`
  const args = ["--port", String(options.port), "--chain-id", String(options.chainId)]
  if (options.host !== undefined) args.push("--host", options.host)
  if (options.mining === "manual") args.push("--no-mining")
  else if (options.mining !== "auto") args.push("--block-time", String(options.mining.blockTimeSeconds))
  if (options.silent) args.push("--silent")
  const child = spawn(anvilBinary(), args, { stdio: ["ignore", options.stdout, "inherit"] })
  // Without a listener a failed spawn would crash this process; ready() reports it instead.
  let spawnError: Error | undefined
  child.once("error", (error) => (spawnError = error))
  const ended = () => spawnError !== undefined || child.exitCode !== null || child.signalCode !== null

  const ready = async () => {
    const deadline = performance.now() + readyTimeoutMs
    for (;;) {
      if (ended()) {
        throw new Error(`anvil ended before it answered on ${url}: ${spawnError?.message ?? child.exitCode ?? child.signalCode}`)
      }
      const chainId = await anvilRequest(url, "eth_chainId").catch(() => undefined)
      if (chainId !== undefined && Number(chainId) === options.chainId) return
      if (performance.now() > deadline) throw new Error(`anvil did not answer with chain id ${options.chainId} on ${url} within ${readyTimeoutMs / 1000} s`)
      await sleep(readyPollIntervalMs)
    }
  }
  const stop = (signal: NodeJS.Signals = "SIGKILL") => {
    if (!ended()) child.kill(signal)
  }
  return { url, child, ready, stop }
}
