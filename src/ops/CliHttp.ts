/** The CLI's HTTP side: where a listener is dialled, the request as given, and the answer as printed. */
import { Console, Effect, Option } from "effect"
import { HttpClientRequest, type HttpClientResponse } from "effect/http"
import { CallFailed, fail } from "./CallFailed.ts"

export const httpMethods = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const
export type HttpMethod = (typeof httpMethods)[number]

/** A listener address as a client dials it: a wildcard bind is reached on loopback, IPv6 needs brackets. */
export const dialUrl = (host: string, port: number): string => {
  const dialHost = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host
  return `http://${dialHost.includes(":") ? `[${dialHost}]` : dialHost}:${port}`
}

const trimSlash = (url: string) => url.replace(/\/+$/, "")

/** Status line on stderr, the body pretty-printed on stdout; a status of 400 or more fails the command. */
export const printResponse = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.gen(function*() {
    const text = yield* Effect.orElseSucceed(response.text, () => "")
    const requestId = response.headers["x-request-id"]
    yield* Console.error(`HTTP ${response.status}${requestId === undefined ? "" : ` (request id ${requestId})`}`)
    if (text.length > 0) {
      let pretty = text
      try {
        pretty = JSON.stringify(JSON.parse(text), null, 2)
      } catch {
        // Not JSON (an HTML page, an empty default 404): shown as it came.
      }
      yield* Console.log(pretty)
    }
    if (response.status >= 400) return yield* fail(`the service answered HTTP ${response.status}`)
  })

export const request = (method: HttpMethod, baseUrl: string, path: string, body: Option.Option<string>) => {
  if (!path.startsWith("/")) return Effect.fail(new CallFailed({ message: `the path must start with /: ${path}` }))
  if (Option.isSome(body)) {
    // Checked here, not by the service: a shell's quoting mistake is then a line about the argument, not a 422.
    try {
      JSON.parse(body.value)
    } catch (error) {
      return Effect.fail(
        new CallFailed({
          message: `the body is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was sent. ` +
            `Quote it for the shell, e.g. '{"customerRefId":"alice"}'`
        })
      )
    }
  }
  const bare = HttpClientRequest.make(method)(`${trimSlash(baseUrl)}${path}`)
  // The body goes out byte for byte as given: the signature covers exactly these bytes.
  return Effect.succeed(Option.match(body, {
    onNone: () => bare,
    onSome: (text) => HttpClientRequest.bodyText(bare, text, "application/json")
  }))
}
