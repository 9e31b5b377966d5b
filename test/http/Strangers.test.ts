/**
 * Nothing held for strangers (issue 36, spec section 5 checks 3-6): with a Content-Length, the body's size is judged
 * from the header and the key is looked up before a byte of the body is read. The requests here send their headers
 * and never the body they announce: the answer must come at once, where before the fix the server waited for the
 * body (up to 30 s) and held it. Raw sockets, so nothing but the headers goes out.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { connect } from "node:net"
import { PublicAddress } from "../../src/App.ts"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"

/** Sends only `head` and resolves with the first bytes answered, or "no answer" after `waitMs`. */
const headOnly = (baseUrl: string, head: string, waitMs = 3_000) =>
  Effect.promise(() =>
    new Promise<string>((resolve) => {
      const { hostname, port } = new URL(baseUrl)
      const socket = connect(Number(port), hostname, () => socket.write(head))
      let answer = ""
      const timer = setTimeout(() => {
        socket.destroy()
        resolve(answer === "" ? "no answer" : answer)
      }, waitMs)
      socket.on("data", (chunk) => {
        answer += chunk.toString("latin1")
        if (answer.includes("\r\n\r\n") && answer.includes("}}")) {
          clearTimeout(timer)
          socket.destroy()
          resolve(answer)
        }
      })
      socket.on("error", () => undefined)
    })
  )

const statusAndCode = (answer: string) => {
  const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]
  const body = answer.slice(answer.indexOf("\r\n\r\n") + 4)
  const json = body.startsWith("{") ? JSON.parse(body) : undefined
  return { status: status === undefined ? answer : Number(status), code: json?.error?.code, message: json?.error?.message }
}

const headers = (lines: Record<string, string>) =>
  Object.entries(lines).map(([name, value]) => `${name}: ${value}\r\n`).join("")

layer(makeTestAppLayer(), { excludeTestServices: true })("nothing held for strangers", (it) => {
  it.effect("an unknown key with a 200 KiB body announced: 401 before the body is sent", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const answer = yield* headOnly(
        baseUrl,
        "POST /v1/users HTTP/1.1\r\n" + headers({
          host: "coffer",
          "x-api-key": "ak_000000000000000000000000",
          authorization: "Bearer a.b.c",
          "content-type": "application/json",
          "content-length": String(200 * 1024)
        }) + "\r\n"
      )
      assert.deepStrictEqual(statusAndCode(answer), { status: 401, code: "UNAUTHORIZED", message: "authentication required" })
    }))

  it.effect("check 3 before check 4: a Content-Length above 256 KiB is 422 body too large, without the body", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const answer = yield* headOnly(
        baseUrl,
        "POST /v1/users HTTP/1.1\r\n" + headers({
          host: "coffer",
          "x-api-key": "ak_000000000000000000000000",
          authorization: "Bearer a.b.c",
          "content-type": "application/json",
          "content-length": String(256 * 1024 + 1)
        }) + "\r\n"
      )
      assert.deepStrictEqual(statusAndCode(answer), { status: 422, code: "BAD_REQUEST", message: "body too large" })
    }))

  it.effect("a known key's IP allow-list refusal (check 6) comes before the body too; a good request still reads it", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const fenced = yield* provisionTenant({ allowedIps: ["203.0.113.7"] })
      const body = JSON.stringify({ customerRefId: "held" })
      const signed = signRequest({
        keyId: fenced.keyId,
        privateKey: fenced.privateKey,
        target: "/v1/users",
        body,
        nowSeconds: Math.floor(Date.now() / 1000)
      })
      const refused = yield* headOnly(
        baseUrl,
        "POST /v1/users HTTP/1.1\r\n" + headers({
          host: "coffer",
          ...signed,
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(body))
        }) + "\r\n"
      )
      assert.strictEqual(statusAndCode(refused).status, 403)
      assert.match(statusAndCode(refused).message, /^ip .* not allowed for this api key$/)

      const open = yield* provisionTenant()
      const good = signRequest({
        keyId: open.keyId,
        privateKey: open.privateKey,
        target: "/v1/users",
        body,
        nowSeconds: Math.floor(Date.now() / 1000)
      })
      const created = yield* headOnly(
        baseUrl,
        "POST /v1/users HTTP/1.1\r\n" + headers({
          host: "coffer",
          ...good,
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(body))
        }) + "\r\n" + body
      )
      assert.strictEqual(statusAndCode(created).status, 200, created)
    }))
})
