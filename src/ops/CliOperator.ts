/**
 * The name the CLI's operator calls carry in `X-Operator`, so the audit trail records who made a change instead of
 * `ops-token` (ops/AuditOrigin.ts; issue 37): `--operator NAME`, else `COFFER_OPERATOR`, else the OS user name.
 */
import { Config, Effect, Option } from "effect"
import { userInfo } from "node:os"
import { fail } from "./CallFailed.ts"

/** Printable ASCII only: a header value carries bytes, and anything else would reach the trail garbled or not at all. */
const sendable = /^[\x20-\x7e]+$/

/** The OS user, when there is one with a sendable name (a container may run under a uid with no passwd entry). */
const osUser = (): string | undefined => {
  try {
    const name = userInfo().username.trim()
    return sendable.test(name) ? name : undefined
  } catch {
    return undefined
  }
}

/**
 * The operator name to send, or undefined when there is none (the change is then recorded as `ops-token`). A name
 * given by flag or environment that cannot be sent stops the call before anything is sent.
 */
export const cliOperator = Effect.fn("CliOperator.cliOperator")(function*(flag: Option.Option<string>) {
  const fromEnv = yield* Config.option(Config.String("COFFER_OPERATOR"))
  const [source, given] = Option.isSome(flag)
    ? ["--operator", flag.value]
    : Option.isSome(fromEnv)
    ? ["COFFER_OPERATOR", fromEnv.value]
    : ["", undefined]
  if (given === undefined) return osUser()
  const name = given.trim()
  if (!sendable.test(name)) return yield* fail(`${source} must be printable ASCII text; nothing was sent`)
  return name
})
