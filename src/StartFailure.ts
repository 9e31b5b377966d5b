/**
 * The start failures a developer or operator causes and can fix (the data directory in use, a port in use, the
 * database refusing or unreachable, the embedded PostgreSQL not starting): printed as one line saying what and what
 * to do, without the stack trace, and the process exits 1. Anything else keeps the full cause (a bug deserves its
 * stack). Recognised by tag and by the listen error's code, down each failure's `cause` chain.
 */
import { Cause } from "effect"

const causeChain = (error: unknown): ReadonlyArray<unknown> => {
  const chain: Array<unknown> = []
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 10; depth++) {
    chain.push(current)
    current = (current as { cause?: unknown }).cause
  }
  return chain
}

const tagOf = (error: unknown): unknown => (error as { _tag?: unknown } | null)?._tag

interface ListenError {
  readonly code: string
  readonly address?: string
  readonly port?: number
}

const listenError = (error: unknown): ListenError | undefined => {
  const candidate = error as { code?: unknown; syscall?: unknown } | null
  return candidate !== null && typeof candidate === "object" && candidate.syscall === "listen" &&
      typeof candidate.code === "string"
    ? candidate as ListenError
    : undefined
}

const describeListen = (error: ListenError): string => {
  const where = error.port === undefined ? "a listener's address" : `${error.address ?? ""}:${error.port}`
  switch (error.code) {
    case "EADDRINUSE":
      return `cannot listen on ${where}: the port is in use (another npm start, npm run dev:anvil or another ` +
        `program). Stop that one, or choose other ports with PORT and OPS_PORT`
    case "EACCES":
      return `cannot listen on ${where}: permission denied (ports below 1024 need privileges); choose another ` +
        `PORT or OPS_PORT`
    case "EADDRNOTAVAIL":
      return `cannot listen on ${where}: no such address on this machine; check HOST and OPS_HOST`
    default:
      return `cannot listen on ${where}: ${error.code}`
  }
}

/** The line to print for a known start failure, or undefined to report the cause as it is. */
export const knownStartFailure = (cause: Cause.Cause<unknown>): string | undefined => {
  for (const reason of cause.reasons) {
    const error = Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    for (const link of causeChain(error)) {
      const listen = listenError(link)
      if (listen !== undefined) return describeListen(listen)
      if (tagOf(link) === "DatabaseStartupError" || tagOf(link) === "EmbeddedPostgresError") {
        return (link as { message: string }).message
      }
    }
  }
  return undefined
}
