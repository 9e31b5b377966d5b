/** The CLI's one failure: it carries what the user should read; the runner prints it and exits 1. */
import { Effect, Schema } from "effect"
import { CliError } from "effect/cli"
import { HttpClientError } from "effect/http"

export class CallFailed extends Schema.TaggedError<CallFailed>()("CallFailed", { message: Schema.String }) {
  override get [CliError.userMessage]() {
    return this.message
  }
}

export const fail = (message: string) => Effect.fail(new CallFailed({ message }))

/** The innermost reason (ECONNREFUSED, ENOTFOUND, ...) says more than "Transport error". */
const rootReason = (error: unknown): string => {
  let reason = error instanceof Error ? error.message : String(error)
  for (let cause: unknown = error, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) {
    const code = (cause as { code?: unknown }).code
    reason = typeof code === "string" ? code : cause.message
  }
  return reason
}

export const describeTransportError = (baseUrl: string) => (error: unknown) =>
  new CallFailed({
    message: `cannot reach ${baseUrl} (${rootReason(error)}); ` +
      `is the service running (npm start) with the same HOST/PORT/OPS_HOST/OPS_PORT?`
  })

/**
 * A typed client's failure as the CLI reports it: a domain error carries its status and code on its class; a
 * transport error means the service is not there.
 */
export const reportOpsFailure = (baseUrl: string) => (error: unknown) => {
  const cls = (error as { constructor?: { status?: unknown; code?: unknown } }).constructor
  if (typeof cls?.status === "number" && typeof cls.code === "string") {
    const message = (error as { message?: unknown }).message
    return new CallFailed({ message: `HTTP ${cls.status} ${cls.code}: ${String(message)}` })
  }
  if (HttpClientError.isHttpClientError(error)) return describeTransportError(baseUrl)(error)
  return new CallFailed({ message: `unexpected answer from ${baseUrl}: ${String(error)}` })
}
