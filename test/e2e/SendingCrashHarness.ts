/**
 * What every family's kill -9 sending test does the same way (test/e2e/*SendingCrash.test.ts): the service as a real
 * child process on one data directory, restarted with `COFFER_FAULT=<step>` for each of `sendCrashSteps`
 * (src/idempotency/CrashPoints.ts), a withdrawal submitted into each crash, and found again after the restart by its
 * external id when the reply died with the process. Each family's test keeps its own node, payer funding and the
 * on-chain proof that every recipient was paid exactly once.
 */
import { assert } from "@effect/vitest"
import { createPrivateKey } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { cleanUpNow, freePort, killHard, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

export interface CrashHarness {
  readonly dataDir: string
  readonly opsToken: () => string
  /** A signed /v1 call with the development tenant's key. */
  readonly tenantCall: (
    service: ServiceProcess,
    method: string,
    target: string,
    body?: string
  ) => Promise<{ readonly status: number; readonly text: string; readonly json: any }>
  /** `read` until it gives a value (errors count as not yet); the service's last lines on timeout. */
  readonly poll: <A>(what: string, read: () => Promise<A | undefined>, timeoutMs?: number) => Promise<A>
  /** Starts the service (with `fault` as COFFER_FAULT) and waits until it is healthy. */
  readonly start: (fault?: string) => Promise<ServiceProcess>
  /** The platform HOT address of a network. */
  readonly hotAddress: (service: ServiceProcess, networkKey: string) => Promise<string>
  /**
   * Waits until the network's watcher has scanned up to `height` (it starts at the head it first sees: a deposit
   * paid before that is history to it and never credited).
   */
  readonly watcherAt: (service: ServiceProcess, networkKey: string, height: bigint) => Promise<void>
  /** A deposit address of `user` on the network, READY. */
  readonly depositAddress: (service: ServiceProcess, user: string, networkKey: string) => Promise<{ readonly walletId: string; readonly address: string }>
  /** Waits until the wallet has some of the asset available (its deposit credited). */
  readonly credited: (service: ServiceProcess, walletId: string, assetId: string) => Promise<void>
  readonly cleanUp: () => Promise<void>
}

/**
 * The broadcast claim's grace in these tests (BROADCAST_CLAIM_GRACE_MS; src/Config.ts): a process killed right after
 * its claim ("send-after-claim") leaves the claim to expire before the restart may send, 20 s by default, which is
 * the broadcast call's 15 s bound plus margin. The nodes here are local and answer in milliseconds, and one process
 * at a time sends, so 2 s keeps what the tests prove (the restart waits for the claim, asks the node, sends once).
 */
export const testBroadcastClaimGraceMillis = 2_000

export const makeCrashHarness = async (
  dataDirPrefix: string,
  given: Readonly<Record<string, string>>
): Promise<CrashHarness> => {
  const env = { BROADCAST_CLAIM_GRACE_MS: String(testBroadcastClaimGraceMillis), ...given }
  const dataDir = makeDataDir(dataDirPrefix)
  const [port, opsPort] = [await freePort(), await freePort()]
  let current: ServiceProcess | undefined

  const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()
  const ops = async (service: ServiceProcess, path: string) =>
    (await fetch(`${service.opsUrl}${path}`, { headers: { authorization: `Bearer ${opsToken()}` } })).json()

  const tenantCall: CrashHarness["tenantCall"] = async (service, method, target, body = "") => {
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

  return {
    dataDir,
    opsToken,
    tenantCall,
    poll,
    start,
    hotAddress: async (service, networkKey) => {
      const addresses = await ops(service, "/ops/platform/addresses") as Array<{ networkKey: string; role: string; address: string }>
      return addresses.find((entry) => entry.networkKey === networkKey && entry.role === "HOT")!.address
    },
    watcherAt: async (service, networkKey, height) => {
      await poll(`the ${networkKey} watcher at ${height}`, async () => {
        const health = await ops(service, "/ops/health") as { chains: Record<string, { height: number; lagBlocks: number }> }
        const chain = health.chains[networkKey]
        return chain !== undefined && BigInt(chain.height - chain.lagBlocks) >= height ? true : undefined
      })
    },
    depositAddress: async (service, user, networkKey) => {
      const payer = await tenantCall(service, "POST", `/v1/users/${user}/deposit_address`, JSON.stringify({ networkKey }))
      assert.strictEqual(payer.json.status, "READY", payer.text)
      return { walletId: payer.json.walletId, address: payer.json.address }
    },
    credited: async (service, walletId, assetId) => {
      await poll("the deposit credited", async () => {
        const items = (await tenantCall(service, "GET", `/v1/wallets/${walletId}/assets`)).json as Array<any>
        return items.some((item) => item.assetId === assetId && BigInt(item.available) > 0n) ? true : undefined
      })
    },
    cleanUp: async () => {
      await cleanUpNow(current, dataDir)
    }
  }
}

export interface CrashWithdrawal {
  readonly step: (typeof sendCrashSteps)[number]
  readonly id: string
  readonly to: string
}

/**
 * For each crash step: restart with the fault, submit a withdrawal of `amountRaw` from the payer to a fresh
 * recipient (the process must die at the step), restart clean (after `whileDown`, e.g. mining the bytes the node took
 * before the crash), find the withdrawal (by its reply, or by its external id if the reply died), and wait until it is
 * CONFIRMING (or already COMPLETED where `completedCounts`). Returns the service running clean and the withdrawals.
 */
export const submitIntoEachCrash = async (options: {
  readonly harness: CrashHarness
  readonly service: ServiceProcess
  readonly assetId: string
  readonly payerWalletId: string
  readonly amountRaw: string
  readonly recipient: (index: number) => string
  readonly externalTxIdPrefix: string
  readonly whileDown?: ((step: CrashWithdrawal["step"]) => Promise<void> | void) | undefined
  readonly completedCounts?: boolean | undefined
}): Promise<{ readonly service: ServiceProcess; readonly withdrawals: ReadonlyArray<CrashWithdrawal> }> => {
  const { harness } = options
  const { poll, start, tenantCall } = harness
  let service = options.service
  const withdrawals: Array<CrashWithdrawal> = []
  for (const [index, step] of sendCrashSteps.entries()) {
    await killHard(service)
    service = await start(step)
    const to = options.recipient(index)
    const externalTxId = `${options.externalTxIdPrefix}-${step}`
    const submitted = await tenantCall(service, "POST", "/v1/transactions", JSON.stringify({
      assetId: options.assetId,
      source: { type: "WALLET", id: options.payerWalletId },
      destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: to } },
      amountRaw: options.amountRaw,
      externalTxId
    })).catch((error: unknown) => ({ status: 0, text: String(error), json: undefined }))
    const ended = await Promise.race([service.exited, sleep(60_000).then(() => undefined)])
    assert.strictEqual(ended?.signal, "SIGKILL", `COFFER_FAULT=${step} did not kill the service:\n${service.output()}`)
    await killHard(service)
    await options.whileDown?.(step)
    service = await start()
    // The request may have died with the process (202 never sent): the withdrawal is found by its external id.
    const id = submitted.status === 202
      ? submitted.json.withdrawalId as string
      : (await poll(`withdrawal of ${step}`, async () => {
        const found = await tenantCall(service, "GET", `/v1/transactions/external_tx_id/${externalTxId}`)
        return found.status === 200 ? found.json.id as string : undefined
      }))
    withdrawals.push({ step, id, to })
    await poll(`withdrawal after a crash at ${step} CONFIRMING`, async () => {
      const status = (await tenantCall(service, "GET", `/v1/transactions/${id}`)).json.status
      return status === "CONFIRMING" || (options.completedCounts === true && status === "COMPLETED") ? true : undefined
    })
  }
  return { service, withdrawals }
}

/** Waits until the withdrawal is COMPLETED; its transaction object. */
export const completed = (harness: CrashHarness, service: ServiceProcess, id: string) =>
  harness.poll(`withdrawal ${id} COMPLETED`, async () => {
    const got = await harness.tenantCall(service, "GET", `/v1/transactions/${id}`)
    return got.json.status === "COMPLETED" ? got.json : undefined
  })
