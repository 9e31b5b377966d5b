/**
 * The router-level boundary of a listener: request ids, the 1 MiB body cap, the 30 s processing limit, and the one
 * error envelope for everything HttpApi does not answer itself (unknown route 404, wrong method 405, body too large
 * 413, timeouts 408, the database's session limits 503, crashes 500 without internals). Spec sections 1 ("Common
 * conventions"), 7 and 8.
 *
 * Two framework checks run here, before routing and so before authentication: a request target that does not
 * decode into storable text is 400, and a body above 1 MiB is 413 however it is framed (chunked, or a
 * Content-Length that is too large): a chunked body is counted here as it streams, before any route sees it, with at
 * most 256 KiB of it held (StreamedBody.ts), and a Content-Length above the cap is refused without reading a byte.
 */
import { ByteSize, Cause, Context, Duration, Effect, Result, Schema, type Types } from "effect"
import { FindMyWay, HttpIncomingMessage, HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiError, type HttpApiGroup } from "effect/http-api"
import {
  BadRequest,
  BadRequestParams,
  BodyTooLarge,
  CurrentRequestId,
  envelopeOf,
  type ErrorRow,
  Internal,
  MethodNotAllowed,
  NotFound,
  ProviderUnavailable,
  RequestTimedOut,
  Unauthorized
} from "../domain/ApiError.ts"
import { isSessionLimitError } from "../db/SessionLimits.ts"
import { Ids } from "../domain/Ids.ts"
import { pathParamLengthMax, undecodableTargetPart } from "./RequestTarget.ts"
import { apiErrorForSchemaError } from "./SchemaErrorsLayer.ts"
import { bodyTooLargeMessage, readStreamedBody, requestBodyHardLimitBytes, StreamedBodySize, withReadBody } from "./StreamedBody.ts"
import { invalidBodyMessage } from "./Utf8Body.ts"

/** Requests running longer answer 408 (spec section 8, "server processing time"). */
export const RequestTimeout = Context.Reference<Duration.Input>("coffer/RequestTimeout", {
  defaultValue: () => Duration.seconds(30)
})


const timedOutMessage = "request processing exceeded 30 s"
/** The media type of every JSON answer (spec section 1, "Common conventions"). */
export const jsonContentType = "application/json; charset=utf-8"

/**
 * The checks no route may skip, then `app`. A body with a Content-Length is read only by what needs it
 * (HttpServerRequest caches the bytes, so the signature check and the payload decoder read the same bytes); a chunked
 * one is counted here and the routes get the request with its body read (StreamedBody.ts).
 */
const withFrameworkChecks = <A, E, R>(app: Effect.Effect<A, E, R>) => Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const undecodable = undecodableTargetPart(request.url)
  if (undecodable !== undefined) {
    return yield* new BadRequestParams({ message: `invalid ${undecodable} parameter` })
  }
  const contentLength = request.headers["content-length"]
  // A Content-Length above the cap: refused without reading a byte.
  if (contentLength !== undefined && Number(contentLength) > requestBodyHardLimitBytes) {
    return yield* new BodyTooLarge({ message: bodyTooLargeMessage })
  }
  // A chunked body is counted here, so that one above 1 MiB is 413 wherever it goes, and no more than 256 KiB of it
  // is held. A body with a Content-Length is not read here: its size is judged from the header (above, and check 3
  // in SignatureAuthLayer.ts), and it is read only by what needs it, after the key checks, so a stranger's body is
  // never held (issue 36).
  if (request.headers["transfer-encoding"] === undefined) return yield* app
  const body = yield* readStreamedBody(request)
  return yield* app.pipe(
    Effect.provideService(HttpServerRequest.HttpServerRequest, withReadBody(request, body)),
    Effect.provideService(StreamedBodySize, body.size)
  )
})

const methods = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const

/**
 * Methods that some route of `api` accepts on this path: non-empty means 405 rather than 404. Routes whose path
 * parameters parse come first: `/v1/webhooks/event_types` allows GET alone although it has the shape of
 * `PATCH /v1/webhooks/{id}` (whose id is a UUID). When no route's parameters parse, every route of that shape counts
 * (`PUT /v1/wallets/x` is still 405, Allow: GET).
 */
export const makeAllowedMethods = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
) => {
  type Accepts = (params: Record<string, string | undefined>) => boolean
  const knownRoutes = FindMyWay.make<Accepts>({ maxParamLength: pathParamLengthMax })
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      // Path schemas of these APIs need no services to decode.
      const decode = endpoint.params === undefined
        ? undefined
        : Schema.decodeUnknownResult(endpoint.params as Schema.Codec<unknown, unknown>)
      const accepts: Accepts = (params) => decode === undefined || Result.isSuccess(decode(params))
      knownRoutes.on(endpoint.method as "GET", endpoint.path as `/${string}`, accepts)
    }
  })
  return (url: string): ReadonlyArray<string> => {
    const path = url.split("?")[0] ?? url
    const shaped = methods.flatMap((method) => {
      const found = knownRoutes.find(method, path)
      return found === undefined ? [] : [{ method, fits: found.handler(found.params) }]
    })
    const fitting = shaped.filter((route) => route.fits)
    return (fitting.length > 0 ? fitting : shaped).map((route) => route.method)
  }
}

/** An answer of the error table: the row's status unless `status` says otherwise (only `envelopeForStatus`). */
export const jsonEnvelope = (cls: ErrorRow, message: string, requestId: string, status: number = cls.status) =>
  HttpServerResponse.jsonUnsafe(envelopeOf(cls, message, requestId), { status })

