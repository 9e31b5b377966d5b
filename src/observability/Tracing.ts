/**
 * Traces over OTLP/HTTP, off unless an endpoint is configured, by the standard OpenTelemetry variables (README
 * "Configuration", docs/operations.md "Traces"):
 * - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended);
 *   neither set: no tracer, Effect's native spans stay in memory and nothing leaves the process.
 * - `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the standard's default) or
 *   `http/json`; `grpc` is not offered and stops the start, naming it.
 * - `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS` (`key=value,...`), `OTEL_SERVICE_NAME`
 *   (default `coffer`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_SCHEDULE_DELAY` (ms between exports, default 5000),
 *   `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (default 1000), `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` (off).
 * - `OTEL_TRACES_SAMPLER`: `always_on`/`parentbased_always_on` (default: every trace), `always_off`/
 *   `parentbased_always_off` (off), `traceidratio`/`parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG` (0-1):
 *   one trace in round(1 / ratio) is kept, counted (`sampledTracer`); the parent-based ones follow an incoming
 *   `traceparent`'s decision.
 *
 * The exporter is effect's own (effect/observability OtlpTracer, OtlpSerialization): spans are batched in memory and
 * posted in the background; its own requests are untraced. Every span is sampled: one signed request is one trace
 * (the server span, the `Effect.fn` spans of the services, each SQL statement as a client span, and a withdrawal's
 * entity work through effect/cluster's message envelope, which carries the trace and span id).
 */
import { Config, Duration, Effect, Layer, Option, Schema, Tracer } from "effect"
import { FetchHttpClient } from "effect/http"
import { OtlpSerialization, OtlpTracer } from "effect/observability"
import { ConfigInvalid } from "../Config.ts"

export const defaultServiceName = "coffer"

export type OtlpProtocol = "http/json" | "http/protobuf"

export interface TracingSettings {
  /** Where spans are posted; undefined: tracing off. */
  readonly tracesUrl: string | undefined
  readonly protocol: OtlpProtocol
  readonly serviceName: string
  readonly headers: Readonly<Record<string, string>> | undefined
  readonly exportIntervalMillis: number | undefined
  readonly maxBatchSize: number | undefined
  /** Keep one trace in this many (1: every trace). */
  readonly samplePeriod: number
  /** Whether an incoming trace context's sampled flag decides (the `parentbased_*` samplers). */
  readonly parentBased: boolean
}

const optionalString = (name: string) => Config.option(Config.String(name)).pipe(Config.map(Option.getOrUndefined))
const headersRecord = (name: string) =>
  Config.option(Config.Record(Schema.String, Schema.StringFromUriComponent, name)).pipe(Config.map(Option.getOrUndefined))

