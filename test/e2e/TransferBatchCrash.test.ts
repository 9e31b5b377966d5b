/**
 * A kill -9 in the middle of a batch of transfers (issue 34, "Money by the batch"): concurrent internal transfers share
 * one statement per batch (src/transfers/Movements.ts), so a crash must leave each member done once or not at all,
 * never half a batch, and a retry of each request after the restart must answer what its first execution answered.
 *
 * The service runs as a real process with its embedded PostgreSQL. 96 transfers, each with its own externalTxId (an
 * idempotency key, spec section 7), go 32 at a time; once a third of them are answered, the service and its
 * PostgreSQL are killed with SIGKILL (a power cut: only what was committed survives). After the restart every request
 * is sent again, twice: each answers 202, the two retries byte for byte alike, and a request answered before the kill
 * gets its first answer again, byte for byte. Each externalTxId names exactly one transaction, the payers were debited
 * exactly amount + fee once per transaction, and `npm run ledger:check` finds the ledger sound.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { promisify } from "node:util"
import { afterAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { type BenchTenant, provisionTenant } from "../bench/BenchSupport.ts"
import {
  cleanUpNow,
  freePort,
  killHard,
  makeDataDir,
  repositoryRoot,
  type ServiceProcess,
  spawnService,
  waitForHealth
} from "./ServiceProcess.ts"

const network = "ETH_SEPOLIA"
const asset = "ETH_SEPOLIA_ETH"
const confirmationBlocks = 12
const payers = 8
const transfers = 96
const inFlight = 32
const amount = 1000n

const dataDir = makeDataDir("coffer-batch-crash-")
let current: ServiceProcess | undefined
afterAll(() => cleanUpNow(current, dataDir))

let tenant: BenchTenant | undefined
const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()

interface Reply {
  readonly status: number
  readonly text: string
}

/**
 * A call sent again (up to three times in all) when its connection was closed before any answer: a pooled keep-alive connection to a
 * service that was just killed (or that closed it idle) can be taken for the next request before the client has seen
 * its close ("other side closed", seen twice in clean-clone CI runs). A tenant's client retries then, and every call
 * here is safe to repeat (a transfer by its externalTxId, an ops switch by its value); a signed call is signed afresh.
 */
const againOnClosedSocket = async <A>(send: () => Promise<A>, attemptsLeft = 3): Promise<A> => {
  try {
    return await send()
  } catch (error) {
    if (attemptsLeft <= 1 || (error as { cause?: { code?: string } }).cause?.code !== "UND_ERR_SOCKET") throw error
    return await againOnClosedSocket(send, attemptsLeft - 1)
  }
}

const tenantCall = (service: ServiceProcess, method: string, target: string, body = ""): Promise<Reply> =>
  againOnClosedSocket(() => tenantCallOnce(service, method, target, body))

const tenantCallOnce = async (service: ServiceProcess, method: string, target: string, body: string): Promise<Reply> => {
  const signed = signRequest({ ...tenant!.keys[0]!, target, body, nowSeconds: Math.floor(Date.now() / 1000) })
  const response = await fetch(`${service.publicUrl}${target}`, {
    method,
    headers: { ...(body.length > 0 ? { "content-type": "application/json" } : {}), ...signed },
    ...(method === "GET" ? {} : { body }),
    signal: AbortSignal.timeout(60_000)
  })
  return { status: response.status, text: await response.text() }
}

