/**
 * One trace across two processes (issue 32; docs/operations.md "Traces"): two service processes of one cluster, each
 * exporting its spans over OTLP/HTTP (JSON) to a receiver in this test under its own `OTEL_SERVICE_NAME`. Signed
 * withdrawals are submitted through the first process until one's entity is held by the second (its shard is the
 * second runner's, so the request goes to it as a persisted cluster message over the runner socket): that
 * withdrawal's entity work, exported by the second process, is in the same trace as the first process's server span
 * of its `POST /v1/transactions`, and every one of those spans descends from that server span through the spans of
 * both exports (the message envelope carries the trace and span id across; SqlMessageStorage stores them with the
 * message).
 *
 * test/observability/Traces.test.ts holds the rest of the trace (the server span's attributes, the SQL spans) in one
 * process.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createPrivateKey } from "node:crypto"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll } from "vitest"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { startLocalHttpServer } from "../support/LocalHttpServer.ts"
import { makeCrashHarness } from "./SendingCrashHarness.ts"
import { cleanUpNow, freePort, makeDataDir, type ServiceProcess, spawnService, waitForHealth } from "./ServiceProcess.ts"

interface OtlpAttribute {
  readonly key: string
  readonly value: { readonly stringValue?: string; readonly intValue?: string | number }
}
interface ExportedSpan {
  /** The exporting process's `service.name`. */
  readonly service: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<OtlpAttribute>
}

const exported: Array<ExportedSpan> = []
const receiver = await startLocalHttpServer((request, response) => {
  if (request.url === "/v1/traces") {
    for (const resource of JSON.parse(request.body).resourceSpans as Array<any>) {
      const service = (resource.resource.attributes as Array<OtlpAttribute>)
        .find((entry) => entry.key === "service.name")?.value.stringValue ?? ""
      for (const scope of resource.scopeSpans as Array<any>) {
        for (const span of scope.spans as Array<any>) exported.push({ ...span, service })
      }
    }
  }
  response.writeHead(200, { "content-type": "application/json" }).end("{}")
})

const otel = (serviceName: string) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  OTEL_SERVICE_NAME: serviceName,
  OTEL_BSP_SCHEDULE_DELAY: "200"
})
const harness = await makeCrashHarness("coffer-traces-a-", otel("coffer-a"))
const secondDataDir = makeDataDir("coffer-traces-b-")
let second: ServiceProcess | undefined
afterAll(async () => {
  cleanUpNow(second, secondDataDir)
  await harness.cleanUp()
  await receiver.close()
})

/** At most this many withdrawals are submitted: the chance that none lands on the second runner is 2^-12. */
const attemptsMax = 12

const stringAttribute = (span: ExportedSpan, key: string) => span.attributes.find((entry) => entry.key === key)?.value.stringValue

