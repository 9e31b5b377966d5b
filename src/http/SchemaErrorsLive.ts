/** Request decoding failures as declared errors (spec section 7): body 422, path or query 400. */
import { Effect } from "effect"
import { HttpApiError, HttpApiMiddleware } from "effect/http-api"
import { SchemaErrors } from "../api/SignatureAuth.ts"
import { BadRequest, BadRequestParams } from "../domain/ApiError.ts"

/** The one mapping, for both listeners. */
export const schemaErrorToApiError = (error: HttpApiError.HttpApiSchemaError) =>
  error.kind === "Payload"
    ? Effect.fail(new BadRequest({ message: "invalid request body" }))
    : error.kind === "Params" || error.kind === "Query" || error.kind === "Headers"
    ? Effect.fail(new BadRequestParams({ message: `invalid ${error.kind.toLowerCase()}` }))
    : Effect.fail(error)

export const SchemaErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(SchemaErrors, schemaErrorToApiError)
