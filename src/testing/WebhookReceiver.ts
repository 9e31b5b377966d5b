/**
 * A tenant's webhook endpoint for scenarios: a real HTTP server on 127.0.0.1 (port 0) that records every delivery
 * with the virtual time it arrived, and misbehaves on request: fail the next N deliveries, answer slowly (in virtual
 * time, so the service's 10 s timeout is what decides), go away (connections refused) and come back on the same port.
 *
 * `outgoingHttp` counts the service's outgoing HTTP requests still open (Node's `http.client.*` diagnostics
 * channels), so the virtual clock knows a delivery is on its way even while no database session is busy.
 */
import { Clock, Effect, Scope } from "effect"
import * as diagnostics from "node:diagnostics_channel"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface ReceivedDelivery {
  /** Virtual milliseconds at arrival. */
  readonly atMillis: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** Parsed body (the event envelope). */
  readonly json: any
  /** What the receiver answered: a status, or "timeout" when the service gave up first. */
  readonly answered: number | "no answer"
}

export interface WebhookReceiver {
  readonly url: string
  readonly deliveries: ReadonlyArray<ReceivedDelivery>
  /** The next `count` deliveries are answered `status` (default 500). */
  readonly failNext: (count: number, status?: number) => void
  /** Every delivery is answered after `millis` of virtual time (0: at once). */
  readonly answerAfter: (millis: number) => void
  /** Stops listening: connections are refused until `comeBack`. */
  readonly goAway: Effect.Effect<void>
  readonly comeBack: Effect.Effect<void>
  /** Requests being held by `answerAfter` right now. */
  readonly held: () => number
}

/** The service's outgoing HTTP requests that have not closed yet. */
const openRequests = new Set<object>()
let subscribed = false
const subscribe = () => {
  if (subscribed) return
  subscribed = true
  diagnostics.subscribe("http.client.request.start", (message) => {
    const request = (message as { request: http.ClientRequest }).request
    openRequests.add(request)
    request.once("close", () => openRequests.delete(request))
  })
}
export const outgoingHttp = (): number => {
  subscribe()
  return openRequests.size
}

export const makeWebhookReceiver = (clock: Clock.Clock): Effect.Effect<WebhookReceiver, never, Scope.Scope> =>
  Effect.gen(function*() {
    subscribe()
    const deliveries: Array<ReceivedDelivery> = []
    let failures: { count: number; status: number } = { count: 0, status: 500 }
    let delayMillis = 0
    let held = 0
    const sockets = new Set<import("node:net").Socket>()

    const server = http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8")
        let json: unknown = undefined
        try {
          json = JSON.parse(body)
        } catch {
          json = undefined
        }
        const status = failures.count > 0 ? (failures.count--, failures.status) : 200
        const headers: Record<string, string> = {}
        for (const [name, value] of Object.entries(request.headers)) {
          if (typeof value === "string") headers[name] = value
        }
        const record: { -readonly [K in keyof ReceivedDelivery]: ReceivedDelivery[K] } = {
          atMillis: clock.currentTimeMillisUnsafe(),
          headers,
          body,
          json,
          answered: status
        }
        deliveries.push(record)
        const answer = () => {
          if (response.destroyed || request.destroyed) {
            record.answered = "no answer"
            return
          }
          response.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "ok" : "failed")
        }
        if (delayMillis <= 0) return answer()
        held++
        request.once("close", () => {
          if (!response.writableEnded) record.answered = "no answer"
        })
        Effect.runFork(
          Effect.sleep(delayMillis).pipe(
            Effect.andThen(Effect.sync(() => {
              held--
              answer()
            })),
            Effect.provideService(Clock.Clock, clock)
          )
        )
      })
    })
    server.on("connection", (socket) => {
      sockets.add(socket)
      socket.once("close", () => sockets.delete(socket))
    })
    const listen = (port: number) =>
      Effect.callback<number>((resume) => {
        server.listen(port, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      })
    const close = Effect.callback<void>((resume) => {
      for (const socket of sockets) socket.destroy()
      if (!server.listening) return resume(Effect.void)
      server.close(() => resume(Effect.void))
    })
    const port = yield* listen(0)
    yield* Effect.addFinalizer(() => close)
    return {
      url: `http://127.0.0.1:${port}/webhooks`,
      get deliveries() {
        return deliveries
      },
      failNext: (count, status = 500) => {
        failures = { count, status }
      },
      answerAfter: (millis) => {
        delayMillis = millis
      },
      goAway: close,
      comeBack: Effect.asVoid(listen(port)),
      held: () => held
    } satisfies WebhookReceiver
  })
