/**
 * The signed-request middleware as seen by the API definition (spec section 5). The implementation lives in
 * src/auth/, so a client can import the definitions without server code.
 */
import { Context } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import {
  BadRequestParamsWire,
  BadRequestWire,
  ForbiddenWire,
  RateLimitedWire,
  UnauthorizedWire
} from "../domain/ApiError.ts"

/** Who signed the request: available to every handler behind SignatureAuth. */
export class CurrentApiKey extends Context.Service<CurrentApiKey, {
  readonly keyId: string
  readonly tenantId: string
}>()("coffer/CurrentApiKey") {}

export class SignatureAuth extends HttpApiMiddleware.Service<SignatureAuth, {
  provides: CurrentApiKey
  requires: never
}>()("coffer/SignatureAuth", {
  error: [BadRequestParamsWire, UnauthorizedWire, BadRequestWire, ForbiddenWire, RateLimitedWire]
}) {}

/**
 * Request decoding failures as declared errors, so OpenAPI lists them: a body that fails is 422, a path or query
 * value that fails is 400 (spec section 7).
 */
export class SchemaErrors extends HttpApiMiddleware.Service<SchemaErrors>()("coffer/SchemaErrors", {
  error: [BadRequestParamsWire, BadRequestWire]
}) {}