interface Classified {
  readonly cls: ErrorRow
  readonly message: string
  /** Set only where a status outside the table is kept (a non-JSON 5xx of the framework). */
  readonly status?: number
}

/**
 * The answer for what ended a request. A cause is read here, not caught by tag: these arrive as failures or as
 * defects (a body read past the cap inside SignatureAuth, a session limit wrapped by a repository's `orDie`) and
 * in either order among the cause's reasons; the first reason that names a row wins.
 */
const classify = (cause: Cause.Cause<unknown>, url: string, allowed: (url: string) => ReadonlyArray<string>): Classified => {
  for (const reason of cause.reasons) {
    const error: unknown = Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    // The boundary's own rows (framework checks, the timeout) and the 400 of the request target.
    if (error instanceof RequestTimedOut) return { cls: RequestTimedOut, message: error.message }
    if (error instanceof BodyTooLarge) return { cls: BodyTooLarge, message: error.message }
    if (error instanceof BadRequestParams) return { cls: BadRequestParams, message: error.message }
    // A lock wait or statement cut by the database's session limits: busy, not broken; retry (docs/ledger.md).
    if (isSessionLimitError(error)) return { cls: ProviderUnavailable, message: "database busy, retry later" }
    if (error instanceof HttpServerError.HttpServerError) {
      const inner = error.reason
      if (inner instanceof HttpServerError.RouteNotFound) {
        return allowed(url).length > 0
          ? { cls: MethodNotAllowed, message: "method not allowed" }
          : { cls: NotFound, message: "route not found" }
      }
      if (inner instanceof HttpServerError.RequestParseError) {
        return inner.reason === "BodyTooLarge"
          ? { cls: BodyTooLarge, message: bodyTooLargeMessage }
          : { cls: BadRequest, message: invalidBodyMessage }
      }
    }
    if (HttpApiError.HttpApiSchemaError.is(error)) {
      const mapped = apiErrorForSchemaError(error)
      if (mapped !== undefined) {
        return { cls: mapped instanceof BadRequestParams ? BadRequestParams : BadRequest, message: mapped.message }
      }
    }
  }
  return { cls: Internal, message: "internal error" }
}

/** Maps a non-JSON error response (HttpApi's own empty or text answers) onto the envelope. */
const envelopeForStatus = (status: number): Classified => {
  switch (status) {
    case 401:
      return { cls: Unauthorized, message: "authentication required" }
    case 404:
      return { cls: NotFound, message: "not found" }
    case 408:
      return { cls: RequestTimedOut, message: timedOutMessage }
    case 413:
      return { cls: BodyTooLarge, message: bodyTooLargeMessage }
    // HttpApi answers 415 for a body that is not JSON; the spec calls that a body error: 422.
    case 415:
      return { cls: BadRequest, message: "request body must be application/json" }
    default:
      // A 5xx the table has no row for keeps its own status, as INTERNAL.
      return status >= 500
        ? { cls: Internal, message: "internal error", status }
        : { cls: status === 400 ? BadRequestParams : BadRequest, message: "invalid request" }
  }
}

/**
 * The boundary as a global router middleware. `api` tells a wrong method (405) from an unknown path (404); the
 * operator listener passes its own definition.
 */
export const errorBoundary = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
) => {
  const allowed = makeAllowedMethods(api)
  return HttpRouter.middleware(
    Effect.gen(function*() {
      const timeout = yield* RequestTimeout
      const ids = yield* Ids
      return (
        app: Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled>
      ): Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled, HttpServerRequest.HttpServerRequest> =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const supplied = request.headers["x-request-id"]
          const requestId = supplied !== undefined && supplied.length > 0 && supplied.length <= 200
            ? supplied
            : yield* ids.uuidV7For("request")
          const response = yield* withFrameworkChecks(app).pipe(
            Effect.timeoutOrElse({
              duration: timeout,
              orElse: () => Effect.fail(new RequestTimedOut({ message: timedOutMessage }))
            }),
            Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(requestBodyHardLimitBytes)),
            Effect.provideService(CurrentRequestId, requestId),
            Effect.catchCause((cause) =>
              Effect.gen(function*() {
                const { cls, message } = classify(cause, request.url, allowed)
                // The cause goes to the log only: a response never carries internals.
                if (cls.status >= 500) yield* Effect.logError("request failed", cause)
                let response = jsonEnvelope(cls, message, requestId)
                if (cls === MethodNotAllowed) {
                  response = HttpServerResponse.setHeader(response, "allow", allowed(request.url).join(", "))
                }
                // Both may leave a body unread on the connection: it is closed after the answer, not reused.
                if (cls === BodyTooLarge || cls === RequestTimedOut) {
                  response = HttpServerResponse.setHeader(response, "connection", "close")
                }
                return response
              })
            ),
            // Every line logged while serving the request names it (observability/Logging.ts writes it as a field).
            Effect.annotateLogs("requestId", requestId)
          )
          const isJson = response.headers["content-type"]?.startsWith("application/json") ?? false
          const final = response.status >= 400 && !isJson
            ? (() => {
              const { cls, message, status } = envelopeForStatus(response.status)
              return jsonEnvelope(cls, message, requestId, status)
            })()
            : response
          // Section 1: responses are `application/json; charset=utf-8`; the platform writes the bare media type.
          return HttpServerResponse.setHeaders(
            final,
            final.headers["content-type"] === "application/json"
              ? { "x-request-id": requestId, "content-type": jsonContentType }
              : { "x-request-id": requestId }
          )
        })
    }),
    { global: true }
  )
}
