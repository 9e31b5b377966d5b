/**
 * Every request of both listeners, seen once from the outside (docs/operations.md, "Metrics, traces and logs"): the
 * request counter and duration histogram by route template, method and status, one access log line, and the request
 * id (and tenant) on the request's server span.
 *
 * It runs as the server's own middleware (`HttpRouter.serve`'s `middleware`, like effect's HttpMiddleware.logger),
 * outside the router's boundary (http/ErrorBoundary.ts), so the status it reports is the one sent, envelopes
 * included, and the duration covers the whole request. Two facts are known only inside: the route template the
 * router matched (`RouteRecording`, a route middleware) and the tenant (SignatureAuthLayer); both reach this
 * observer through RequestFacts.ts. A request no route matched is labelled `unmatched`: the raw path would give
 * every scanner's guess a series of its own.
 *
 * Cheap when tracing is off: the labelled series are looked up in a Map (no Metric object per request), the clock is
 * read twice, and the span is only touched when a real tracer samples it.
 */
import { Cause, Clock, Context, Effect, Exit, Metric, Tracer } from "effect"
import { HttpRouter, HttpServerRequest, type HttpServerResponse } from "effect/http"
import { recordedFacts, requestFacts } from "./RequestFacts.ts"

/** Seconds; from a cached read to a slow withdrawal, the 30 s request limit last. */
export const requestDurationBucketsSeconds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

export const httpRequestsTotal = Metric.counter("coffer_http_requests_total", {
  description: "HTTP requests answered, by route template, method and status (both listeners)",
  incremental: true
})

export const httpRequestDuration = Metric.histogram("coffer_http_request_duration_seconds", {
  description: "Time from the request's arrival to its answer, by route template, method and status",
  boundaries: requestDurationBucketsSeconds
})

/** The label of a request no route matched (404, 405, and anything refused before routing). */
export const unmatchedRoute = "unmatched"

const knownMethods = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

/**
 * The status reported for a request whose fiber ended without a response: interrupted (the client went away, or
 * shutdown) is nginx's 499, anything else 500.
 */
const statusOfFailure = (cause: Cause.Cause<unknown>): number => Cause.hasInterruptsOnly(cause) ? 499 : 500

interface Series {
  readonly count: Metric.Metric<number, unknown>
  readonly duration: Metric.Metric<number, unknown>
}

/** One pair of labelled series per (route, method, status), made once: the labels are bounded by the routes. */
const seriesByLabels = new Map<string, Series>()

const seriesFor = (route: string, method: string, status: number): Series => {
  const key = `${method} ${route} ${status}`
  let series = seriesByLabels.get(key)
  if (series === undefined) {
    const attributes = { route, method, status: String(status) }
    series = {
      count: Metric.withAttributes(httpRequestsTotal, attributes),
      duration: Metric.withAttributes(httpRequestDuration, attributes)
    }
    seriesByLabels.set(key, series)
  }
  return series
}

/**
 * A route middleware that notes the matched route's template for the observer. Provided to every layer that adds
 * routes (App.ts), it runs inside the router, where RouteContext names the route.
 */
export const RouteRecording = HttpRouter.middleware((effect) =>
  Effect.withFiber((fiber) => {
    const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
    const route = Context.getOrUndefined(fiber.context, HttpRouter.RouteContext)
    if (route !== undefined) requestFacts(request).route = route.route.path
    return effect
  })
).layer

/**
 * The server middleware: wraps everything the server does for a request. The access line is logged at Info with
 * `method`, `route`, `status`, `durationMs`, `requestId` (and `tenantId` when one authenticated) as annotations,
 * which the JSON logger writes as fields (Logging.ts).
 */
export const observeRequests = <E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> =>
  Effect.withFiber((fiber) => {
    const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
    const clock = fiber.getRef(Clock.Clock)
    const startedNanos = clock.currentTimeNanosUnsafe()
    // The server span the tracer opened around this middleware (only a real tracer's spans are worth annotating).
    const parent = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
    const span = parent !== undefined && parent._tag === "Span" && parent.sampled && fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer
      ? parent
      : undefined
    return Effect.onExit(app, (exit) => {
      const status = Exit.isSuccess(exit) ? exit.value.status : statusOfFailure(exit.cause)
      const requestId = Exit.isSuccess(exit) ? exit.value.headers["x-request-id"] : undefined
      const facts = recordedFacts(request)
      const route = facts?.route ?? unmatchedRoute
      const method = knownMethods.has(request.method) ? request.method : "OTHER"
      const durationNanos = clock.currentTimeNanosUnsafe() - startedNanos
      const series = seriesFor(route, method, status)
      series.count.updateUnsafe(1, fiber.context)
      series.duration.updateUnsafe(Number(durationNanos) / 1e9, fiber.context)
      if (span !== undefined) {
        if (requestId !== undefined) span.attribute("coffer.request_id", requestId)
        if (facts?.tenantId !== undefined) span.attribute("coffer.tenant_id", facts.tenantId)
      }
      const durationMs = Math.round(Number(durationNanos) / 1e5) / 10
      return Effect.logInfo(`${method} ${route} ${status} ${durationMs}ms`).pipe(
        Effect.annotateLogs({
          method,
          route,
          status,
          durationMs,
          requestId: requestId ?? "none",
          ...(facts?.tenantId === undefined ? {} : { tenantId: facts.tenantId })
        })
      )
    })
  })
