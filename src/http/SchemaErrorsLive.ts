/** Request decoding failures of /v1 as declared errors (spec section 7): body 422, path or query 400. */
import { Effect } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import { SchemaErrors } from "../api/SignatureAuth.ts"
import { BadRequest, BadRequestParams } from "../domain/ApiError.ts"

export const SchemaErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(SchemaErrors, (error) =>
  error.kind === "Payload"
    ? Effect.fail(new BadRequest({ message: "invalid request body" }))
    : error.kind === "Params" || error.kind === "Query" || error.kind === "Headers"
    ? Effect.fail(new BadRequestParams({ message: `invalid ${error.kind.toLowerCase()}` }))
    : Effect.fail(error))