export const tracingSettings: Effect.Effect<TracingSettings, ConfigInvalid | Config.ConfigError> = Effect.gen(function*() {
  const disabled = yield* Config.Boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false))
  const exporter = (yield* optionalString("OTEL_TRACES_EXPORTER"))?.trim().toLowerCase()
  const tracesEndpoint = yield* optionalString("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
  const baseEndpoint = yield* optionalString("OTEL_EXPORTER_OTLP_ENDPOINT")
  const protocolText = (yield* optionalString("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")) ??
    (yield* optionalString("OTEL_EXPORTER_OTLP_PROTOCOL")) ?? "http/protobuf"
  const serviceName = (yield* optionalString("OTEL_SERVICE_NAME"))?.trim() || defaultServiceName
  const headers = (yield* headersRecord("OTEL_EXPORTER_OTLP_TRACES_HEADERS")) ?? (yield* headersRecord("OTEL_EXPORTER_OTLP_HEADERS"))
  const exportIntervalMillis = Option.getOrUndefined(yield* Config.option(Config.Int("OTEL_BSP_SCHEDULE_DELAY")))
  const maxBatchSize = Option.getOrUndefined(yield* Config.option(Config.Int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")))

  const sampler = ((yield* optionalString("OTEL_TRACES_SAMPLER")) ?? "parentbased_always_on").trim().toLowerCase()
  const samplerArg = yield* optionalString("OTEL_TRACES_SAMPLER_ARG")
  const samplers = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"]
  if (!samplers.includes(sampler)) {
    return yield* new ConfigInvalid({ message: `OTEL_TRACES_SAMPLER: expected one of ${samplers.join(", ")}` })
  }
  const ratio = sampler.endsWith("traceidratio") ? Number(samplerArg ?? "1") : sampler.endsWith("always_off") ? 0 : 1
  if (!(ratio >= 0 && ratio <= 1)) {
    return yield* new ConfigInvalid({ message: "OTEL_TRACES_SAMPLER_ARG: expected a ratio between 0 and 1" })
  }
  const samplePeriod = ratio === 0 ? Number.POSITIVE_INFINITY : Math.max(1, Math.round(1 / ratio))
  const parentBased = sampler.startsWith("parentbased_")

  const protocol = protocolText.trim().toLowerCase()
  if (protocol !== "http/json" && protocol !== "http/protobuf") {
    return yield* new ConfigInvalid({
      message: "OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf or http/json (grpc is not supported)"
    })
  }
  const tracesUrl = yield* Effect.gen(function*() {
    if (disabled || exporter === "none" || samplePeriod === Number.POSITIVE_INFINITY) return undefined
    const raw = tracesEndpoint?.trim() || undefined
    const base = baseEndpoint?.trim() || undefined
    const text = raw ?? (base === undefined ? undefined : `${base.replace(/\/+$/, "")}/v1/traces`)
    if (text === undefined) return undefined
    if (!URL.canParse(text) || !/^https?:$/.test(new URL(text).protocol)) {
      // The value may carry credentials: the message names the variable only.
      return yield* new ConfigInvalid({
        message: `${raw !== undefined ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT"}: expected an http(s) URL`
      })
    }
    return text
  })
  return { tracesUrl, protocol, serviceName, headers, exportIntervalMillis, maxBatchSize, samplePeriod, parentBased }
})

/**
 * Keeps one trace in `period`: a span that starts a trace in this process (no parent, or, unless `parentBased`, a
 * parent from an incoming trace context) is sampled for every `period`-th such span, and its descendants follow it
 * (effect marks a child of an unsampled span unsampled). An unsampled span is effect's in-memory native span, so a
 * trace left out costs what tracing off costs. Counted, not drawn at random: deterministic, and no random source.
 */
export const sampledTracer = (exporting: Tracer.Tracer, period: number, parentBased: boolean): Tracer.Tracer => {
  let roots = 0
  return Tracer.make({
    span(options) {
      const parent = options.parent
      const startsTrace = parent._tag === "None" || (!parentBased && parent.value._tag === "ExternalSpan")
      const sampled = startsTrace ? options.sampled && roots++ % period === 0 : options.sampled
      return sampled ? exporting.span({ ...options, sampled }) : new Tracer.NativeSpan({ ...options, sampled })
    },
    ...(exporting.context === undefined ? {} : { context: exporting.context })
  })
}

/** The OTLP tracer for these settings, or nothing when tracing is off. */
export const tracingLayer = (settings: TracingSettings) => {
  if (settings.tracesUrl === undefined) return Layer.empty
  const exporting = OtlpTracer.layer({
    url: settings.tracesUrl,
    resource: { serviceName: settings.serviceName },
    headers: settings.headers,
    ...(settings.exportIntervalMillis === undefined ? {} : { exportInterval: Duration.millis(settings.exportIntervalMillis) }),
    ...(settings.maxBatchSize === undefined ? {} : { maxBatchSize: settings.maxBatchSize })
  }).pipe(
    Layer.provide(settings.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
    Layer.provide(FetchHttpClient.layer)
  )
  if (settings.samplePeriod === 1) return exporting
  // Built over the exporting tracer (its exporter's fiber lives in this layer's scope), replacing it.
  return Layer.effect(Tracer.Tracer)(
    Effect.map(Effect.tracer, (tracer) => sampledTracer(tracer, settings.samplePeriod, settings.parentBased))
  ).pipe(Layer.provide(exporting))
}

/** The trace export of the whole process from the OTEL_* variables (main.ts provides it around the service). */
export const TracingLayer = Layer.unwrap(Effect.map(tracingSettings, tracingLayer))
