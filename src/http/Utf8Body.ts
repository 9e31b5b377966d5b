/**
 * A request body must be UTF-8 (spec section 1: "requests and responses are `application/json; charset=utf-8`");
 * one that is not is a body JSON error, 422 `BAD_REQUEST` (section 7), checked once the request is authenticated,
 * where every other body error is.
 *
 * Why it is checked at all: the platform decodes a body with a lenient decoder that turns each invalid byte into
 * U+FFFD, so `{"customerRefId":"Jos\xE9"}` and `{"customerRefId":"Jos\xE8"}` (Latin-1) would both read as
 * `"Jos\uFFFD"`: two of a tenant's end users would become one account, with one deposit address and one balance.
 */
import { isUtf8 } from "node:buffer"
import { Effect } from "effect"
import { BadRequest } from "../domain/ApiError.ts"

/** The message of every body that cannot be read as JSON text (http/SchemaErrorsLayer.ts gives the same). */
export const invalidBodyMessage = "invalid request body"

export const requireUtf8Body = (body: Uint8Array): Effect.Effect<void, BadRequest> =>
  body.byteLength === 0 || isUtf8(body) ? Effect.void : Effect.fail(new BadRequest({ message: invalidBodyMessage }))
