/**
 * Bitcoin Core's JSON-RPC (1.0 over HTTP POST) for the BTC client (docs/btc.md). Credentials come from the URL's
 * userinfo (`http://user:password@host:port`, how Bitcoin Core's `rpcuser`/`rpcpassword` are handed out) and go as
 * HTTP Basic authorization (chains/NodeUrl.ts).
 *
 * Amounts: Bitcoin Core writes every coin value as a JSON number with eight decimals (`50.00000000`). Read with
 * `JSON.parse`, such a number becomes a binary double, and 0.1 + 0.2 style errors would move satoshis. The answer's
 * text is therefore parsed with a reviver that keeps the source text of every number that is not a plain integer
 * (Node 24's `JSON.parse` source access): amounts arrive as decimal strings and `satoshis` turns them into bigint
 * exactly, never through a JS number. Heights, confirmations and output indexes stay numbers.
 *
 * Every failure (no answer, timeout, HTTP error without a JSON-RPC body, malformed answer) is a `ChainUnavailable`;
 * an error answer of the node is an `RpcError` with its code, for the callers that act on specific codes (-5 "no
 * such transaction", -8 "block height out of range", -26/-25/-27 from `sendrawtransaction`). No message ever carries
 * the URL: it holds the RPC password.
 */
import { Data, Effect } from "effect"
import { ChainUnavailable } from "../ChainClient.ts"
import { makeNodeHttpFetch } from "../NodeHttpFetch.ts"
import { splitCredentials } from "../NodeUrl.ts"

/** Bound on one call; `scantxoutset` walks the whole UTXO set and gets its own, longer bound. */
export const rpcTimeoutMillisDefault = 10_000

/** The node answered with a JSON-RPC error. */
export class RpcError extends Data.TaggedError("RpcError")<{
  readonly method: string
  readonly code: number
  readonly message: string
}> {}

export interface BtcRpc {
  readonly call: (
    method: string,
    params: ReadonlyArray<unknown>,
    options?: { readonly timeoutMillis?: number | undefined }
  ) => Effect.Effect<unknown, ChainUnavailable | RpcError>
}

const integerText = /^-?\d+$/

/** Keeps non-integer numbers as their exact source text (see the module's comment). */
const parseExact = (text: string): unknown =>
  JSON.parse(text, (_key, value: unknown, context?: { readonly source?: string }) => {
    if (typeof value !== "number" || context?.source === undefined) return value
    return integerText.test(context.source) ? value : context.source
  })

const decimalAmount = /^(\d+)(?:\.(\d{1,8}))?$/

/**
 * A coin amount of the node (BTC, 8 decimals) in satoshi, exactly: a decimal string as the parser above keeps it,
 * or a whole-number JSON number (a node may write `0` or `50`). Anything else (negative, exponent, more than 8
 * decimals) is `undefined`: the caller treats the answer as malformed.
 */
export const satoshis = (value: unknown): bigint | undefined => {
  if (typeof value === "number") return Number.isSafeInteger(value) && value >= 0 ? BigInt(value) * 100_000_000n : undefined
  if (typeof value !== "string") return undefined
  const match = decimalAmount.exec(value)
  if (match === null) return undefined
  return BigInt(match[1]!) * 100_000_000n + BigInt((match[2] ?? "").padEnd(8, "0"))
}

export const makeBtcRpc = (options: {
  readonly networkKey: string
  readonly url: string
  readonly timeoutMillis?: number | undefined
}): BtcRpc => {
  const { networkKey } = options
  const { authorization, transportUrl } = splitCredentials(options.url)
  const defaultTimeout = options.timeoutMillis ?? rpcTimeoutMillisDefault
  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })
  let nextId = 0
  // node:http over kept-alive connections (NodeHttpFetch.ts): a third of the global fetch's CPU per call.
  const nodeFetch = makeNodeHttpFetch()

  const call: BtcRpc["call"] = (method, params, callOptions) => {
    const timeoutMillis = callOptions?.timeoutMillis ?? defaultTimeout
    return Effect.gen(function*() {
      const id = ++nextId
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          nodeFetch(transportUrl, {
            method: "POST",
            headers: { "content-type": "application/json", ...(authorization === undefined ? {} : { authorization }) },
            body: JSON.stringify({ jsonrpc: "1.0", id, method, params }),
            signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMillis)])
          }).then(async (answer) => ({ status: answer.status, text: await answer.text() })),
        // The HTTP errors name the URL they were given (without the userinfo, but still the host): say only what.
        catch: (error) =>
          unavailable(`${method}: ${error instanceof Error && error.name === "TimeoutError" ? `no answer within ${timeoutMillis} ms` : "node unreachable"}`)
      })
      let body: unknown
      try {
        body = parseExact(response.text)
      } catch {
        // 401 (wrong credentials) and 403 come with an empty body.
        return yield* unavailable(`${method}: HTTP ${response.status} without a JSON-RPC answer`)
      }
      if (typeof body !== "object" || body === null) return yield* unavailable(`${method}: malformed answer`)
      const { error, result } = body as { readonly error?: unknown; readonly result?: unknown }
      if (error !== null && error !== undefined) {
        const { code, message } = error as { readonly code?: unknown; readonly message?: unknown }
        if (typeof code !== "number") return yield* unavailable(`${method}: malformed error answer`)
        return yield* new RpcError({ method, code, message: String(message).slice(0, 300) })
      }
      if (response.status !== 200) return yield* unavailable(`${method}: HTTP ${response.status}`)
      return result
    })
  }
  return { call }
}

/** A node error is not an answer the caller can use: unavailable, with the node's code and words. */
export const rpcErrorsUnavailable = (networkKey: string) => (error: RpcError) =>
  Effect.fail(new ChainUnavailable({ networkKey, message: `${error.method}: node error ${error.code} (${error.message})` }))