describe("traces across processes", () => {
  it.live("a withdrawal's entity work on the other process is joined to the trace of its POST /v1/transactions", () =>
    Effect.promise(async () => {
      const first = await harness.start()
      second = spawnService({
        dataDir: secondDataDir,
        port: await freePort(),
        opsPort: await freePort(),
        env: {
          DATABASE_URL: JSON.parse(readFileSync(join(harness.dataDir, "pg-conn.json"), "utf8")).url,
          SIGNER_MNEMONIC: readFileSync(join(harness.dataDir, "signer-mnemonic"), "utf8").trim(),
          OPS_TOKEN: harness.opsToken(),
          ...otel("coffer-b")
        }
      })
      await waitForHealth(second, harness.opsToken(), 90_000)
      await harness.poll("two runners holding shards", async () => {
        const response = await fetch(`${first.opsUrl}/ops/health`, { headers: { authorization: `Bearer ${harness.opsToken()}` } })
        const runners = (await response.json()).cluster.runners as Array<{ healthy: boolean; shards: string }>
        return runners.length === 2 && runners.every((runner) => runner.healthy && runner.shards.length > 0) ? true : undefined
      }, 30_000)

      const payer = await harness.depositAddress(first, "traced-payer", "ETH_SEPOLIA")
      const devnet = (path: string, body: unknown) =>
        fetch(`${first.opsUrl}/ops/devnet/ETH_SEPOLIA/${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${harness.opsToken()}`, "content-type": "application/json" },
          body: JSON.stringify(body)
        }).then((response) => response.text())
      await devnet("transfers", { to: payer.address, assetId: "ETH_SEPOLIA_ETH", amountRaw: "500000000000000000" })
      await devnet("blocks", { count: 12 })
      await harness.credited(first, payer.walletId, "ETH_SEPOLIA_ETH")

      // The development tenant's key, as harness.tenantCall uses it; here the answer's request id is needed too.
      const key = {
        keyId: JSON.parse(readFileSync(join(harness.dataDir, "dev-tenant.json"), "utf8")).keyId,
        privateKey: createPrivateKey(readFileSync(join(harness.dataDir, "dev-api-key.pem")))
      }
      const submit = async (index: number) => {
        const body = JSON.stringify({
          assetId: "ETH_SEPOLIA_ETH",
          source: { type: "WALLET", id: payer.walletId },
          destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" } },
          amountRaw: "10000000000000000",
          externalTxId: `traced-across-${index}`
        })
        const response = await fetch(`${first.publicUrl}/v1/transactions`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...signRequest({ ...key, target: "/v1/transactions", body, nowSeconds: Math.floor(Date.now() / 1000) })
          },
          body
        })
        const text = await response.text()
        assert.strictEqual(response.status, 202, text)
        return { transactionId: JSON.parse(text).transactionId as string, requestId: response.headers.get("x-request-id")! }
      }

      // Where each submitted withdrawal's entity work was exported from, once its trace is complete: the server span
      // (exported by the first process, found by the request id it answered with), entity spans, and every span of
      // the trace's chain from them up to the server span present.
      const traceOf = (requestId: string) => {
        const server = exported.find((span) =>
          span.kind === 2 && span.service === "coffer-a" && stringAttribute(span, "coffer.request_id") === requestId)
        if (server === undefined) return undefined
        const trace = exported.filter((span) => span.traceId === server.traceId)
        const byId = new Map(trace.map((span) => [span.spanId, span]))
        const descendsFromServer = (span: ExportedSpan) => {
          let current: ExportedSpan | undefined = span
          for (let depth = 0; current !== undefined && depth < 200; depth++) {
            if (current.spanId === server.spanId) return true
            current = current.parentSpanId === undefined ? undefined : byId.get(current.parentSpanId)
          }
          return false
        }
        const entityWork = trace.filter((span) => span.name.startsWith("WithdrawalProcessor."))
        return { server, entityWork, joined: entityWork.filter(descendsFromServer) }
      }

      const seen: Array<string> = []
      let acrossProcesses: ReturnType<typeof traceOf> | undefined
      for (let index = 0; index < attemptsMax && acrossProcesses === undefined; index++) {
        const { requestId, transactionId } = await submit(index)
        await harness.poll(`withdrawal ${transactionId} CONFIRMING`, async () => {
          const read = await harness.tenantCall(first, "GET", `/v1/transactions/${transactionId}`)
          return read.json.status === "CONFIRMING" || read.json.status === "COMPLETED" ? true : undefined
        }, 60_000)
        // Spans are exported as they end, every 200 ms; the entity's top span ends last.
        const trace = await harness.poll(`the trace of ${requestId} with its entity work`, async () => {
          const found = traceOf(requestId)
          return found !== undefined && found.entityWork.length > 0 && found.joined.length === found.entityWork.length
            ? found
            : undefined
        }, 20_000).catch(() => traceOf(requestId))
        const services = [...new Set(trace?.entityWork.map((span) => span.service) ?? [])]
        seen.push(`${transactionId}: entity work ${trace?.entityWork.length ?? 0} spans from ${services.join(", ") || "nowhere"}, ` +
          `${trace?.joined.length ?? 0} joined to the request's server span`)
        if (trace !== undefined && trace.entityWork.some((span) => span.service === "coffer-b")) acrossProcesses = trace
      }
      assert.isDefined(acrossProcesses, `no withdrawal's entity work was exported by the second process joined to its request's trace:\n${seen.join("\n")}`)
      const { entityWork, joined, server } = acrossProcesses!
      assert.strictEqual(stringAttribute(server, "http.route"), "/v1/transactions")
      const onSecond = entityWork.filter((span) => span.service === "coffer-b")
      assert.isAtLeast(onSecond.length, 1)
      // Every span of the entity's work, on either process, hangs under the request's server span.
      assert.deepStrictEqual(joined.map((span) => span.spanId).sort(), entityWork.map((span) => span.spanId).sort(), seen.join("\n"))
      for (const span of onSecond) assert.strictEqual(span.traceId, server.traceId)
    }), 300_000)
})
