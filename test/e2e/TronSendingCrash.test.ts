/**
 * A kill -9 at any instant of sending leaves exactly one transaction per withdrawal on TRON too (decisions.md
 * "Sending on real networks"; docs/tron.md): the service runs as a real child process with TRON_NILE on the
 * java-tron HTTP API stand-in (test/support/TronNode.ts, served from this test process) and
 * `COFFER_FAULT=<step>` (src/idempotency/CrashPoints.ts `sendCrashSteps`): inside the signing transaction before
 * COMMIT, right after COMMIT before the broadcast, and after the node accepted the bytes but before the withdrawal is
 * CONFIRMING. Restarted without the fault, each withdrawal completes with one transaction on chain and the recipient
 * is paid exactly once. TRON has no nonces: what prevents a second payment is that the stored bytes (one txID) are
 * given again, never re-signed while they could still be included; a node that already has them answers
 * DUP_TRANSACTION_ERROR, which is success.
 */
import { assert, describe, it } from "@effect/vitest"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect } from "effect"
import { createPrivateKey } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { TronWeb } from "tronweb"
import { afterAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { startTronNode } from "../support/TronNode.ts"
import { cleanUpNow, freePort, killHard, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

const asset = "TRON_NILE_TRX"
const node = await startTronNode({ tokens: [{ contract: "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf", supply: 10n ** 15n }] })
const dataDir = makeDataDir("coffer-tron-send-crash-")
let current: ServiceProcess | undefined
afterAll(async () => {
  await cleanUpNow(current, dataDir)
  await node.stop()
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

describe("sending on TRON across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, or after the broadcast: one transaction each on chain, each recipient paid once",
    () =>
      Effect.promise(async () => {
        const [port, opsPort] = [await freePort(), await freePort()]
        const env = { CHAIN_RPC_URLS: JSON.stringify({ TRON_NILE: node.url }) }
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
        const hot = addresses.find((entry) => entry.networkKey === "TRON_NILE" && entry.role === "HOT")!.address
        await node.fund(hot, 1_000_000_000n)
        // The watcher starts at the head it first sees: the deposit must come after that, or it is history.
        const head = node.head().number
        await poll("the watcher at the head", async () => {
          const health = await (await fetch(`${service.opsUrl}/ops/health`, {
            headers: { authorization: `Bearer ${opsToken()}` }
          })).json() as { chains: Record<string, { height: number }> }
          return BigInt(health.chains["TRON_NILE"]?.height ?? -1) >= head ? true : undefined
        })
        // A payer funded by a real deposit, credited once its block is solidified.
        const payer = await tenantCall(service, "POST", "/v1/users/send-crash/deposit_address", JSON.stringify({ networkKey: "TRON_NILE" }))
        assert.strictEqual(payer.json.status, "READY", payer.text)
        await node.fund(payer.json.address, 500_000_000n)
        node.mine(19)
        await poll("the deposit credited", async () => {
          const items = (await tenantCall(service, "GET", `/v1/wallets/${payer.json.walletId}/assets`)).json as Array<any>
          return items.some((item) => item.assetId === asset && BigInt(item.available) > 0n) ? true : undefined
        })
        const sentBefore = node.sentBy(hot).length
        const amount = 10_000_000n

        const withdrawals: Array<{ id: string; to: string }> = []
        for (const step of sendCrashSteps) {
          await killHard(service)
          service = await start(step)
          const to = TronWeb.address.fromPrivateKey(bytesToHex(secp256k1.utils.randomSecretKey())) as string
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
          // The node took the bytes before the crash: mined while the service is down, the restart's broadcast of
          // the same bytes is a duplicate, which must read as accepted.
          if (step === "send-after-broadcast") node.mine(1)
          service = await start()
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

        node.mine(1)
        node.mine(19)
        for (const { id, to } of withdrawals) {
          const done = await poll(`withdrawal ${id} COMPLETED`, async () => {
            const got = await tenantCall(service, "GET", `/v1/transactions/${id}`)
            return got.json.status === "COMPLETED" ? got.json : undefined
          })
          assert.strictEqual(node.trxBalance(to), amount, `${to} paid once`)
          assert.include(node.sentBy(hot), done.txHash)
        }
        // Exactly one transaction per withdrawal left HOT.
        assert.strictEqual(node.sentBy(hot).length - sentBefore, sendCrashSteps.length)
        await killHard(service)
      }),
    600_000
  )
})
