/**
 * A diagnostic for maintainers: with `COFFER_SLOW_SPANS_MS=<n>` in the environment, every span (each `Effect.fn`
 * and `withSpan`) that takes at least n ms is written to stderr with its duration, so a slow path shows where its
 * time went without an external tracing system. Off by default; the spans' times come from Effect's clock.
 */
import { Layer, Tracer } from "effect"

export const slowSpansLayer = (thresholdMillis: number): Layer.Layer<never> =>
  Layer.succeed(Tracer.Tracer)(Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      const end = span.end.bind(span)
      span.end = (endTime, exit) => {
        end(endTime, exit)
        const millis = Number(endTime - options.startTime) / 1e6
        if (millis >= thresholdMillis) {
          const parent = options.parent._tag === "Some" && options.parent.value._tag === "Span" ? ` (in ${options.parent.value.name})` : ""
          process.stderr.write(`slow span ${options.name}${parent}: ${millis.toFixed(1)} ms\n`)
        }
      }
      return span
    }
  }))
