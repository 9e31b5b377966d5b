/**
 * The OTEL_* variables as Tracing.ts reads them, and the counted sampler (docs/operations.md "Traces").
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Tracer } from "effect"
import { sampledTracer, tracingSettings } from "../../src/observability/Tracing.ts"

const settingsOf = (env: Record<string, string>) =>
  tracingSettings.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown(env))))

describe("tracing settings", () => {
  it.effect("off without an endpoint; the base endpoint gets /v1/traces; http/protobuf and coffer by default", () =>
    Effect.gen(function*() {
      assert.isUndefined((yield* settingsOf({})).tracesUrl)
      const on = yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" })
      assert.deepInclude(on, { tracesUrl: "http://collector:4318/v1/traces", protocol: "http/protobuf", serviceName: "coffer", samplePeriod: 1 })
      const own = yield* settingsOf({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://collector/custom",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "coffer-eu"
      })
      assert.deepInclude(own, { tracesUrl: "https://collector/custom", protocol: "http/json", serviceName: "coffer-eu" })
      assert.isUndefined((yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).tracesUrl)
      assert.isUndefined((yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).tracesUrl)
      assert.strictEqual(
        (yield* settingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" })).samplePeriod,
        10
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

describe("the counted sampler", () => {
  it.effect("keeps one trace in N whole, children with their root; the others stay native spans", () =>
    Effect.gen(function*() {
      const exported: Array<string> = []
      const recording = Tracer.make({
        span(options) {
          const span = new Tracer.NativeSpan(options)
          exported.push(options.name)
          return span
        }
      })
      const tracer = sampledTracer(recording, 3, true)
      for (let i = 0; i < 6; i++) {
        yield* Effect.void.pipe(Effect.withSpan(`child ${i}`), Effect.withSpan(`root ${i}`), Effect.withTracer(tracer))
      }
      assert.deepStrictEqual(exported, ["root 0", "child 0", "root 3", "child 3"])
    }))
})
