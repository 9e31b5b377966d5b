/**
 * Withdrawals on a real EVM node (issue 10): `count` withdrawals submitted at once through the whole pipeline (signed
 * POST /v1/transactions, the entity, the hot-wallet check, nonce + signature + stored bytes, eth_sendRawTransaction)
 * to an anvil node that mines every transaction as it arrives; against raw signed eth_sendRawTransaction calls per
 * second from one process (this one) to the same node, transactions signed beforehand, as many in flight.
 *
 *   withdrawals/raw-send ratio = withdrawals broadcast per second ÷ raw sends per second
 *
 * The clock runs from the first submission to the last withdrawal reported CONFIRMING (its txHash set: the node took
 * its bytes). Before it: the setup's sweeps of the payers' deposits are let finish, and an uncounted warm-up burst of
 * half as many withdrawals runs (the raw loop likewise sends as many uncounted first). Its own anvil and service
 * process (own DATA_DIR), so the other phases' figures are untouched.
 */
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { createPublicClient, type Hex, http, parseEther } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import {
  cleanUpNow,
  freePort,
  makeDataDir,
  type ServiceProcess,
  spawnService,
  stopService,
  waitForHealth
} from "../e2e/ServiceProcess.ts"
import { freePortSync } from "../support/AnvilBinary.ts"
import { spawnAnvil } from "../support/AnvilProcess.ts"
import { summarizeProfile } from "./ProfileSummary.ts"
import {
  log,
  makeDatabase,
  makeSignedFetch,
  mapLimit,
  measureCpu,
  monotonicMicros,
  perfMapArgs,
  printStatements,
  provisionTenant,
  rate,
  sampleActivity,
  seconds,
  startStatements,
  waitUntil
} from "./BenchSupport.ts"

/** anvil's second dev account (mnemonic `test test ... junk`): the raw baseline's sender. */
const rawSenderKey = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
const chainId = 11155111

export interface WithdrawalsPhaseOptions {
  readonly count: number
  readonly inFlight: number
  readonly opsToken: string
  /** Where the service writes a CPU profile of its whole run (`--profile withdrawals`); none when absent. */
  readonly profileDirectory?: string | undefined
  /** Start the service with a map of its JavaScript functions for Linux `perf` (bench.ts `--perf-map`). */
  readonly perfMap?: boolean | undefined
  /** Print the statements of the burst (bench.ts `--statements`). */
  readonly statements?: boolean | undefined
}

