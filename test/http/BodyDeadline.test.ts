/**
 * The body's deadline (issue 36, docs/operations.md "Connections"): a signed request whose declared body trickles in
 * slower than the processing limit (30 s; 4 s in this file) is answered 408 `PROVIDER_UNAVAILABLE` and its connection closed. Found from
 * outside: Node's own request deadline (also 30 s) closed the socket with the body unread, and the reset that sends
 * discarded the boundary's 408, so the client got zero bytes while the access line said 408.
 */
import { assert, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { connect } from "node:net"
import { PublicAddress } from "../../src/App.ts"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { RequestTimeout } from "../../src/http/ErrorBoundary.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"

/** The processing limit shortened for this file (30 s in service): the answer and the close are what is held. */
const limit = Duration.seconds(4)

layer(makeTestAppLayer().pipe(Layer.provide(Layer.succeed(RequestTimeout, limit))), { excludeTestServices: true })("the body's deadline", (it) => {
  it.effect("a declared body trickled a byte a second: 408 PROVIDER_UNAVAILABLE at the processing limit, then closed", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const tenant = yield* provisionTenant()
      const body = JSON.stringify({ customerRefId: "x".repeat(60) })
      const signed = signRequest({
        keyId: tenant.keyId,
        privateKey: tenant.privateKey,
        target: "/v1/users",
        body,
        nowSeconds: Math.floor(Date.now() / 1000)
      })
      const { hostname, port } = new URL(baseUrl)
      const started = performance.now()
      const outcome = yield* Effect.promise(() =>
        new Promise<{ readonly answer: string; readonly afterMs: number }>((resolve) => {
          let answer = ""
          let sent = 0
          const socket = connect(Number(port), hostname, () => {
            socket.write(
              "POST /v1/users HTTP/1.1\r\nhost: coffer\r\ncontent-type: application/json\r\n" +
                Object.entries(signed).map(([name, value]) => `${name}: ${value}\r\n`).join("") +
                `content-length: ${Buffer.byteLength(body)}\r\n\r\n`
            )
          })
          // One byte a second: the body (about 80 bytes) would take over a minute.
          const trickle = setInterval(() => socket.writable && socket.write(body.slice(sent, ++sent)), 1_000)
          const give = setTimeout(() => socket.destroy(), 45_000)
          socket.on("data", (chunk) => {
            answer += chunk.toString("latin1")
          })
          socket.on("close", () => {
            clearInterval(trickle)
            clearTimeout(give)
            resolve({ answer, afterMs: performance.now() - started })
          })
          socket.on("error", () => undefined)
        })
      )
      assert.match(outcome.answer, /^HTTP\/1\.1 408 /, `answer after ${outcome.afterMs.toFixed(0)} ms: ${JSON.stringify(outcome.answer)}`)
      const envelope = JSON.parse(outcome.answer.slice(outcome.answer.indexOf("\r\n\r\n") + 4))
      assert.strictEqual(envelope.error.code, "PROVIDER_UNAVAILABLE")
      assert.strictEqual(envelope.error.retryable, true)
      assert.isBelow(outcome.afterMs, Duration.toMillis(limit) + 10_000, "closed after the answer")
    }), 60_000)
})
