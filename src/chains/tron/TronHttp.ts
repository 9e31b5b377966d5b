/**
 * Calls to a java-tron full node's HTTP API (`/wallet/...`, `/walletsolidity/...`): POST with a JSON body, answers
 * read with every integer as a bigint (java-tron prints int64 fields as plain JSON numbers, which JSON.parse would
 * round beyond 2^53: sun amounts reach 10^17). Plain fetch rather than tronweb: tronweb's `trx` methods wrap the
 * same calls, convert numbers to JS numbers and hide the node's error codes, and importing it costs every start
 * about 250 ms (chains/TronAddress.ts); signing keeps using it (signer/TronSigning.ts).
 *
 * Every failure (unreachable, timeout, HTTP status other than 200, an answer that is not JSON, java-tron's
 * `{"Error": ...}` answer) is a ChainUnavailable whose message never holds the URL: it may carry credentials.
 */
import { Duration, Effect, Redacted } from "effect"
import { ChainUnavailable } from "../ChainClient.ts"
import { splitCredentials } from "../NodeUrl.ts"

export const tronTimeoutMillisDefault = 10_000

export type TronJson = { readonly [key: string]: unknown }

export interface TronHttp {
  /** POSTs `body` to `path` (`/wallet/getnowblock`, ...) and gives the JSON answer. */
  readonly post: (path: string, body?: TronJson) => Effect.Effect<unknown, ChainUnavailable>
  /** `post` for a call a node may not offer: undefined when it answers 404 (no such servlet). */
  readonly postOptional: (path: string, body?: TronJson) => Effect.Effect<unknown, ChainUnavailable>
  readonly unavailable: (message: string) => ChainUnavailable
}

/** JSON.parse that keeps integers exact (Node 24: the reviver sees each number's source text). */
export const parseTronJson = (text: string): unknown =>
  JSON.parse(text, (_key: string, value: unknown, context?: { readonly source?: string }) =>
    typeof value === "number" && context?.source !== undefined && /^-?[0-9]+$/.test(context.source)
      ? BigInt(context.source)
      : value)

export const makeTronHttp = (options: {
  readonly networkKey: string
  readonly rpcUrl: Redacted.Redacted<string>
  readonly timeoutMillis?: number | undefined
}): TronHttp => {
  const { networkKey } = options
  const timeoutMillis = options.timeoutMillis ?? tronTimeoutMillisDefault
  const url = Redacted.value(options.rpcUrl)
  const { authorization, transportUrl } = splitCredentials(url)
  const base = transportUrl.endsWith("/") ? transportUrl : `${transportUrl}/`
  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })

  const scrub = (text: string) =>
    (url.length > 0 ? text.replaceAll(url, "<rpc url>").replaceAll(transportUrl, "<rpc url>") : text).slice(0, 500)

  const describe = (error: unknown): string => {
    if (!(error instanceof Error)) return scrub(String(error))
    // undici's "fetch failed" keeps the reason (ECONNREFUSED, ...) in `cause`.
    const cause = error.cause instanceof Error ? ` (${error.cause.message})` : ""
    return scrub(`${error.name}: ${error.message}${cause}`)
  }

  const notOffered = Symbol("not offered")

  const request = (path: string, body: TronJson, optional: boolean): Effect.Effect<unknown, ChainUnavailable> =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(base + path.replace(/^\//, ""), {
          method: "POST",
          headers: { "content-type": "application/json", ...(authorization === undefined ? {} : { authorization }) },
          body: JSON.stringify(body),
          signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMillis)])
        })
        const text = await response.text()
        return { status: response.status, text }
      },
      catch: (error) => unavailable(`${path}: ${describe(error)}`)
    }).pipe(
      Effect.timeoutOrElse({
        duration: Duration.millis(timeoutMillis + 1_000),
        orElse: () => Effect.fail(unavailable(`${path}: no answer within ${timeoutMillis} ms`))
      }),
      Effect.flatMap(({ status, text }) => {
        if (status === 404 && optional) return Effect.succeed(notOffered)
        if (status !== 200) return Effect.fail(unavailable(`${path}: HTTP ${status}`))
        let json: unknown
        try {
          json = parseTronJson(text)
        } catch {
          return Effect.fail(unavailable(`${path}: the answer is not JSON`))
        }
        if (typeof json === "object" && json !== null && "Error" in json) {
          return Effect.fail(unavailable(`${path}: node error: ${scrub(String((json as TronJson).Error))}`))
        }
        return Effect.succeed(json)
      })
    )

  const post = (path: string, body: TronJson = {}) => request(path, body, false)
  const postOptional = (path: string, body: TronJson = {}) =>
    Effect.map(request(path, body, true), (answer) => (answer === notOffered ? undefined : answer))

  return { post, postOptional, unavailable }
}
