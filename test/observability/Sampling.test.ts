/**
 * The trace sampler end to end (issue 32; docs/operations.md "Traces"): the service started with
 * `OTEL_TRACES_SAMPLER=parentbased_traceidratio` and `OTEL_TRACES_SAMPLER_ARG=0`, exporting over OTLP/HTTP to a
 * local receiver as a collector would. A trace that starts in the service (requests without a trace context, the
 * background loops) is never exported; a request whose `traceparent` says sampled is exported whole, under the
 * caller's span; one whose `traceparent` says not sampled is not.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { tracingLayer, tracingSettings } from "../../src/observability/Tracing.ts"
import { startLocalHttpServer } from "../support/LocalHttpServer.ts"
import { makeTestAppLayer, provisionTenant, rawRequest } from "../support/TestApp.ts"

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: { readonly stringValue?: string } }>
}

const received: Array<any> = []
const receiver = await startLocalHttpServer((request, response) => {
  received.push(JSON.parse(request.body))
  response.writeHead(200, { "content-type": "application/json" }).end("{}")
})

const spans = (): ReadonlyArray<OtlpSpan> =>
  received.flatMap((body) =>
    (body.resourceSpans as Array<any>).flatMap((resource) =>
      (resource.scopeSpans as Array<any>).flatMap((scope) => scope.spans as Array<OtlpSpan>)))

const exportIntervalMillis = 100

const tracing = Layer.unwrap(Effect.map(
  tracingSettings.pipe(Effect.orDie),
  (parsed) => tracingLayer({ ...parsed, exportIntervalMillis })
)).pipe(Layer.provide(Layer.effectDiscard(Effect.sync(() => {
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = "http/json"
  process.env.OTEL_TRACES_SAMPLER = "parentbased_traceidratio"
  process.env.OTEL_TRACES_SAMPLER_ARG = "0"
}))))

const sampledTraceId = "0af7651916cd43dd8448eb211c80319c"
const unsampledTraceId = "1bf7651916cd43dd8448eb211c80319d"
const callerSpanId = "b7ad6b7169203331"

layer(makeTestAppLayer().pipe(Layer.provide(tracing)), { excludeTestServices: true })("trace sampling", (it) => {
  it.effect("ratio 0: requests without a trace context and the background loops export nothing; a sampled traceparent's trace is exported", () =>
    Effect.gen(function*() {
      // The test's own Effect HTTP client would send its (sampled) trace context: off, so that these calls arrive as
      // a caller without tracing sends them.
      const tenant = yield* provisionTenant().pipe(Effect.withTracerEnabled(false))
      const networks = (headers: Record<string, string>) =>
        rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: "/v1/networks", tenant, headers })
      for (let i = 0; i < 5; i++) assert.strictEqual((yield* networks({})).status, 200)
      const unsampled = yield* networks({ traceparent: `00-${unsampledTraceId}-${callerSpanId}-00` })
      assert.strictEqual(unsampled.status, 200)
      // Many export intervals: anything sampled so far (the requests, the service's loops) would have been posted.
      yield* Effect.sleep(`${exportIntervalMillis * 15} millis`)
      assert.deepStrictEqual(spans().map((span) => `${span.name} ${span.kind} ${span.traceId} ${span.parentSpanId}`), [], "nothing is exported at ratio 0")

      const sampled = yield* networks({ traceparent: `00-${sampledTraceId}-${callerSpanId}-01` })
      assert.strictEqual(sampled.status, 200)
      let server: OtlpSpan | undefined
      for (let attempt = 0; attempt < 100 && server === undefined; attempt++) {
        yield* Effect.sleep(`${exportIntervalMillis} millis`)
        server = spans().find((span) => span.kind === 2 && span.traceId === sampledTraceId)
      }
      assert.isDefined(server, "the server span of the sampled traceparent's request is exported")
      assert.strictEqual(server!.parentSpanId, callerSpanId, "under the caller's span")
      const requestId = sampled.headers.get("x-request-id")
      assert.strictEqual(server!.attributes.find((entry) => entry.key === "coffer.request_id")?.value.stringValue, requestId)
      const trace = spans().filter((span) => span.traceId === sampledTraceId)
      assert.isAtLeast(trace.length, 2, "the request's own spans come along: " + trace.map((span) => span.name).join(", "))
      assert.isTrue(spans().every((span) => span.traceId === sampledTraceId), "only that trace is exported")
      assert.isFalse(spans().some((span) => span.traceId === unsampledTraceId), "an unsampled traceparent's trace is not")
    }), { timeout: 60_000 })
})
