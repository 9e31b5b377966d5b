/**
 * What signed-request authentication costs the service, by CPU (issue 34):
 *
 *   auth overhead µs = service CPU per signed request - service CPU per unsigned request - one Ed25519 verify
 *                      (node:crypto, measured in the bench process); goal at most 60
 *
 * The requests are the signed phase's (bench.ts): unsigned `GET /v1/webhooks/event_types`, signed `GET /v1/networks`
 * with a fresh JWT and nonce each. The two run in alternating slices of one run (CpuSlices.ts), the service's
 * process only (the nonce's insert in PostgreSQL is not in this line); each signed slice's tokens are signed just
 * before it.
 */
import { log } from "./BenchSupport.ts"
import { microsPerUnit, type Slice, startServiceCpu, sumSlices } from "./CpuSlices.ts"
import { runLoad } from "./HttpLoad.ts"

const rounds = 3
const sliceWarmupMs = 300
const sliceMs = 2_000
/**
 * Tokens per signed slice: the higher of the signed rate measured before and the unsigned slice's just before it (a
 * signed request is never cheaper), times the slice's length, times this margin.
 */
const tokenMargin = 1.5

export const runAuthCpuPhase = async (options: {
  readonly servicePid: number
  readonly dataDir: string
  readonly host: string
  readonly port: number
  readonly connections: number
  readonly unsignedRequest: Buffer
  /** `count` signed requests, each with its own nonce, valid for the next few seconds. */
  readonly presignSigned: (count: number) => Array<Buffer>
  readonly signedPerSecond: number
  readonly verifyMicros: number
}) => {
  const slice = async (nextRequest: () => Buffer | undefined): Promise<Slice & { readonly perSecond: number }> => {
    let spent = () => 0
    let cpu = 0
    const result = await runLoad({
      host: options.host,
      port: options.port,
      connections: options.connections,
      warmupMs: sliceWarmupMs,
      durationMs: sliceMs,
      nextRequest,
      onWindowStart: () => {
        spent = startServiceCpu({ ...options, postgres: false })
      },
      onWindowEnd: () => {
        cpu = spent()
      }
    })
    if (result.exhausted) log("  auth by CPU: a signed slice's tokens ran out (its window was shortened)")
    if (result.failedByStatus.size > 0 || result.socketErrors > 0) {
      log(`  auth by CPU: a slice's failures: ${[...result.failedByStatus].map(([status, count]) => `${count} × HTTP ${status}`).join(", ")}` +
        `${result.socketErrors > 0 ? `, ${result.socketErrors} socket errors` : ""}`)
    }
    return { units: result.ok, cpuSeconds: cpu, perSecond: result.requestsPerSecond }
  }
  const unsigned: Array<Slice> = []
  const signed: Array<Slice> = []
  for (let round = 0; round < rounds; round++) {
    const before = await slice(() => options.unsignedRequest)
    unsigned.push(before)
    const perSecond = Math.max(options.signedPerSecond, before.perSecond)
    const requests = options.presignSigned(
      Math.ceil(perSecond * ((sliceWarmupMs + sliceMs) / 1000) * tokenMargin) + options.connections
    )
    let next = 0
    signed.push(await slice(() => requests[next++]))
  }
  const [unsignedMicros, signedMicros] = [microsPerUnit(sumSlices(unsigned)), microsPerUnit(sumSlices(signed))]
  const overhead = signedMicros - unsignedMicros - options.verifyMicros
  log(`  auth by CPU, ${rounds} alternating slices of ${sliceMs / 1000} s: service ${signedMicros.toFixed(0)} µs per ` +
    `signed request, ${unsignedMicros.toFixed(0)} µs per unsigned, verify ${options.verifyMicros.toFixed(0)} µs; per slice ` +
    `${signed.map((s) => microsPerUnit(s).toFixed(0)).join("/")} against ${unsigned.map((s) => microsPerUnit(s).toFixed(0)).join("/")}`)
  return { unsignedMicros, signedMicros, overhead }
}
