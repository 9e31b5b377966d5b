/**
 * Path and query values decoded against the endpoint's schemas ahead of authentication: a value that fails its
 * declared type (a `customerRefId` over 128 chars, an id that is not a UUID, a `limit` that is not 1-200) is 400
 * `BAD_REQUEST` before authentication (spec section 7), so the authentication middlewares of both listeners run
 * this first. HttpApi decodes the same values again for the handler; the schemas are pure, so both agree.
 */
import { Effect, Schema } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import type { HttpApiEndpoint } from "effect/http-api"
import { BadRequestParams } from "../domain/ApiError.ts"

interface ParameterDecoders {
  readonly params: ((input: unknown) => Effect.Effect<unknown, Schema.SchemaError>) | undefined
  readonly query: ((input: unknown) => Effect.Effect<unknown, Schema.SchemaError>) | undefined
}
const decodersByEndpoint = new WeakMap<HttpApiEndpoint.Top, ParameterDecoders>()
const parameterDecoders = (endpoint: HttpApiEndpoint.Top): ParameterDecoders => {
  const cached = decodersByEndpoint.get(endpoint)
  if (cached !== undefined) return cached
  // Path and query schemas of these APIs need no services to decode.
  const decoders: ParameterDecoders = {
    params: endpoint.params === undefined
      ? undefined
      : Schema.decodeUnknownEffect(endpoint.params as Schema.Codec<unknown, unknown>),
    query: endpoint.query === undefined
      ? undefined
      : Schema.decodeUnknownEffect(Schema.toCodecArrayFromSingle(endpoint.query as Schema.Codec<unknown, unknown>))
  }
  decodersByEndpoint.set(endpoint, decoders)
  return decoders
}

export const checkParameters = (endpoint: HttpApiEndpoint.Top) =>
  Effect.gen(function*() {
    const decoders = parameterDecoders(endpoint)
    if (decoders.params !== undefined) {
      const route = yield* HttpRouter.RouteContext
      yield* Effect.mapError(
        decoders.params(route.params),
        () => new BadRequestParams({ message: "invalid path parameter" })
      )
    }
    if (decoders.query !== undefined) {
      const query = yield* HttpServerRequest.ParsedSearchParams
      yield* Effect.mapError(
        decoders.query(query),
        () => new BadRequestParams({ message: "invalid query parameter" })
      )
    }
  })
