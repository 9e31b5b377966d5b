/**
 * A kill -9 at any instant of sending leaves exactly one transaction per withdrawal on chain (decisions.md "Sending
 * on real networks"; docs/sending.md): the service runs as a real child process on anvil (ETH_SEPOLIA, chain id
 * 11155111) with `COFFER_FAULT=<step>` (src/idempotency/CrashPoints.ts `sendCrashSteps`), so it kills itself with
 * SIGKILL when a withdrawal's sending reaches that step: inside the signing transaction before COMMIT, right after
 * COMMIT before the broadcast, and after the node accepted the bytes but before the withdrawal is CONFIRMING. Its
 * PostgreSQL is killed too (a power cut). Restarted without the fault, each withdrawal completes with one
 * transaction on chain, the nonces stay consecutive, and the recipient is paid exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createPrivateKey } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { type Hex, parseEther } from "viem"
import { afterAll, beforeAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { anvilAccounts, startAnvil } from "../support/Anvil.ts"
import { cleanUpNow, freePort, killHard, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const asset = "ETH_SEPOLIA_ETH"
const dataDir = makeDataDir("coffer-send-crash-")
let current: ServiceProcess | undefined
beforeAll(() => Effect.runPromise(anvil.ready))
afterAll(() => cleanUpNow(current, dataDir))

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

describe("sending across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, or after the broadcast: one transaction each on chain, consecutive nonces, each recipient paid once",
    () =>
      Effect.promise(async () => {
        const [port, opsPort] = [await freePort(), await freePort()]
        const env = { CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: anvil.url }) }
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
        const hot = addresses.find((entry) => entry.networkKey === "ETH_SEPOLIA" && entry.role === "HOT")!.address as Hex
        await node.setBalance({ address: hot, value: parseEther("100") })
        // The watcher starts at the head it first sees (docs/deposits.md): the deposit must come after that, or it is
        // history to it and never credited.
        const startHead = await node.getBlockNumber()
        await poll("the watcher at the head", async () => {
          const health = await (await fetch(`${service.opsUrl}/ops/health`, {
            headers: { authorization: `Bearer ${opsToken()}` }
          })).json() as { chains: Record<string, { height: number }> }
          return BigInt(health.chains["ETH_SEPOLIA"]?.height ?? -1) >= startHead ? true : undefined
        })
        // A payer funded by a real deposit, credited after 12 confirmations.
        const payer = await tenantCall(service, "POST", "/v1/users/send-crash/deposit_address", JSON.stringify({ networkKey: "ETH_SEPOLIA" }))
        assert.strictEqual(payer.json.status, "READY", payer.text)
        await node.sendTransaction({ account: anvilAccounts[0], to: payer.json.address, value: parseEther("5"), chain: null })
        await node.mine({ blocks: 13 })
        await poll("the deposit credited", async () => {
          const items = (await tenantCall(service, "GET", `/v1/wallets/${payer.json.walletId}/assets`)).json as Array<any>
          return items.some((item) => item.assetId === asset && BigInt(item.available) > 0n) ? true : undefined
        })
        const nonceBefore = await node.getTransactionCount({ address: hot })

        const withdrawals: Array<{ id: string; to: Hex }> = []
        for (const [index, step] of sendCrashSteps.entries()) {
          await killHard(service)
          service = await start(step)
          const to = `0x${(0xc0ffee00 + index).toString(16).padStart(40, "0")}` as Hex
          const submitted = await tenantCall(service, "POST", "/v1/transactions", JSON.stringify({
            assetId: asset,
            source: { type: "WALLET", id: payer.json.walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: to } },
            amountRaw: parseEther("0.1").toString(),
            externalTxId: `send-crash-${step}`
          })).catch((error: unknown) => ({ status: 0, text: String(error), json: undefined }))
          const ended = await Promise.race([service.exited, sleep(60_000).then(() => undefined)])
          assert.strictEqual(ended?.signal, "SIGKILL", `COFFER_FAULT=${step} did not kill the service:\n${service.output()}`)
          await killHard(service)
          // The node took the bytes before the crash: mined while the service is down, the restart's broadcast of
          // the same bytes is answered "nonce too low", which must read as "ours, in a block", not as a refusal.
          if (step === "send-after-broadcast") await node.mine({ blocks: 1 })
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
          if (step === "send-after-broadcast") {
            assert.include(service.output(), "already in a block", "the restart read 'nonce too low' as its own transaction")
          }
        }

        await node.mine({ blocks: 13 })
        for (const { id, to } of withdrawals) {
          const done = await poll(`withdrawal ${id} COMPLETED`, async () => {
            const got = await tenantCall(service, "GET", `/v1/transactions/${id}`)
            return got.json.status === "COMPLETED" ? got.json : undefined
          })
          assert.strictEqual(await node.getBalance({ address: to }), parseEther("0.1"), `${to} paid once`)
          const receipt = await node.getTransactionReceipt({ hash: done.txHash })
          assert.strictEqual(receipt.status, "success")
        }
        // Exactly one transaction per withdrawal left HOT: three nonces, consecutive, and nothing else.
        assert.strictEqual(await node.getTransactionCount({ address: hot }), nonceBefore + sendCrashSteps.length)
        const head = await node.getBlockNumber()
        let fromHot = 0
        for (let height = 0n; height <= head; height++) {
          const block = await node.getBlock({ blockNumber: height, includeTransactions: true })
          fromHot += block.transactions.filter((tx) => tx.from.toLowerCase() === hot.toLowerCase()).length
        }
        assert.strictEqual(fromHot, sendCrashSteps.length)
        await killHard(service)
      }),
    600_000
  )
})
