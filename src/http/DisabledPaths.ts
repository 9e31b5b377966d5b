/**
 * Portal self-registration and fixed-password administrator logins are permanently disabled (spec 4.6): they answer
 * 403 whatever the body, including empty or invalid JSON, so they are plain routes that never read the body.
 */
import { Effect } from "effect"
import { HttpRouter } from "effect/http"
import { CurrentRequestId, Forbidden } from "../domain/ApiError.ts"
import { jsonEnvelope } from "./ErrorBoundary.ts"

const forbidden = (message: string) =>
  Effect.map(Effect.service(CurrentRequestId), (requestId) => jsonEnvelope(Forbidden, message, requestId))

const selfRegistration = forbidden("Self registration is disabled; contact your tenant")
const passwordLogin = forbidden("fixed-password administrator logins are disabled")

export const DisabledPaths = HttpRouter.addAll([
  HttpRouter.route("POST", "/app/v1/auth/register/code", selfRegistration),
  HttpRouter.route("POST", "/app/v1/auth/register", selfRegistration),
  HttpRouter.route("POST", "/admin/v1/auth/login", passwordLogin),
  HttpRouter.route("POST", "/tenant-admin/v1/auth/login", passwordLogin)
])
