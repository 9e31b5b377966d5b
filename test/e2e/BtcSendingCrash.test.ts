/**
 * A kill -9 at any instant of BTC sending leaves exactly one payment per withdrawal on chain (decisions.md "Sending
 * on real networks"; docs/btc.md): the service runs as a real child process with BTC_TESTNET on a regtest Litecoin
 * Core node, with `COFFER_FAULT=<step>` (src/idempotency/CrashPoints.ts `sendCrashSteps`), so it kills itself with
 * SIGKILL when a withdrawal's sending reaches that step: inside the signing transaction before COMMIT (the outputs
 * were reserved before it: the restart chooses again for the same withdrawal), right after COMMIT before the
 * broadcast, and after the node accepted the bytes (mined while the service is down: the restart's broadcast of the
 * same bytes is "already in block chain"). Restarted without the fault, each withdrawal completes, and each recipient
 * is paid by exactly one output in the whole chain.
 */
import { assert, describe, it } from "@effect/vitest"
import * as bitcoin from "bitcoinjs-lib"
import { Effect } from "effect"
import { createPrivateKey, randomBytes } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { afterAll, beforeAll } from "vitest"
import { bitcoinNetworks } from "../../src/chains/BitcoinNetwork.ts"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { startLitecoind } from "../support/Litecoind.ts"
import { cleanUpNow, freePort, killHard, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

const node = startLitecoind()
const asset = "BTC_TESTNET_BTC"
const dataDir = makeDataDir("coffer-btc-send-crash-")
let current: ServiceProcess | undefined
beforeAll(() => node.ready, 60_000)
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

describe("BTC sending across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, or after the broadcast: each recipient paid by exactly one output",
    () =>
      Effect.promise(async () => {
        const [port, opsPort] = [await freePort(), await freePort()]
        const env = { CHAIN_RPC_URLS: JSON.stringify({ BTC_TESTNET: node.url }) }
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
        const startHeight = Number(await node.height())

        let service = await start()
        const addresses = await (await fetch(`${service.opsUrl}/ops/platform/addresses`, {
          headers: { authorization: `Bearer ${opsToken()}` }
        })).json() as Array<{ networkKey: string; role: string; address: string }>
        const hot = addresses.find((entry) => entry.networkKey === "BTC_TESTNET" && entry.role === "HOT")!.address
        for (let index = 0; index < sendCrashSteps.length; index++) await node.send(hot, "test", 10_000_000n)
        // A payer funded by a real deposit, credited at the 2nd confirmation; its output is the first one spent.
        const payer = await tenantCall(service, "POST", "/v1/users/btc-send-crash/deposit_address", JSON.stringify({ networkKey: "BTC_TESTNET" }))
        assert.strictEqual(payer.json.status, "READY", payer.text)
        await node.send(payer.json.address, "test", 20_000_000n)
        await node.mine(2)
        await poll("the deposit credited", async () => {
          const items = (await tenantCall(service, "GET", `/v1/wallets/${payer.json.walletId}/assets`)).json as Array<any>
          return items.some((item) => item.assetId === asset && BigInt(item.available) > 0n) ? true : undefined
        })

        const withdrawals: Array<{ id: string; to: string }> = []
        for (const step of sendCrashSteps) {
          await killHard(service)
          service = await start(step)
          const to = bitcoin.payments.p2wpkh({ hash: randomBytes(20), network: bitcoinNetworks.test }).address!
          const submitted = await tenantCall(service, "POST", "/v1/transactions", JSON.stringify({
            assetId: asset,
            source: { type: "WALLET", id: payer.json.walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: to } },
            amountRaw: "1000000",
            externalTxId: `btc-send-crash-${step}`
          })).catch((error: unknown) => ({ status: 0, text: String(error), json: undefined }))
          const ended = await Promise.race([service.exited, sleep(60_000).then(() => undefined)])
          assert.strictEqual(ended?.signal, "SIGKILL", `COFFER_FAULT=${step} did not kill the service:\n${service.output()}`)
          await killHard(service)
          // The node took the bytes before the crash: mined while the service is down.
          if (step === "send-after-broadcast") await node.mine(1)
          service = await start()
          const id = submitted.status === 202
            ? submitted.json.withdrawalId as string
            : (await poll(`withdrawal of ${step}`, async () => {
              const found = await tenantCall(service, "GET", `/v1/transactions/external_tx_id/btc-send-crash-${step}`)
              return found.status === 200 ? found.json.id as string : undefined
            }))
          withdrawals.push({ id, to })
          await poll(`withdrawal after a crash at ${step} CONFIRMING`, async () => {
            const got = await tenantCall(service, "GET", `/v1/transactions/${id}`)
            return got.json.status === "CONFIRMING" || got.json.status === "COMPLETED" ? true : undefined
          })
        }

        await node.mine(2)
        for (const { id } of withdrawals) {
          await poll(`withdrawal ${id} COMPLETED`, async () => {
            const got = await tenantCall(service, "GET", `/v1/transactions/${id}`)
            return got.json.status === "COMPLETED" ? got.json : undefined
          })
        }
        // Every output of every block since the node's start: each recipient's script is paid exactly once.
        const paid = new Map<string, Array<string>>()
        const head = Number(await node.height())
        for (let height = startHeight; height <= head; height++) {
          const block = await node.rpc("getblock", [await node.rpc("getblockhash", [height]), 2])
          for (const tx of block.tx) {
            for (const output of tx.vout) paid.set(output.scriptPubKey.hex, [...(paid.get(output.scriptPubKey.hex) ?? []), tx.txid])
          }
        }
        for (const { to } of withdrawals) {
          const script = Buffer.from(bitcoin.address.toOutputScript(to, bitcoinNetworks.test)).toString("hex")
          assert.strictEqual(paid.get(script)?.length, 1, `${to} paid once: ${JSON.stringify(paid.get(script))}`)
        }
        await killHard(service)
      }),
    600_000
  )
})
