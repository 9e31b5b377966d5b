/** Request decoding failures as declared errors (spec section 7): body 422, path or query 400. */
import { Effect } from "effect"
import { HttpApiError, HttpApiMiddleware } from "effect/http-api"
import { SchemaErrors } from "../api/SignatureAuth.ts"
import { BadRequest, BadRequestParams } from "../domain/ApiError.ts"
import { bodyIssueMessage } from "./BodyIssueMessage.ts"

/**
 * The one mapping, for both listeners and for the router boundary: a request part that fails its schema is the
 * client's error; a response that fails is ours (undefined here, 500 at the boundary).
 */
export const apiErrorForSchemaError = (
  error: HttpApiError.HttpApiSchemaError
): BadRequest | BadRequestParams | undefined =>
  error.kind === "Payload"
    ? new BadRequest({ message: bodyIssueMessage(error.cause.issue) })
    : error.kind === "Params" || error.kind === "Query" || error.kind === "Headers"
    ? new BadRequestParams({ message: `invalid ${error.kind.toLowerCase()}` })
    : undefined

export const schemaErrorToApiError = (error: HttpApiError.HttpApiSchemaError) =>
  Effect.fail(apiErrorForSchemaError(error) ?? error)

export const SchemaErrorsLayer = HttpApiMiddleware.layerSchemaErrorTransform(SchemaErrors, schemaErrorToApiError)
