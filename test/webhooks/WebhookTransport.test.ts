/**
 * The delivery transport's connections (docs/webhooks.md, "Each attempt's connection"): attempts to one receiver
 * reuse a kept-alive connection, an unused one is closed after `idleConnectionMillis`, and an attempt aborted by its
 * time limit does not leave its connection for the next one. Real sockets, real time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import { AppConfig } from "../../src/Config.ts"
import { idleConnectionMillis, WebhookTransport } from "../../src/webhooks/WebhookTransport.ts"

/** A receiver that counts the TCP connections it accepted; `/slow` answers after 3 s. */
const receiver = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ readonly url: string; readonly connections: () => number; readonly close: () => void }>((resolve) => {
      let connections = 0
      const server = http.createServer((request, response) => {
        request.resume()
        request.on("end", () => {
          if (request.url === "/slow") setTimeout(() => response.writeHead(200).end("late"), 3_000).unref()
          else response.writeHead(200).end("ok")
        })
      })
      server.on("connection", () => connections++)
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resolve({
          url: `http://127.0.0.1:${port}`,
          connections: () => connections,
          close: () => {
            server.closeAllConnections()
            server.close()
          }
        })
      })
    })
  ),
  (server) => Effect.sync(server.close)
)

const transportLayer = WebhookTransport.layer.pipe(Layer.provide(AppConfig.layerTest({ serviceEnv: "development" })))

const post = (url: string) =>
  Effect.flatMap(
    Effect.service(WebhookTransport),
    (transport) => transport.post({ url, headers: { "content-type": "application/json" }, body: Buffer.from("{}") })
  )

describe("webhook transport connections", () => {
  it.live("attempts to one receiver share a kept-alive connection; an idle one is closed and a new one opened", () =>
    Effect.gen(function*() {
      const server = yield* receiver
      for (let attempt = 0; attempt < 20; attempt++) {
        const outcome = yield* post(`${server.url}/hook`)
        assert.deepStrictEqual(outcome, { _tag: "Response", status: 200 })
      }
      // An attempt ends at the response's head, so the next one may start before the body has freed the connection
      // and open a second; never one each.
      const opened = server.connections()
      assert.isAtMost(opened, 2, "twenty attempts in a row, one or two connections")
      yield* Effect.promise(() => sleep(idleConnectionMillis + 1_000))
      assert.deepStrictEqual(yield* post(`${server.url}/hook`), { _tag: "Response", status: 200 })
      assert.strictEqual(server.connections(), opened + 1, "idle connections were closed, the next attempt opened one")
    }).pipe(Effect.scoped, Effect.provide(transportLayer)), 20_000)

  it.live("an attempt cut off by its time limit drops its connection: the next attempt does not wait behind it", () =>
    Effect.gen(function*() {
      const server = yield* receiver
      const cut = yield* post(`${server.url}/slow`).pipe(Effect.timeoutOption(Duration.millis(200)))
      assert.isTrue(cut._tag === "None")
      assert.deepStrictEqual(yield* post(`${server.url}/hook`), { _tag: "Response", status: 200 })
      assert.strictEqual(server.connections(), 2)
    }).pipe(Effect.scoped, Effect.provide(transportLayer)), 20_000)
})
