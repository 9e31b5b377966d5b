/**
 * GET /metrics: the database gauges are recomputed (ScrapeGauges.ts), then everything in effect's metric registry is
 * written in the Prometheus text format by effect's own PrometheusMetrics: the service's metrics (coffer_*) and
 * effect/cluster's (effect_cluster_*), which live in the same process-wide registry.
 */
import { Effect, Layer } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { PrometheusMetrics } from "effect/observability"
import { OpsApi } from "../ops/OpsApi.ts"
import { prometheusContentType } from "./MetricsApi.ts"
import { ScrapeGauges } from "./ScrapeGauges.ts"
import { initializeCounters } from "./ServiceMetrics.ts"

export const OpsMetricsHandlers = HttpApiBuilder.group(OpsApi, "metrics", (handlers) =>
  Effect.gen(function*() {
    const gauges = yield* ScrapeGauges
    yield* initializeCounters
    return handlers.handle("metrics", () =>
      Effect.gen(function*() {
        yield* gauges.refresh
        const body = yield* PrometheusMetrics.format()
        return HttpServerResponse.text(body, { contentType: prometheusContentType })
      }))
  })).pipe(Layer.provide(ScrapeGauges.layer))
