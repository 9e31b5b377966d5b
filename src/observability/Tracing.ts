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
 * - `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`, the standard's) and `OTEL_TRACES_SAMPLER_ARG` (the ratio of
 *   the `traceidratio` ones, 0-1, default 1): `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`,
 *   `parentbased_always_off`, `parentbased_traceidratio` (`Sampler`, `sampledTracer`). A trace's decision is taken at
 *   its root from its trace id, so every process decides a trace alike; the parent-based ones follow an incoming
 *   `traceparent`'s sampled flag instead. `always_off` (and a ratio of 0 without a parent) installs no tracer at all.
 *
 * The exporter is effect's own (effect/observability OtlpTracer, OtlpSerialization): spans are batched in memory and
 * posted in the background; its own requests are untraced. A sampled signed request is one trace (the server span,
 * the `Effect.fn` spans of the services, each SQL statement as a client span, and a withdrawal's entity work through
 * effect/cluster's message envelope, which carries the trace and span id and the sampled flag). A span left out is an
 * `UnsampledSpan`: no attributes, events or links kept, never exported.
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
  readonly sampler: Sampler
}

/** An OpenTelemetry sampler as `OTEL_TRACES_SAMPLER` names it (`always_on` is a ratio of 1, `always_off` of 0). */
export interface Sampler {
  /** The share of the traces that start here (no parent, or a remote one a non-parent-based sampler ignores) kept. */
  readonly ratio: number
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
  const parentBased = sampler.startsWith("parentbased_")

  const protocol = protocolText.trim().toLowerCase()
  if (protocol !== "http/json" && protocol !== "http/protobuf") {
    return yield* new ConfigInvalid({
      message: "OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf or http/json (grpc is not supported)"
    })
  }
  const tracesUrl = yield* Effect.gen(function*() {
    // Nothing can ever be sampled: no tracer at all (a parent-based sampler may still be handed a sampled trace).
    if (disabled || exporter === "none" || (ratio === 0 && !parentBased)) return undefined
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
  return { tracesUrl, protocol, serviceName, headers, exportIntervalMillis, maxBatchSize, sampler: { ratio, parentBased } }
})

/**
 * The trace-id ratio decision (the standard's `TraceIdRatioBased`): a trace is kept when the lowest 52 bits of its
 * id, read as a number, fall below `ratio` of their range. Trace ids are random, so this keeps `ratio` of the traces,
 * and every process (and a collector's tail sampler) reaches the same decision for one trace without a random draw.
 */
export const traceIdSampled = (traceId: string, ratio: number): boolean => {
  if (ratio >= 1) return true
  if (ratio <= 0) return false
  const low = Number.parseInt(traceId.slice(-13), 16)
  return Number.isFinite(low) && low < ratio * 2 ** 52
}

/**
 * The span of a trace left out: it keeps its ids (children and outgoing trace contexts carry the trace id and the
 * unsampled flag on) and nothing else; attributes, events and links are dropped as they come (effect's SQL client and
 * HTTP middleware set theirs on every span), and no exporter ever sees it.
 */
export class UnsampledSpan extends Tracer.NativeSpan {
  constructor(options: ConstructorParameters<typeof Tracer.NativeSpan>[0], traceId?: string) {
    super(options)
    if (traceId !== undefined) this._traceId = traceId
  }
  override attribute(): void {}
  override event(): void {}
  override addLinks(): void {}
}

/**
 * The sampler over the exporting tracer. A span under a local parent follows it (effect marks a child of an
 * unsampled span unsampled); under a remote parent (an incoming `traceparent`, or effect/cluster's envelope from
 * another process) the parent-based samplers follow the parent's flag, the others decide by the trace id; a root
 * decides by its new trace id. Only sampled spans are the exporter's; the others are `UnsampledSpan`s.
 */
export const sampledTracer = (exporting: Tracer.Tracer, sampler: Sampler): Tracer.Tracer =>
  Tracer.make({
    span(options) {
      const parent = options.parent
      if (parent._tag === "Some" && (sampler.parentBased || parent.value._tag === "Span")) {
        return options.sampled ? exporting.span(options) : new UnsampledSpan(options)
      }
      if (parent._tag === "Some") {
        // A remote parent whose decision this sampler does not take: the trace id (the parent's) decides.
        return traceIdSampled(parent.value.traceId, sampler.ratio)
          ? exporting.span({ ...options, sampled: true })
          : new UnsampledSpan({ ...options, sampled: false })
      }
      if (!options.sampled || sampler.ratio <= 0) return new UnsampledSpan(options.sampled ? { ...options, sampled: false } : options)
      // A root: its trace id is drawn by the exporting span (effect's id source), which is dropped when left out.
      const span = exporting.span(options)
      return sampler.ratio >= 1 || traceIdSampled(span.traceId, sampler.ratio)
        ? span
        : new UnsampledSpan({ ...options, sampled: false }, span.traceId)
    },
    ...(exporting.context === undefined ? {} : { context: exporting.context })
  })

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
  // Built over the exporting tracer (its exporter's fiber lives in this layer's scope), replacing it; always, so that
  // even under `always_on` a span left out by an incoming `traceparent` costs nothing.
  return Layer.effect(Tracer.Tracer)(
    Effect.map(Effect.tracer, (tracer) => sampledTracer(tracer, settings.sampler))
  ).pipe(Layer.provide(exporting))
}

/** The trace export of the whole process from the OTEL_* variables (main.ts provides it around the service). */
export const TracingLayer = Layer.unwrap(Effect.map(tracingSettings, tracingLayer))
