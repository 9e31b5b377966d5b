/**
 * `GET /metrics` on the operator listener, behind the operator token like every operator route: the Prometheus text
 * exposition format 0.0.4 (docs/operations.md, "Metrics"). A definition only; the handler is MetricsHandlers.ts.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"

/** The media type Prometheus expects of the text format, version 0.0.4. */
export const prometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

export class OpsMetricsApi extends HttpApiGroup.make("metrics")
  .add(HttpApiEndpoint.get("metrics", "/metrics", {
    success: Schema.String.pipe(HttpApiSchema.asText({ contentType: prometheusContentType }))
  }))
  .annotateMerge(OpenApi.annotations({ title: "Metrics" }))
{}
