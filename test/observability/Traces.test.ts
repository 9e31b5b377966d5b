/**
 * Traces over OTLP/HTTP (issue 32; docs/operations.md "Traces"), received on a local HTTP receiver as a collector
 * would: one signed `POST /v1/transactions` is one trace, with the request's server span (method, route, status, the
 * request id it answered with), its SQL statements as client spans beneath it, and the withdrawal entity's work
 * joined to the same trace through effect/cluster's message envelope.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { tracingLayer, tracingSettings } from "../../src/observability/Tracing.ts"
import { startLocalHttpServer } from "../support/LocalHttpServer.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import { fund, settings, waitFor, walletOf, withdraw } from "../withdrawals/WithdrawalHelpers.ts"

interface OtlpAttribute {
  readonly key: string
  readonly value: { readonly stringValue?: string; readonly intValue?: string | number; readonly boolValue?: boolean }
}
interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<OtlpAttribute>
}

const received: Array<{ readonly url: string; readonly contentType: string | undefined; readonly body: any }> = []
const receiver = await startLocalHttpServer((request, response) => {
  received.push({ url: request.url, contentType: request.headers["content-type"], body: JSON.parse(request.body) })
  response.writeHead(200, { "content-type": "application/json" }).end("{}")
})

const spans = (): ReadonlyArray<OtlpSpan> =>
  received.flatMap((batch) =>
    (batch.body.resourceSpans as Array<any>).flatMap((resource) =>
      (resource.scopeSpans as Array<any>).flatMap((scope) => scope.spans as Array<OtlpSpan>)))

const attribute = (span: OtlpSpan, key: string): unknown => {
  const value = span.attributes.find((entry) => entry.key === key)?.value
  return value === undefined ? undefined : value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue))
}

/** The standard variables, as an operator sets them, read by the service's own settings (Tracing.ts). */
const tracing = Layer.unwrap(Effect.map(
  tracingSettings.pipe(Effect.orDie),
  (parsed) => tracingLayer({ ...parsed, exportIntervalMillis: 100 })
)).pipe(Layer.provide(Layer.effectDiscard(Effect.sync(() => {
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = "http/json"
  delete process.env.OTEL_SERVICE_NAME
}))))

const eth = "ETH_SEPOLIA_ETH"
const ethTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"

layer(makeTestAppLayer().pipe(Layer.provide(tracing)), { excludeTestServices: true })("OTLP traces", (it) => {
  it.effect("a signed POST /v1/transactions is one trace: server span, SQL child spans, the entity's work", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      yield* settings(tenant, { withdrawFees: { [eth]: (10n ** 15n).toString() } })
      const payer = yield* walletOf(tenant, "alice", "ETH_SEPOLIA")
      yield* fund(tenant, payer.walletId, eth, 10n ** 18n)
      const response = yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "traced-1")
      assert.strictEqual(response.status, 202, response.text)
      const requestId = response.headers.get("x-request-id")!
      yield* waitFor(tenant, response.json.transactionId, "CONFIRMING")

      // The server span of that request, found by the request id it answered with, and the rest of its trace: spans
      // are exported as they end, so the entity's spans (and the ones between them and the request) may come later.
      let server: OtlpSpan | undefined
      let trace: ReadonlyArray<OtlpSpan> = []
      const complete = () => {
        const ids = new Set(trace.map((span) => span.spanId))
        return trace.some((span) => span.name.startsWith("WithdrawalProcessor.")) &&
          trace.every((span) => span === server || (span.parentSpanId !== undefined && ids.has(span.parentSpanId)))
      }
      for (let attempt = 0; attempt < 150; attempt++) {
        server = spans().find((span) => span.kind === 2 && attribute(span, "coffer.request_id") === requestId)
        trace = server === undefined ? [] : spans().filter((span) => span.traceId === server!.traceId)
        if (complete()) break
        yield* Effect.sleep("100 millis")
      }
      assert.isDefined(server, "the server span carries coffer.request_id")
      assert.strictEqual(received[0]!.url, "/v1/traces")
      assert.strictEqual(received[0]!.contentType, "application/json")
      const resource = (received[0]!.body.resourceSpans[0].resource.attributes as Array<OtlpAttribute>)
      assert.strictEqual(resource.find((entry) => entry.key === "service.name")?.value.stringValue, "coffer")
      assert.strictEqual(attribute(server!, "http.request.method"), "POST")
      assert.strictEqual(attribute(server!, "http.route"), "/v1/transactions")
      assert.strictEqual(attribute(server!, "http.response.status_code"), 202)
      assert.strictEqual(attribute(server!, "coffer.tenant_id"), tenant.tenantId)
      assert.isUndefined(server!.parentSpanId || undefined, "the request starts its own trace")

      // Its SQL statements: client spans with their text, descendants of the server span.
      const byId = new Map(trace.map((span) => [span.spanId, span]))
      const descendsFromServer = (span: OtlpSpan) => {
        let current: OtlpSpan | undefined = span
        for (let depth = 0; current !== undefined && depth < 100; depth++) {
          if (current.spanId === server!.spanId) return true
          current = current.parentSpanId === undefined ? undefined : byId.get(current.parentSpanId)
        }
        return false
      }
      const statements = trace.filter((span) => span.kind === 3 && attribute(span, "db.system.name") === "postgresql")
      assert.isAtLeast(statements.length, 3, trace.map((span) => span.name).join(", "))
      const chain = (span: OtlpSpan): string => {
        const names: Array<string> = []
        let current: OtlpSpan | undefined = span
        for (let depth = 0; current !== undefined && depth < 100; depth++) {
          names.push(current.name)
          const parent: string | undefined = current.parentSpanId
          current = parent === undefined ? undefined : byId.get(parent)
          if (current === undefined && parent !== undefined && parent !== "") names.push(`missing ${parent}`)
        }
        return names.join(" <- ")
      }
      assert.isTrue(statements.every(descendsFromServer), statements.filter((s) => !descendsFromServer(s)).map(chain).join("\n"))
      assert.isTrue(statements.some((span) => String(attribute(span, "db.query.text")).includes("INSERT INTO withdrawals")))

      // The withdrawal entity's work, in the same trace and under the same request.
      const entityWork = trace.filter((span) => span.name.startsWith("WithdrawalProcessor."))
      assert.isAtLeast(entityWork.length, 1, trace.map((span) => span.name).join(", "))
      assert.isTrue(entityWork.every(descendsFromServer), trace.map((span) => `${span.name}<-${span.parentSpanId}`).join(", "))
    }), { timeout: 60_000 })
})
