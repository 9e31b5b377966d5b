/**
 * A kill -9 at any instant of sending leaves exactly one SOL transaction per withdrawal on chain (decisions.md
 * "Sending on real networks"; docs/sending.md; docs/sol.md): the service runs as a real child process with SOL_DEVNET
 * on the litesvm JSON-RPC front (test/support/SolanaRpcFront.ts, in this test's process) and `COFFER_FAULT=<step>`
 * (src/idempotency/CrashPoints.ts `sendCrashSteps`): killed inside the signing transaction before COMMIT, right after
 * COMMIT before the broadcast, and after the node took the bytes (the front puts them in a block at once) before
 * the withdrawal is CONFIRMING. Restarted without the fault, each withdrawal completes with one transaction on chain
 * paid by HOT, and each recipient is paid exactly once: the same signed bytes are broadcast again (the chain knows
 * them by their signature), never a second signature of the payload while the first may still land.
 */
import { assert, describe, it } from "@effect/vitest"
import { Keypair } from "@solana/web3.js"
import { Effect } from "effect"
import { createPrivateKey } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { afterAll, beforeAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { finalityDepth, type SolanaRpcFront, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"
import { cleanUpNow, freePort, killHard, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

const asset = "SOL_DEVNET_SOL"
const dataDir = makeDataDir("coffer-sol-send-crash-")
let front: SolanaRpcFront
let current: ServiceProcess | undefined
beforeAll(async () => {
  front = await startSolanaRpcFront()
})
afterAll(async () => {
  await cleanUpNow(current, dataDir)
  await front.close()
})

const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()

const tenantCall = async (service: ServiceProcess, method: string, target: string, body = "") => {
  const key = {
    keyId: JSON.parse(readFileSync(join(dataDir, "dev-tenant.json"), "utf8")).keyId,
    privateKey: createPrivateKey(readFileSync(join(dataDir, "dev-api-key.pem")))
  }
  const signed = signRequest({ ...key, target, body, nowSeconds: Math.floor(Date.now() / 1000) })
  const response = await fetch(`${service.publicUrl}${target}`, {
    method,
    headers: { ...(body.length > 0 ? { "content-type": "application/json" } : {}), ...signed },
    ...(method === "GET" ? {} : { body }),
    signal: AbortSignal.timeout(30_000)
  })
  const text = await response.text()
  return { status: response.status, text, json: text.length > 0 ? JSON.parse(text) : undefined }
}

const poll = async <A>(what: string, read: () => Promise<A | undefined>, timeoutMs = 60_000): Promise<A> => {
  const until = performance.now() + timeoutMs
  for (;;) {
    const value = await read().catch(() => undefined)
    if (value !== undefined) return value
    if (performance.now() > until) throw new Error(`${what}: not within ${timeoutMs} ms\n${current?.output() ?? ""}`)
    await sleep(200)
  }
}

describe("SOL sending across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, or after the broadcast: one transaction each on chain from HOT, each recipient paid once",
    () =>
      Effect.promise(async () => {
        const [port, opsPort] = [await freePort(), await freePort()]
        const env = { CHAIN_RPC_URLS: JSON.stringify({ SOL_DEVNET: front.url }) }
        const start = async (fault?: string) => {
          const service = spawnService({ dataDir, port, opsPort, env: fault === undefined ? env : { ...env, COFFER_FAULT: fault } })
          current = service
          while (!existsSync(join(dataDir, "ops-token"))) {
            if (service.child.exitCode !== null) throw new Error(`the service exited:\n${service.output()}`)
            await sleep(25)
          }
          await waitForHealth(service, opsToken(), 60_000)
          return service
        }

        let service = await start()
        const addresses = await (await fetch(`${service.opsUrl}/ops/platform/addresses`, {
          headers: { authorization: `Bearer ${opsToken()}` }
        })).json() as Array<{ networkKey: string; role: string; address: string }>
        const hot = addresses.find((entry) => entry.networkKey === "SOL_DEVNET" && entry.role === "HOT")!.address
        front.paySol(hot, 100_000_000_000n)
        // The watcher starts at the head it first sees: the deposit below is paid once it has scanned up to the head,
        // or it would be history to it.
        const headNow = front.headHeight()
        await poll("the watcher at the head", async () => {
          const health = await (await fetch(`${service.opsUrl}/ops/health`, { headers: { authorization: `Bearer ${opsToken()}` } })).json() as {
            chains: Record<string, { height: number; lagBlocks: number }>
          }
          const sol = health.chains["SOL_DEVNET"]
          return sol !== undefined && sol.height - sol.lagBlocks >= headNow ? true : undefined
        })
        // A payer funded by a real deposit, credited once its block is finalized.
        const payer = await tenantCall(service, "POST", "/v1/users/send-crash/deposit_address", JSON.stringify({ networkKey: "SOL_DEVNET" }))
        assert.strictEqual(payer.json.status, "READY", payer.text)
        front.paySol(payer.json.address, 5_000_000_000n)
        front.mine(finalityDepth + 1)
        await poll("the deposit credited", async () => {
          const items = (await tenantCall(service, "GET", `/v1/wallets/${payer.json.walletId}/assets`)).json as Array<any>
          return items.some((item) => item.assetId === asset && BigInt(item.available) > 0n) ? true : undefined
        })
        const fromHotBefore = front.signaturesFrom(hot).length
        const amount = 100_000_000n

        const withdrawals: Array<{ id: string; to: string }> = []
        for (const step of sendCrashSteps) {
          await killHard(service)
          service = await start(step)
          const to = Keypair.generate().publicKey.toBase58()
          const submitted = await tenantCall(service, "POST", "/v1/transactions", JSON.stringify({
            assetId: asset,
            source: { type: "WALLET", id: payer.json.walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: to } },
            amountRaw: amount.toString(),
            externalTxId: `send-crash-${step}`
          })).catch((error: unknown) => ({ status: 0, text: String(error), json: undefined }))
          const ended = await Promise.race([service.exited, sleep(60_000).then(() => undefined)])
          assert.strictEqual(ended?.signal, "SIGKILL", `COFFER_FAULT=${step} did not kill the service:\n${service.output()}`)
          await killHard(service)
          service = await start()
          // The request may have died with the process (202 never sent): the withdrawal is found by its external id.
          const id = submitted.status === 202
            ? submitted.json.withdrawalId as string
            : (await poll(`withdrawal of ${step}`, async () => {
              const found = await tenantCall(service, "GET", `/v1/transactions/external_tx_id/send-crash-${step}`)
              return found.status === 200 ? found.json.id as string : undefined
            }))
          withdrawals.push({ id, to })
          await poll(`withdrawal after a crash at ${step} CONFIRMING`, async () => {
            const got = await tenantCall(service, "GET", `/v1/transactions/${id}`)
            return got.json.status === "CONFIRMING" ? true : undefined
          })
        }

        front.mine(finalityDepth + 1)
        for (const { id, to } of withdrawals) {
          const done = await poll(`withdrawal ${id} COMPLETED`, async () => {
            const got = await tenantCall(service, "GET", `/v1/transactions/${id}`)
            return got.json.status === "COMPLETED" ? got.json : undefined
          })
          assert.strictEqual(front.lamports(to), amount, `${to} paid once`)
          assert.isNull(front.blockOf(done.txHash)?.err, "included and succeeded")
          assert.strictEqual(done.networkFeeRaw, "5000")
        }
        // Exactly one transaction per withdrawal left HOT, and nothing else.
        assert.strictEqual(front.signaturesFrom(hot).length - fromHotBefore, sendCrashSteps.length)
        await killHard(service)
      }),
    600_000
  )
})
