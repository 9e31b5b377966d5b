/**
 * Idempotency survives a crash at any instant (spec section 7, rules 3, 5 and 7; docs/wallets.md "Idempotency"):
 * the service runs as a real child process (`node src/main.ts`, embedded PostgreSQL) started with `COFFER_FAULT=<step>`
 * (src/idempotency/CrashPoints.ts), so it kills itself with SIGKILL when a `POST /v1/transactions` or
 * `POST /v1/wallets` reaches that step: after the key is claimed, inside the effect's transaction before COMMIT,
 * right after COMMIT, and before the reply. Its PostgreSQL is then killed too (a power cut), the service restarted
 * without the fault, and the same request retried at once: it is never blocked by the dead process's key, its effect
 * exists exactly once, and every retry answers the same bytes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createPrivateKey, type KeyObject } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { afterAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { crashSteps } from "../../src/idempotency/CrashPoints.ts"
import {
  cleanUpNow,
  freePort,
  killHard,
  makeDataDir,
  type ServiceProcess,
  spawnService,
  waitForHealth
} from "./ServiceProcess.ts"

const firstStartTimeoutMs = 60_000
const requestTimeoutMs = 30_000
const network = "ETH_SEPOLIA"
const asset = "ETH_SEPOLIA_ETH"
/** ETH_SEPOLIA's confirmation rule in the development catalog is 12 blocks. */
const confirmationBlocks = 12

const dataDir = makeDataDir("coffer-crash-")
let current: ServiceProcess | undefined
afterAll(() => cleanUpNow(current, dataDir))

interface Reply {
  readonly status: number
  readonly text: string
}

interface DevKey {
  readonly keyId: string
  readonly privateKey: KeyObject
}

const devKey = (): DevKey => ({
  keyId: JSON.parse(readFileSync(join(dataDir, "dev-tenant.json"), "utf8")).keyId,
  privateKey: createPrivateKey(readFileSync(join(dataDir, "dev-api-key.pem")))
})
const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()

/** A signed tenant request, as a tenant's HTTP client sends it; the reply's exact text. */
const tenantCall = async (
  service: ServiceProcess,
  method: string,
  target: string,
  body = "",
  headers: Record<string, string> = {}
): Promise<Reply> => {
  const key = devKey()
  const signed = signRequest({ ...key, target, body, nowSeconds: Math.floor(Date.now() / 1000) })
  const response = await fetch(`${service.publicUrl}${target}`, {
    method,
    headers: { ...(body.length > 0 ? { "content-type": "application/json" } : {}), ...signed, ...headers },
    ...(method === "GET" ? {} : { body }),
    signal: AbortSignal.timeout(requestTimeoutMs)
  })
  return { status: response.status, text: await response.text() }
}

const opsCall = async (service: ServiceProcess, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${service.opsUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${opsToken()}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(requestTimeoutMs)
  })
  const text = await response.text()
  assert.strictEqual(response.status, 200, `${method} ${path}: ${text}`)
  return JSON.parse(text)
}

const expectStatus = (reply: Reply, status: number, what: string) => {
  assert.strictEqual(reply.status, status, `${what}: ${reply.text}`)
  return JSON.parse(reply.text)
}

const available = async (service: ServiceProcess, walletId: string): Promise<bigint> => {
  const items = expectStatus(await tenantCall(service, "GET", `/v1/wallets/${walletId}/assets`), 200, "assets")
  return BigInt(items.find((item: { assetId: string }) => item.assetId === asset)?.available ?? "0")
}

const evmWalletsOf = async (service: ServiceProcess, customerRefId: string): Promise<Array<string>> => {
  const page = expectStatus(
    await tenantCall(service, "GET", `/v1/wallets?customerRefId=${customerRefId}&limit=200`),
    200,
    "wallets"
  )
  return page.items.filter((item: { chainFamily: string }) => item.chainFamily === "EVM").map((item: { id: string }) =>
    item.id
  )
}

