/**
 * One call to a node through a library that answers with promises (viem, @solana/web3.js), the same way for every
 * family: failures become ChainUnavailable unless `recover` turns a specific answer into a value (a block above the
 * head, a transaction the node does not know), and the Effect timeout is a little longer than the library's own HTTP
 * timeout, which aborts the request itself, so a call that hangs leaves no request behind.
 */
import { Duration, Effect } from "effect"
import { ChainUnavailable } from "./ChainClient.ts"

export type NodeCall = <A, B = never>(
  what: string,
  run: () => Promise<A>,
  recover?: (error: unknown) => { readonly value: B } | undefined
) => Effect.Effect<A | B, ChainUnavailable>

export const makeNodeCall = (options: {
  readonly networkKey: string
  readonly timeoutMillis: number
  /** The failure as a message fit for logs (scrubbed of the node URL, `scrubNodeUrl`). */
  readonly describe: (error: unknown) => string
}): NodeCall => {
  const unavailable = (message: string) => new ChainUnavailable({ networkKey: options.networkKey, message })
  return (what, run, recover) =>
    Effect.tryPromise({ try: run, catch: (error) => error }).pipe(
      Effect.catch((error) => {
        const recovered = recover?.(error)
        return recovered === undefined
          ? Effect.fail(unavailable(`${what}: ${options.describe(error)}`))
          : Effect.succeed(recovered.value)
      }),
      Effect.timeoutOrElse({
        duration: Duration.millis(options.timeoutMillis + 1_000),
        orElse: () => Effect.fail(unavailable(`${what}: no answer within ${options.timeoutMillis} ms`))
      })
    )
}

/** A library's error text without the node URL (which may carry an API key or credentials), at most 500 chars. */
export const scrubNodeUrl = (text: string, url: string, transportUrl: string): string =>
  (url.length > 0 ? text.replaceAll(url, "<rpc url>").replaceAll(transportUrl, "<rpc url>") : text).slice(0, 500)