const opsCall = async (service: ServiceProcess, path: string, body: unknown) => {
  const response = await againOnClosedSocket(() =>
    fetch(`${service.opsUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${opsToken()}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(60_000)
    })
  )
  assert.strictEqual(response.status, 200, `${path}: ${await response.text()}`)
}

const available = async (service: ServiceProcess, walletId: string): Promise<bigint> => {
  const reply = await tenantCall(service, "GET", `/v1/wallets/${walletId}/assets`)
  assert.strictEqual(reply.status, 200, reply.text)
  return BigInt(JSON.parse(reply.text).find((item: { assetId: string }) => item.assetId === asset)?.available ?? "0")
}

describe("a kill -9 in the middle of a batch of transfers (issue 34)", () => {
  it.live("every member is done once or not at all, and each retry answers as the first execution did", () =>
    Effect.promise(async () => {
      const [port, opsPort] = [await freePort(), await freePort()]
      const start = async () => {
        const service = spawnService({ dataDir, port, opsPort, env: { AUTO_SWEEPS: "false" } })
        current = service
        while (!existsSync(join(dataDir, "ops-token"))) {
          if (service.child.exitCode !== null) throw new Error(`the service exited:\n${service.output()}`)
          await sleep(25)
        }
        await waitForHealth(service, opsToken(), 120_000)
        return service
      }

      let service = await start()
      tenant = await provisionTenant(service.opsUrl, opsToken(), "batch-crash", 1, 1000)
      const wallets: Array<string> = []
      for (let index = 0; index < payers; index++) {
        const reply = await tenantCall(service, "POST", `/v1/users/batch-${index}/deposit_address`,
          JSON.stringify({ networkKey: network }))
        assert.strictEqual(reply.status, 200, reply.text)
        const address = JSON.parse(reply.text)
        wallets.push(address.walletId)
        await opsCall(service, `/ops/devnet/${network}/transfers`, {
          to: address.address,
          assetId: asset,
          amountRaw: "1000000000000000000"
        })
      }
      await opsCall(service, `/ops/devnet/${network}/blocks`, { count: confirmationBlocks + 1 })
      const fundedBy = performance.now() + 60_000
      for (const walletId of wallets) {
        while ((await available(service, walletId)) === 0n) {
          assert.isBelow(performance.now(), fundedBy, "a deposit was never credited")
          await sleep(200)
        }
      }
      const before = await Promise.all(wallets.map((walletId) => available(service, walletId)))

      const bodyOf = (index: number) => {
        const payer = index % payers
        return JSON.stringify({
          assetId: asset,
          source: { type: "WALLET", id: wallets[payer] },
          destination: { type: "WALLET", id: wallets[(payer + 1 + (index % (payers - 1))) % payers] },
          amountRaw: amount.toString(),
          externalTxId: `batch-crash-${index}`
        })
      }
      const submit = (on: ServiceProcess, index: number) => tenantCall(on, "POST", "/v1/transactions", bodyOf(index))

      // The load, killed once a third of it is answered: the batches in flight then are cut anywhere.
      const first = new Map<number, Reply>()
      let next = 0
      let killed: Promise<void> | undefined
      await Promise.all(Array.from({ length: inFlight }, async () => {
        while (next < transfers && killed === undefined) {
          const index = next++
          const reply = await submit(service, index).catch(() => undefined)
          if (reply !== undefined && killed === undefined) first.set(index, reply)
          if (first.size >= transfers / 3 && killed === undefined) killed = killHard(service)
        }
      }))
      await killed
      assert.isAbove(first.size, 0)
      assert.isBelow(first.size, transfers, "the kill came before the load ended")
      for (const [index, reply] of first) assert.strictEqual(reply.status, 202, `transfer ${index}: ${reply.text}`)

      service = await start()
      const retried = new Map<number, Reply>()
      for (let index = 0; index < transfers; index++) {
        const reply = await submit(service, index)
        assert.strictEqual(reply.status, 202, `transfer ${index} retried: ${reply.text}`)
        const again = await submit(service, index)
        assert.strictEqual(again.text, reply.text, `transfer ${index}: its two retries answer alike`)
        const answered = first.get(index)
        if (answered !== undefined) {
          assert.strictEqual(reply.text, answered.text, `transfer ${index}: the retry replays the first answer`)
        }
        retried.set(index, reply)
      }

      // Each externalTxId one transaction, the one its receipt names; the payers debited once per transaction.
      const spent = new Array<bigint>(payers).fill(0n)
      const received = new Array<bigint>(payers).fill(0n)
      for (const [index, reply] of retried) {
        const receipt = JSON.parse(reply.text)
        const stored = await tenantCall(service, "GET", `/v1/transactions/external_tx_id/batch-crash-${index}`)
        assert.strictEqual(stored.status, 200, stored.text)
        assert.strictEqual(JSON.parse(stored.text).id, receipt.transactionId)
        const payer = wallets.indexOf(receipt.fromWalletId)
        spent[payer] = spent[payer]! + BigInt(receipt.amount) + BigInt(receipt.fee)
        const payee = wallets.indexOf(receipt.toWalletId)
        received[payee] = received[payee]! + BigInt(receipt.amount)
      }
      const after = await Promise.all(wallets.map((walletId) => available(service, walletId)))
      wallets.forEach((_, index) => {
        assert.strictEqual(after[index], before[index]! - spent[index]! + received[index]!, `wallet ${index}'s balance`)
      })
      await killHard(service)

      // The ledger audit on the data directory, the service stopped (npm run ledger:check).
      const audit = await promisify(execFile)(process.execPath, ["src/ledger/ledger-check.ts"], {
        cwd: repositoryRoot,
        env: { ...process.env, DATA_DIR: dataDir }
      }).then((done) => ({ code: 0, out: done.stdout + done.stderr }), (error: { code?: number; stdout?: string; stderr?: string }) => ({
        code: error.code ?? -1,
        out: `${error.stdout ?? ""}${error.stderr ?? ""}`
      }))
      assert.strictEqual(audit.code, 0, audit.out)
    }), 600_000)
})