export const runWithdrawalsPhase = async (options: WithdrawalsPhaseOptions) => {
  // Automine: every transaction is mined as it arrives, so nothing waits on a block time.
  const anvil = spawnAnvil({ port: freePortSync(), host: "127.0.0.1", chainId, mining: "auto", silent: true, stdout: "ignore" })
  const { url } = anvil
  const dataDir = makeDataDir("coffer-bench-withdrawals-")
  let service: ServiceProcess | undefined
  // The burst, on the profile's clock: from the first submission to the last broadcast seen.
  let burstWindow: [number, number] = [0, 0]
  try {
    const node = createPublicClient({ transport: http(url, { retryCount: 0 }), cacheTime: 0 })
    await anvil.ready()
    const [port, opsPort] = [await freePort(), await freePort()]
    service = spawnService({
      dataDir,
      port,
      opsPort,
      env: {
        OPS_TOKEN: options.opsToken,
        CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: url }),
        ...(options.statements === true ? { COFFER_PG_STATEMENTS: "1" } : {})
      },
      nodeArgs: [
        ...(options.profileDirectory === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${options.profileDirectory}`]),
        ...(options.perfMap === true ? perfMapArgs : [])
      ],
      fromSource: options.profileDirectory !== undefined || options.perfMap === true
    })
    await waitForHealth(service, options.opsToken, 60_000)
    const ops = async (path: string, init: RequestInit = {}) => {
      const response = await fetch(`${service!.opsUrl}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${options.opsToken}`, "content-type": "application/json" }
      })
      return response.json()
    }
    const addresses = await ops("/ops/platform/addresses") as Array<{ networkKey: string; role: string; address: string }>
    const hot = addresses.find((entry) => entry.networkKey === "ETH_SEPOLIA" && entry.role === "HOT")!.address
    await node.request({ method: "anvil_setBalance" as any, params: [hot, `0x${parseEther("100000").toString(16)}`] as any })

    // Payers funded by real deposits, credited after ETH_SEPOLIA's 12 confirmations: one per withdrawal in flight, as
    // an exchange's users withdraw from their own wallets (one wallet's withdrawals queue on its balance row by
    // design: the one-payer figure of the transfers phase measures that case).
    const tenant = await provisionTenant(service.opsUrl, options.opsToken, "bench-withdrawals", 4, 1_000)
    const signedFetch = makeSignedFetch(service.publicUrl, tenant)
    const funder = privateKeyToAccount(rawSenderKey)
    await node.request({ method: "anvil_setBalance" as any, params: [funder.address, `0x${parseEther("1000000").toString(16)}`] as any })
    const payers: Array<{ walletId: string; address: string }> = []
    const firstNonce = await node.getTransactionCount({ address: funder.address })
    for (let index = 0; index < options.inFlight; index++) {
      const payer = await signedFetch("POST", `/v1/users/bench-payer-${index}/deposit_address`, { networkKey: "ETH_SEPOLIA" })
      payers.push(payer)
      await node.request({
        method: "eth_sendRawTransaction",
        params: [await funder.signTransaction({
          type: "eip1559",
          chainId,
          nonce: firstNonce + index,
          gas: 21_000n,
          maxFeePerGas: 100_000_000_000n,
          maxPriorityFeePerGas: 1_000_000_000n,
          to: payer.address as Hex,
          value: parseEther("1000")
        })]
      })
    }
    await node.request({ method: "anvil_mine" as any, params: ["0xd"] as any })
    await waitUntil("the payers' deposits credited", async () => {
      for (const payer of payers) {
        const items = await signedFetch("GET", `/v1/wallets/${payer.walletId}/assets`) as Array<{ assetId: string; available: string }>
        if (!items.some((item) => item.assetId === "ETH_SEPOLIA_ETH" && BigInt(item.available) > 0n)) return false
      }
      return true
    }, 120_000)
    const payer = payers[0]!

    // The service: submit all, then wait until every withdrawal is CONFIRMING (its bytes taken by the node). Progress
    // is read from the database, not by polling the API, so the measurement does not load the service it measures;
    // the end is the commit time of the last CONFIRMING transition (the service's clock is this machine's).
    const db = makeDatabase(dataDir, 1)
    const query = <A extends object>(run: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
      db.run(Effect.flatMap(SqlClient.SqlClient, run))
    // The payers' deposits are swept to HOT a few seconds after they are credited (decisions.md): setup's work, let
    // finish before anything is timed, so the burst's CPU per withdrawal is the withdrawals' own.
    const payerAddresses = payers.map((entry) => entry.address.toLowerCase())
    await waitUntil("the payers' deposits swept", async () => {
      const [row] = await query((sql) =>
        sql<{ sent: number; open: number }>`
          SELECT count(*) FILTER (WHERE status IN ('CONFIRMING', 'COMPLETED'))::int AS sent,
            count(*) FILTER (WHERE status IN ('WAITING_GAS', 'PENDING'))::int AS open
          FROM sweeps WHERE kind = 'SWEEP' AND lower(from_address) IN ${sql.in(payerAddresses)}`)
      return row!.sent >= payers.length && row!.open === 0
    }, 120_000)
    // Each kind of submission pays its own range of destinations, so none of them meet on chain.
    const destinationBase = { lone: 0xbd000000, warm: 0xbc000000, withdrawal: 0xbe000000 } as const
    const submit = (kind: keyof typeof destinationBase, index: number, walletId: string) =>
      signedFetch("POST", "/v1/transactions", {
        assetId: "ETH_SEPOLIA_ETH",
        source: { type: "WALLET", id: walletId },
        destination: {
          type: "ONE_TIME_ADDRESS",
          oneTimeAddress: { address: `0x${(destinationBase[kind] + index).toString(16).padStart(40, "0")}` }
        },
        amountRaw: "10000000000000000",
        externalTxId: `bench-${kind}-${index}`
      })
    /** Waits until no withdrawal waits to be broadcast (none SUBMITTED, QUEUED or PENDING_SIGNATURE). */
    const allBroadcast = (what: string) =>
      waitUntil(what, async () => {
        const [row] = await query((sql) =>
          sql<{ open: number }>`SELECT count(*)::int AS open FROM transactions
            WHERE kind = 'WITHDRAWAL' AND status IN ('SUBMITTED', 'QUEUED', 'PENDING_SIGNATURE')`)
        return row!.open === 0
      }, 120_000)
    // One at a time first (not counted): the latency of a lone submission, against which the burst's is read.
    const loneStarted = performance.now()
    for (let index = 0; index < 5; index++) await submit("lone", index, payer.walletId)
    log(`  a lone withdrawal submission: ${((performance.now() - loneStarted) / 5).toFixed(0)} ms`)
    await allBroadcast("the lone withdrawals broadcast")
    // A warm-up burst (not counted), as the other phases warm up before their loads: the service's code paths are
    // compiled by V8's optimizing tiers during it, not during the measured burst.
    const warmUp = Math.max(options.inFlight, Math.floor(options.count / 2))
    await mapLimit(Array.from({ length: warmUp }, (_, index) => index), options.inFlight, (index) =>
      submit("warm", index, payers[index % payers.length]!.walletId))
    await allBroadcast("the warm-up withdrawals broadcast")
    if (options.statements === true) await startStatements(db)
    const activity = options.statements === true ? sampleActivity(db, "withdrawals") : undefined
    const cpu = measureCpu({ service: service.child.pid!, dataDir, node: anvil.child.pid })
    const startedAt = Date.now()
    burstWindow = [monotonicMicros(), 0]
    await mapLimit(Array.from({ length: options.count }, (_, index) => index), options.inFlight, (index) =>
      submit("withdrawal", index, payers[index % payers.length]!.walletId))
    let lastAt = 0
    const confirmingBy = performance.now() + 600_000
    for (;;) {
      const [row] = await query((sql) =>
        sql<{ sent: number; stuck: number; last_at: Date | null }>`
          SELECT count(*) FILTER (WHERE status NOT IN ('SUBMITTED', 'QUEUED', 'PENDING_SIGNATURE'))::int AS sent,
            count(*) FILTER (WHERE status IN ('FAILED', 'REJECTED'))::int AS stuck,
            max(updated_at) FILTER (WHERE status = 'CONFIRMING') AS last_at
          FROM transactions WHERE kind = 'WITHDRAWAL' AND external_tx_id LIKE 'bench-withdrawal-%'`)
      if (row!.stuck > 0) throw new Error(`${row!.stuck} withdrawals FAILED or REJECTED`)
      if (row!.sent >= options.count) {
        lastAt = row!.last_at!.getTime()
        burstWindow[1] = monotonicMicros()
        break
      }
      if (performance.now() > confirmingBy) throw new Error(`only ${row!.sent} of ${options.count} withdrawals were broadcast`)
      await sleep(100)
    }
    // Which process binds the burst: CPU per withdrawal of the service, its PostgreSQL, anvil and this client.
    const cpuEach = cpu.stop("withdrawals", options.count, "withdrawal")
    await activity?.stop()
    // Where the time went, per withdrawal: submission (created) → signed → CONFIRMING (the broadcast's transition).
    const [steps] = await query((sql) =>
      sql<{ created_spread: number; to_signed_p50: number; to_signed_max: number; signed_to_sent_p50: number }>`
        SELECT extract(epoch FROM max(t.created_at) - min(t.created_at))::float8 AS created_spread,
          percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM v.signed_at - t.created_at))::float8 AS to_signed_p50,
          max(extract(epoch FROM v.signed_at - t.created_at))::float8 AS to_signed_max,
          percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM t.updated_at - v.signed_at))::float8 AS signed_to_sent_p50
        FROM transactions t JOIN outgoing_sends s ON s.owner_id = t.id JOIN outgoing_versions v ON v.send_id = s.id AND v.version = 1
        WHERE t.kind = 'WITHDRAWAL' AND t.external_tx_id LIKE 'bench-withdrawal-%'`)
    log(`  withdrawals: submissions spread over ${steps!.created_spread.toFixed(2)} s; created → signed p50 ` +
      `${steps!.to_signed_p50.toFixed(2)} s, max ${steps!.to_signed_max.toFixed(2)} s; signed → CONFIRMING p50 ` +
      `${steps!.signed_to_sent_p50.toFixed(3)} s`)
    if (options.statements === true) await printStatements(db, "withdrawals", 45)
    await db.dispose()
    const serviceSeconds = (lastAt - startedAt) / 1000
    const servicePerSecond = options.count / serviceSeconds

    // The floor: the same number of transfers signed beforehand, sent raw with as many in flight, after as many
    // uncounted ones as the service's warm-up.
    const nonce = await node.getTransactionCount({ address: funder.address })
    const signed = await Promise.all(Array.from({ length: warmUp + options.count }, (_, index) =>
      funder.signTransaction({
        type: "eip1559",
        chainId,
        nonce: nonce + index,
        gas: 21_000n,
        maxFeePerGas: 100_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
        to: `0x${(0xbf000000 + index).toString(16).padStart(40, "0")}`,
        value: 10_000_000_000_000_000n
      })))
    await mapLimit(signed.slice(0, warmUp), options.inFlight, (raw) =>
      node.request({ method: "eth_sendRawTransaction", params: [raw] }))
    const raws = signed.slice(warmUp)
    const rawStarted = performance.now()
    await mapLimit(raws, options.inFlight, (raw) => node.request({ method: "eth_sendRawTransaction", params: [raw] }))
    const rawPerSecond = options.count / ((performance.now() - rawStarted) / 1000)

    log(`  withdrawals: ${options.count} broadcast in ${seconds(serviceSeconds * 1000)} (${rate(servicePerSecond)}/s); ` +
      `raw eth_sendRawTransaction: ${rate(rawPerSecond)}/s (${options.inFlight} in flight)`)
    return {
      ratio: servicePerSecond / rawPerSecond,
      servicePerSecond,
      rawPerSecond,
      // Issue 34's line: the service's and its PostgreSQL's CPU per withdrawal, the node and the bench excluded.
      cpuMillis: cpuEach.service + cpuEach.postgres
    }
  } finally {
    if (service !== undefined && process.env.COFFER_SLOW_SPANS_MS !== undefined) {
      // src/observability/SlowSpans.ts: what the service reported, grouped by span.
      const counts = new Map<string, { count: number; totalMillis: number }>()
      for (const line of service.output().split("\n")) {
        const match = /^slow span (.+): ([0-9.]+) ms$/.exec(line)
        if (match === null) continue
        const entry = counts.get(match[1]!) ?? { count: 0, totalMillis: 0 }
        entry.count++
        entry.totalMillis += Number(match[2])
        counts.set(match[1]!, entry)
      }
      const top = [...counts].sort((a, b) => b[1].totalMillis - a[1].totalMillis).slice(0, 30)
      log(`  slow spans (the service's last lines only):\n${top.map(([name, entry]) =>
        `    ${entry.count}× ${(entry.totalMillis / entry.count).toFixed(0)} ms avg  ${name}`).join("\n")}`)
    }
    if (service !== undefined) await stopService(service, 20_000).catch(() => undefined)
    if (options.profileDirectory !== undefined) {
      const file = readdirSync(options.profileDirectory).find((name) => name.endsWith(".cpuprofile"))
      log(file === undefined
        ? "  no CPU profile was written"
        : burstWindow[1] === 0
        ? `\nwhere the withdrawals service's time went (its whole run):\n${summarizeProfile(join(options.profileDirectory, file))}`
        : `\nwhere the withdrawals service's time went during the burst:\n${summarizeProfile(join(options.profileDirectory, file), burstWindow)}`)
    }
    cleanUpNow(service, dataDir)
    anvil.stop("SIGKILL")
  }
}
