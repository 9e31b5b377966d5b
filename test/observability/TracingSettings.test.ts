/**
 * The OTEL_* variables as Tracing.ts reads them, and the counted sampler (docs/operations.md "Traces").
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Tracer } from "effect"
import { sampledTracer, traceIdSampled, tracingSettings } from "../../src/observability/Tracing.ts"

const settingsOf = (env: Record<string, string>) =>
  tracingSettings.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown(env))))

describe("tracing settings", () => {
  it.effect("off without an endpoint; the base endpoint gets /v1/traces; http/protobuf and coffer by default", () =>
    Effect.gen(function*() {
      assert.isUndefined((yield* settingsOf({})).tracesUrl)
      const on = yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" })
      assert.deepInclude(on, { tracesUrl: "http://collector:4318/v1/traces", protocol: "http/protobuf", serviceName: "coffer" })
      assert.deepStrictEqual(on.sampler, { ratio: 1, parentBased: true }, "the standard default: parentbased_always_on")
      const own = yield* settingsOf({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://collector/custom",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "coffer-eu"
      })
      assert.deepInclude(own, { tracesUrl: "https://collector/custom", protocol: "http/json", serviceName: "coffer-eu" })
      assert.isUndefined((yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).tracesUrl)
      assert.isUndefined((yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).tracesUrl)
      const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }
      assert.deepStrictEqual(
        (yield* settingsOf({ ...endpoint, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" })).sampler,
        { ratio: 0.1, parentBased: false }
      )
      const parentRatio = yield* settingsOf({ ...endpoint, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" })
      assert.deepInclude(parentRatio, { tracesUrl: "http://c:4318/v1/traces", sampler: { ratio: 0, parentBased: true } })
      // Nothing could ever be sampled: no tracer at all.
      assert.isUndefined((yield* settingsOf({ ...endpoint, OTEL_TRACES_SAMPLER: "always_off" })).tracesUrl)
      assert.isUndefined((yield* settingsOf({ ...endpoint, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" })).tracesUrl)
      assert.deepInclude(
        yield* settingsOf({ ...endpoint, OTEL_TRACES_SAMPLER: "parentbased_always_off" }),
        { tracesUrl: "http://c:4318/v1/traces", sampler: { ratio: 0, parentBased: true } }
      )
    }))

  it.effect("grpc, an unknown sampler and a URL that is not http(s) stop the start, naming the variable", () =>
    Effect.gen(function*() {
      const grpc = yield* Effect.exit(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }))
      assert.isTrue(Exit.isFailure(grpc) && String(grpc.cause).includes("OTEL_EXPORTER_OTLP_PROTOCOL"))
      const sampler = yield* Effect.exit(settingsOf({ OTEL_TRACES_SAMPLER: "sometimes" }))
      assert.isTrue(Exit.isFailure(sampler) && String(sampler.cause).includes("OTEL_TRACES_SAMPLER"))
      const url = yield* Effect.exit(settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://user:secret@c" }))
      assert.isTrue(Exit.isFailure(url) && String(url.cause).includes("OTEL_EXPORTER_OTLP_ENDPOINT"))
      assert.isFalse(Exit.isFailure(url) && String(url.cause).includes("secret"), "the value is not repeated")
    }))
})

/** A tracer that records the names of its spans as they end, as the OTLP exporter queues them. */
const recordingTracer = () => {
  const exported: Array<string> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      const end = span.end.bind(span)
      span.end = (endTime, exit) => {
        end(endTime, exit)
        exported.push(options.name)
      }
      return span
    }
  })
  return { exported, tracer }
}

/** A remote parent as an incoming `traceparent` makes it (effect/http HttpTraceContext). */
const remote = (traceId: string, sampled: boolean) => Tracer.externalSpan({ traceId, spanId: "00f067aa0ba902b7", sampled })

/** Trace ids whose lowest 52 bits are small (kept at any ratio above 0) and large (left out below 1). */
const lowId = "4bf92f3577b34da6a000000000000001"
const highId = "4bf92f3577b34da6afffffffffffffff"

describe("the sampler", () => {
  it("the trace-id ratio decision reads the lowest 52 bits", () => {
    assert.isTrue(traceIdSampled(lowId, 0.01))
    assert.isFalse(traceIdSampled(highId, 0.99))
    assert.isFalse(traceIdSampled(lowId, 0))
    assert.isTrue(traceIdSampled(highId, 1))
    assert.isTrue(traceIdSampled("0000000000000000" + "0007ffffffffffff", 0.5))
    assert.isFalse(traceIdSampled("0000000000000000" + "0008000000000000", 0.5))
  })

  it.effect("a ratio keeps about that share of the roots, whole (children with their root), the others unsampled", () =>
    Effect.gen(function*() {
      const { exported, tracer } = recordingTracer()
      const sampled = sampledTracer(tracer, { ratio: 0.25, parentBased: true })
      const unsampled: Array<Tracer.Span> = []
      for (let i = 0; i < 400; i++) {
        yield* Effect.gen(function*() {
          const root = yield* Effect.currentSpan
          if (!root.sampled) unsampled.push(root)
          yield* Effect.void.pipe(Effect.withSpan("child"))
        }).pipe(Effect.withSpan("root"), Effect.orDie, Effect.withTracer(sampled))
      }
      const roots = exported.filter((name) => name === "root").length
      assert.strictEqual(exported.filter((name) => name === "child").length, roots, "each kept root's child is kept")
      assert.isTrue(roots > 50 && roots < 150, `${roots} of 400 roots kept at 0.25`)
      assert.strictEqual(unsampled.length, 400 - roots)
      const [left] = unsampled
      left!.attribute("db.query.text", "SELECT 1")
      assert.strictEqual(left!.attributes.size, 0, "an unsampled span keeps no attributes")
      assert.isFalse(traceIdSampled(left!.traceId, 0.25), "the decision is the trace id's")
    }))

  it.effect("parent-based: an incoming traceparent decides; the others decide by its trace id", () =>
    Effect.gen(function*() {
      const run = (parentBased: boolean, ratio: number, parent: Tracer.ExternalSpan) =>
        Effect.gen(function*() {
          const { exported, tracer } = recordingTracer()
          const span = yield* Effect.currentSpan.pipe(
            Effect.withSpan("server", { parent, kind: "server" }),
            Effect.orDie,
            Effect.withTracer(sampledTracer(tracer, { ratio, parentBased }))
          )
          assert.strictEqual(span.traceId, parent.traceId)
          return exported.length === 1 && span.sampled
        })
      assert.isTrue(yield* run(true, 0, remote(highId, true)), "parentbased_traceidratio 0 keeps a sampled parent's trace")
      assert.isFalse(yield* run(true, 1, remote(lowId, false)), "parentbased_always_on leaves an unsampled parent's out")
      assert.isFalse(yield* run(false, 0.5, remote(highId, true)), "traceidratio ignores the parent's flag")
      assert.isTrue(yield* run(false, 0.5, remote(lowId, false)), "traceidratio ignores the parent's flag")
      assert.isTrue(yield* run(false, 1, remote(highId, false)), "always_on keeps every trace")
    }))
})