describe("idempotency across crashes (spec section 7, rules 3, 5, 7)", () => {
  it.live(
    "a crash after the claim, before COMMIT, after COMMIT or before the reply: the retry after the restart executes once or replays, byte for byte",
    () =>
      Effect.promise(async () => {
        const [port, opsPort] = [await freePort(), await freePort()]
        const start = async (fault?: string) => {
          const service = spawnService({ dataDir, port, opsPort, env: fault === undefined ? {} : { COFFER_FAULT: fault } })
          current = service
          while (!existsSync(join(dataDir, "ops-token"))) {
            if (service.child.exitCode !== null) throw new Error(`the service exited:\n${service.output()}`)
            await sleep(25)
          }
          await waitForHealth(service, opsToken(), firstStartTimeoutMs)
          return service
        }
        /** The request must not be answered: the process killed itself at the step. */
        const crashOn = async (service: ServiceProcess, request: () => Promise<Reply>, step: string) => {
          const outcome = await request().then((reply) => reply, (error: unknown) => error)
          assert.instanceOf(outcome, Error, `COFFER_FAULT=${step} answered ${JSON.stringify(outcome)}`)
          const ended = await service.exited
          assert.strictEqual(ended.signal, "SIGKILL", `COFFER_FAULT=${step}:\n${service.output()}`)
          // The power cut also takes PostgreSQL: only what was committed survives.
          await killHard(service)
        }

        // Setup on a healthy service: a payer with funds from a confirmed deposit, a payee, a wallet owner.
        let service = await start()
        const payer = expectStatus(
          await tenantCall(service, "POST", "/v1/users/crash-payer/deposit_address", JSON.stringify({ networkKey: network })),
          200,
          "payer deposit address"
        )
        assert.strictEqual(payer.status, "READY", JSON.stringify(payer))
        const payee = expectStatus(
          await tenantCall(service, "POST", "/v1/users/crash-payee/deposit_address", JSON.stringify({ networkKey: network })),
          200,
          "payee deposit address"
        )
        await opsCall(service, "POST", `/ops/devnet/${network}/transfers`, {
          to: payer.address,
          assetId: asset,
          amountRaw: "1000000000000000000"
        })
        await opsCall(service, "POST", `/ops/devnet/${network}/blocks`, { count: confirmationBlocks + 1 })
        const fundedBy = performance.now() + 30_000
        while ((await available(service, payer.walletId)) === 0n) {
          assert.isBelow(performance.now(), fundedBy, "the deposit was never credited")
          await sleep(200)
        }

        for (const step of crashSteps) {
          const transfer = JSON.stringify({
            assetId: asset,
            source: { type: "WALLET", id: payer.walletId },
            destination: { type: "WALLET", id: payee.walletId },
            amountRaw: "1000",
            externalTxId: `crash-${step}`
          })
          const submit = (on: ServiceProcess) => tenantCall(on, "POST", "/v1/transactions", transfer)
          const wallet = JSON.stringify({ customerRefId: "crash-owner", chainFamily: "EVM", name: `crash ${step}` })
          const createWallet = (on: ServiceProcess) =>
            tenantCall(on, "POST", "/v1/wallets", wallet, { "idempotency-key": `crash-wallet-${step}` })

          const payerBefore = await available(service, payer.walletId)
          const walletsBefore = await evmWalletsOf(service, "crash-owner")
          await killHard(service)

          await crashOn(await start(step), () => submit(current!), step)
          await crashOn(await start(step), () => createWallet(current!), step)

          // Restarted: the dead process's keys are free at once (no 409 in progress), and each request took effect once.
          service = await start()
          const submitted = await submit(service)
          const receipt = expectStatus(submitted, 202, `transfer retried after a crash at ${step}`)
          const again = await submit(service)
          assert.strictEqual(again.status, 202)
          assert.strictEqual(again.text, submitted.text, `the transfer's replay after ${step} is byte-identical`)
          const stored = expectStatus(
            await tenantCall(service, "GET", `/v1/transactions/external_tx_id/crash-${step}`),
            200,
            "transaction by externalTxId"
          )
          assert.strictEqual(stored.id, receipt.transactionId, "the receipt names the one transaction")
          assert.strictEqual(
            payerBefore - (await available(service, payer.walletId)),
            BigInt(receipt.amount) + BigInt(receipt.fee),
            `debited once across the crash at ${step}`
          )

          const created = await createWallet(service)
          const createdWallet = expectStatus(created, 202, `wallet retried after a crash at ${step}`)
          assert.strictEqual((await createWallet(service)).text, created.text, `the wallet's replay after ${step}`)
          const walletsAfter = await evmWalletsOf(service, "crash-owner")
          assert.strictEqual(walletsAfter.length, walletsBefore.length + 1, `one wallet across the crash at ${step}`)
          assert.include(walletsAfter, createdWallet.id)
          assert.strictEqual(createdWallet.status, "PROVISIONING")
        }
        await killHard(service)
      }),
    600_000
  )
})
