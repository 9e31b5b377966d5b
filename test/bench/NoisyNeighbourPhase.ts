/**
 * Noisy neighbour (issue 36): how long one tenant's request takes while another tenant does the costliest thing it
 * may within its own rate cap. The noisy tenant sends three waves of 48 `POST /v1/users` with passwords (a scrypt
 * hash each, about 170 ms of a core), one a second, under the spec's default cap of 50/s; the quiet tenant sends
 * signed `GET /v1/networks` one after another all the while. The figure is the quiet tenant's p99 latency, next to
 * its p99 with no noise (stderr). Before the hashes left libuv's thread pool the report measured 16.7 s.
 */
import { signRequest } from "../../src/client/RequestSigner.ts"
import { type BenchTenant, log } from "./BenchSupport.ts"

const waves = 3
const waveSize = 48
const waveIntervalMs = 1_000
const quietMs = 2_000

const signedCall = async (baseUrl: string, tenant: BenchTenant, method: "GET" | "POST", target: string, body?: unknown) => {
  const key = tenant.keys[0]!
  const bytes = body === undefined ? "" : JSON.stringify(body)
  const headers = signRequest({
    keyId: key.keyId,
    privateKey: key.privateKey,
    target,
    body: bytes,
    nowSeconds: Math.floor(Date.now() / 1000)
  })
  const response = await fetch(`${baseUrl}${target}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: bytes })
  })
  await response.arrayBuffer()
  return response.status
}

const p99 = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? Number.NaN
}

/** Times the quiet tenant's requests until `until` settles. */
const timeQuiet = async (baseUrl: string, quiet: BenchTenant, until: Promise<unknown>) => {
  let done = false
  void until.finally(() => {
    done = true
  })
  const latencies: Array<number> = []
  while (!done) {
    const started = performance.now()
    const status = await signedCall(baseUrl, quiet, "GET", "/v1/networks")
    if (status !== 200) throw new Error(`quiet tenant: GET /v1/networks answered ${status}`)
    latencies.push(performance.now() - started)
  }
  return latencies
}

export const runNoisyNeighbourPhase = async (options: {
  readonly baseUrl: string
  /** One key at the spec's default cap (50/s). */
  readonly noisy: BenchTenant
  readonly quiet: BenchTenant
}) => {
  const { baseUrl, noisy, quiet } = options
  const baseline = await timeQuiet(baseUrl, quiet, new Promise((resolve) => setTimeout(resolve, quietMs)))
  const runId = Date.now().toString(36)
  const statuses = new Map<number, number>()
  const noise = (async () => {
    const sent: Array<Promise<void>> = []
    for (let wave = 0; wave < waves; wave++) {
      for (let index = 0; index < waveSize; index++) {
        const customerRefId = `noisy-${runId}-${wave}-${index}`
        sent.push(
          signedCall(baseUrl, noisy, "POST", "/v1/users", {
            customerRefId,
            email: `${customerRefId}@example.com`,
            password: "correct horse 42"
          }).then((status) => {
            statuses.set(status, (statuses.get(status) ?? 0) + 1)
          })
        )
      }
      if (wave < waves - 1) await new Promise((resolve) => setTimeout(resolve, waveIntervalMs))
    }
    await Promise.all(sent)
  })()
  const during = await timeQuiet(baseUrl, quiet, noise)
  await noise
  const answered = [...statuses].map(([status, count]) => `${count} × ${status}`).join(", ")
  log(`  noisy tenant: ${waves} waves of ${waveSize} POST /v1/users with passwords: ${answered}`)
  log(`  quiet tenant: ${baseline.length} requests alone, p99 ${p99(baseline).toFixed(1)} ms; ` +
    `${during.length} beside the noise, p99 ${p99(during).toFixed(1)} ms, slowest ${Math.max(...during).toFixed(1)} ms`)
  for (const status of statuses.keys()) {
    if (status !== 200 && status !== 429) throw new Error(`noisy tenant: POST /v1/users answered ${status}`)
  }
  return { p99Ms: p99(during), baselineP99Ms: p99(baseline) }
}
