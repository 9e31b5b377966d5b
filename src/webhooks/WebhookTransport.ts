/**
 * One delivery attempt on the wire: a POST with the given headers and body, answered by the response status or by
 * why there was none. It never fails: every outcome is data for the delivery record. The 10 s limit is the caller's
 * (on Effect's Clock); interrupting the effect aborts the request (and drops its connection).
 *
 * Connections are kept alive and reused per receiver (host and port): a new one costs a TCP (and TLS) handshake,
 * which was the largest part of a delivery's time (docs/benchmarks.md, 2026-11-25). The address rule (spec 6,
 * rule 4) still holds on every byte sent: a connection is checked when it is opened (the guarded lookup resolves
 * and checks the name; IP literals are checked before the request), and a kept connection stays with the address
 * it was checked on, whatever the name resolves to later. An idle connection is closed after
 * `idleConnectionMillis`, under the 5 s keep-alive of Node's own server, so a receiver rarely closes one just as an
 * attempt reuses it; when it does, the attempt fails like any lost connection and the retry schedule covers it.
 */
import { Context, Effect, Layer } from "effect"
import * as http from "node:http"
import * as https from "node:https"
import { AppConfig } from "../Config.ts"
import { literalRefusal, makeLookup } from "./AddressPolicy.ts"
import { deliveryTimeoutMillis, lastErrorLengthMax, responseBodyBytesMax } from "./DeliverySettings.ts"

export type AttemptOutcome =
  /** A response arrived; `status` is what the receiver answered. */
  | { readonly _tag: "Response"; readonly status: number }
  /** No response: connection failure, refused address, TLS failure. */
  | { readonly _tag: "NoResponse"; readonly reason: string }

export interface WebhookRequest {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

/** How long an unused kept-alive connection stays open. */
export const idleConnectionMillis = 4_000

const describe = (error: unknown): string => {
  const text = error instanceof Error ? error.message || error.name : String(error)
  return text.length > lastErrorLengthMax ? text.slice(0, lastErrorLengthMax) : text
}

/**
 * `refusePrivateAddresses` (production, spec 6 rule 4): connect only to public unicast addresses, and say why not
 * otherwise.
 */
export const makeTransport = (options: {
  readonly refusePrivateAddresses: boolean
  /** Connection pools; without them every attempt opens and closes its own connection. */
  readonly agents?: { readonly http: http.Agent; readonly https: https.Agent }
  /** Name servers to ask instead of the system's (tests). */
  readonly dnsServers?: ReadonlyArray<string>
}) => {
  // Every environment resolves through the asynchronous DNS client, never libuv's thread pool (AddressPolicy.ts).
  const lookup = makeLookup({
    refuse: options.refusePrivateAddresses,
    ...(options.dnsServers === undefined ? {} : { servers: options.dnsServers })
  })
  /**
   * The attempt with a plain callback (WebhookDelivery.ts sends a round's attempts without a fiber each): `done` is
   * called once with the outcome, never after the answered function aborted the request (which drops its connection).
   */
  const send = (request: WebhookRequest, done: (outcome: AttemptOutcome) => void): () => void => {
    let settled = false
    const finish = (outcome: AttemptOutcome) => {
      if (settled) return
      settled = true
      done(outcome)
    }
    let target: URL
    try {
      target = new URL(request.url)
    } catch {
      finish({ _tag: "NoResponse", reason: "invalid url" })
      return () => undefined
    }
    if (options.refusePrivateAddresses) {
      const reason = literalRefusal(target)
      if (reason !== undefined) {
        finish({ _tag: "NoResponse", reason: `refused: ${reason}` })
        return () => undefined
      }
    }
    const secure = target.protocol === "https:"
    const client = secure ? https : http
    const outgoing = client.request(target, {
      method: "POST",
      headers: { ...request.headers, "content-length": String(request.body.byteLength) },
      agent: options.agents === undefined ? false : secure ? options.agents.https : options.agents.http,
      lookup: lookup as never
    }, (response) => {
      let received = 0
      response.on("data", (chunk: Buffer) => {
        received += chunk.byteLength
        if (received > responseBodyBytesMax) response.destroy()
      })
      response.on("error", () => undefined)
      finish({ _tag: "Response", status: response.statusCode ?? 0 })
    })
    outgoing.on("error", (error) => finish({ _tag: "NoResponse", reason: describe(error) }))
    // Only frees the socket of a receiver that answered and then stalls its body. The 10 s that decide success are
    // the caller's, on Effect's Clock (which aborts the request); twice that here, so it never decides an attempt.
    outgoing.setTimeout(2 * deliveryTimeoutMillis, () => outgoing.destroy())
    outgoing.end(request.body)
    return () => {
      if (settled) return
      settled = true
      outgoing.destroy()
    }
  }
  return {
    send,
    /** The attempt as an effect; interrupting it aborts the request. */
    post: (request: WebhookRequest): Effect.Effect<AttemptOutcome> =>
      Effect.callback<AttemptOutcome>((resume) => {
        const abort = send(request, (outcome) => resume(Effect.succeed(outcome)))
        return Effect.sync(abort)
      })
  }
}

export class WebhookTransport extends Context.Service<WebhookTransport, ReturnType<typeof makeTransport>>()(
  "coffer/WebhookTransport"
) {
  /** Private addresses are refused in production only: development and tests deliver to 127.0.0.1. */
  static readonly layer = Layer.effect(
    WebhookTransport,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const pool = { keepAlive: true, timeout: idleConnectionMillis }
      const agents = yield* Effect.acquireRelease(
        Effect.sync(() => ({ http: new http.Agent(pool), https: new https.Agent(pool) })),
        (agents) =>
          Effect.sync(() => {
            agents.http.destroy()
            agents.https.destroy()
          })
      )
      return WebhookTransport.of(makeTransport({ refusePrivateAddresses: config.serviceEnv === "production", agents }))
    })
  )
}
