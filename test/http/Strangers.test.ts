/**
 * Nothing held for strangers (issue 36, spec section 5 checks 3-6): with a Content-Length, the body's size is judged
 * from the header and the key is looked up before a byte of the body is read. The requests here send their headers
 * and never the body they announce: the answer must come at once, where before the fix the server waited for the
 * body (up to 30 s) and held it. Raw sockets, so nothing but the headers goes out.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { connect, type Socket } from "node:net"
import { PublicAddress } from "../../src/App.ts"
import { listenerLimits } from "../../src/http/ListenerLimits.ts"
import { signRequest } from "../../src/client/RequestSigner.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"

/** Sends only `head` and resolves with the first bytes answered, or "no answer" after `waitMs`. */
const headOnly = (baseUrl: string, head: string, waitMs = 3_000, localAddress?: string) =>
  Effect.promise(() =>
    new Promise<string>((resolve) => {
      const { hostname, port } = new URL(baseUrl)
      const socket = connect({ port: Number(port), host: hostname, ...(localAddress === undefined ? {} : { localAddress }) }, () =>
        socket.write(head))
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

/** `body` as HTTP/1.1 chunks of `size` bytes, with the terminating chunk unless `open`. */
const chunked = (body: Uint8Array, size: number, open = false) => {
  const parts: Array<Uint8Array> = []
  for (let offset = 0; offset < body.byteLength; offset += size) {
    const part = body.subarray(offset, Math.min(offset + size, body.byteLength))
    parts.push(Buffer.from(`${part.byteLength.toString(16)}\r\n`), part, Buffer.from("\r\n"))
  }
  if (!open) parts.push(Buffer.from("0\r\n\r\n"))
  return Buffer.concat(parts)
}


const probe = "GET /v1/webhooks/event_types HTTP/1.1\r\nhost: coffer\r\n\r\n"
const trustedProxy = "127.0.0.9"

/**
 * Opens `count` idle connections, `perAddress` from each loopback address 127.0.0.`first`, 127.0.0.`first + 1`, ...
 * and waits until the server has accepted them all.
 */
const holdConnections = (baseUrl: string, count: number, perAddress: number, first: number) =>
  Effect.promise(async () => {
    const { hostname, port } = new URL(baseUrl)
    const held: Array<Socket> = []
    for (let index = 0; index < count; index++) {
      const socket = connect({ port: Number(port), host: hostname, localAddress: `127.0.0.${first + Math.floor(index / perAddress)}` })
      socket.on("error", () => undefined)
      held.push(await new Promise<Socket>((resolve) => socket.once("connect", () => resolve(socket))))
    }
    await new Promise((resolve) => setTimeout(resolve, 500))
    return held
  })

layer(makeTestAppLayer({ trustedProxies: [trustedProxy] }), { excludeTestServices: true })("nothing held for strangers", (it) => {
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

  it.effect("a chunked signed request is counted as it streams and then served from the bytes counted", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const tenant = yield* provisionTenant()
      const body = JSON.stringify({ customerRefId: "streamed-in-chunks" })
      const signed = signRequest({
        keyId: tenant.keyId,
        privateKey: tenant.privateKey,
        target: "/v1/users",
        body,
        nowSeconds: Math.floor(Date.now() / 1000)
      })
      const answer = yield* headOnly(
        baseUrl,
        "POST /v1/users HTTP/1.1\r\n" + headers({
          host: "coffer",
          ...signed,
          "content-type": "application/json",
          "transfer-encoding": "chunked"
        }) + "\r\n" + chunked(Buffer.from(body), 7).toString("latin1")
      )
      assert.strictEqual(statusAndCode(answer).status, 200, answer)
      assert.include(answer, "streamed-in-chunks")
    }))

  it.effect("check 3 before check 4 for a chunked body: above 256 KiB is 422 body too large; above 1 MiB 413", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const head = "POST /v1/users HTTP/1.1\r\n" + headers({
        host: "coffer",
        "x-api-key": "ak_000000000000000000000000",
        authorization: "Bearer a.b.c",
        "content-type": "application/json",
        "transfer-encoding": "chunked"
      }) + "\r\n"
      const over = yield* headOnly(baseUrl, head + chunked(new Uint8Array(300 * 1024).fill(0x20), 16 * 1024).toString("latin1"))
      assert.deepStrictEqual(statusAndCode(over), { status: 422, code: "BAD_REQUEST", message: "body too large" })
      // Past 1 MiB the answer comes without the rest of the body (nor its end) ever being sent.
      const huge = yield* headOnly(baseUrl, head + chunked(new Uint8Array(1100 * 1024).fill(0x20), 64 * 1024, true).toString("latin1"))
      assert.deepStrictEqual(statusAndCode(huge), { status: 413, code: "BAD_REQUEST", message: "body too large" })
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

  it.effect("headers trickled a line a second: 408 and the connection closed once the header deadline passes", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const { hostname, port } = new URL(baseUrl)
      const started = performance.now()
      const outcome = yield* Effect.promise(() =>
        new Promise<{ readonly answer: string; readonly closed: boolean }>((resolve) => {
          const socket = connect(Number(port), hostname, () => socket.write("GET /v1/networks HTTP/1.1\r\nhost: coffer\r\n"))
          let line = 0
          const trickle = setInterval(() => socket.writable && socket.write(`x-slow-${line++}: 1\r\n`), 1_000)
          let answer = ""
          socket.on("data", (chunk) => {
            answer += chunk.toString("latin1")
          })
          const give = setTimeout(() => socket.destroy(), listenerLimits.headersTimeoutMillis + 8_000)
          socket.on("close", () => {
            clearInterval(trickle)
            clearTimeout(give)
            resolve({ answer, closed: performance.now() - started < listenerLimits.headersTimeoutMillis + 7_000 })
          })
          socket.on("error", () => undefined)
        })
      )
      assert.isTrue(outcome.closed, "the server closed the connection")
      assert.deepStrictEqual(statusAndCode(outcome.answer), {
        status: 408,
        code: "PROVIDER_UNAVAILABLE",
        message: "request not received in time"
      })
    }), 30_000)

  it.effect("connections beyond the cap are closed unanswered; the listener serves again once they go", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const perAddress = listenerLimits.maxConnectionsPerAddress
      // The whole listener's cap, from as many loopback addresses as the per-address cap needs.
      const held = yield* holdConnections(baseUrl, listenerLimits.maxConnections, perAddress, 1)
      const dropped = yield* headOnly(baseUrl, probe, 3_000, "127.0.0.250")
      for (const socket of held) socket.destroy()
      assert.strictEqual(dropped, "no answer")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 500)))
      const served = yield* headOnly(baseUrl, probe, 3_000, "127.0.0.250")
      assert.match(served, /^HTTP\/1\.1 200 /)
    }), 30_000)

  it.effect("one client address holds at most its share of connections; others and a trusted proxy are served", () =>
    Effect.gen(function*() {
      const baseUrl = yield* PublicAddress
      const perAddress = listenerLimits.maxConnectionsPerAddress
      const held = yield* holdConnections(baseUrl, perAddress, perAddress, 100)
      const dropped = yield* headOnly(baseUrl, probe, 3_000, "127.0.0.100")
      const other = yield* headOnly(baseUrl, probe, 3_000, "127.0.0.101")
      // The trusted proxy (TRUSTED_PROXIES of this file's service) carries many clients on one address.
      const proxied = yield* holdConnections(baseUrl, perAddress + 20, perAddress + 20, 9)
      const throughProxy = yield* headOnly(baseUrl, probe, 3_000, trustedProxy)
      for (const socket of [...held, ...proxied]) socket.destroy()
      assert.strictEqual(dropped, "no answer", "the address past its share")
      assert.match(other, /^HTTP\/1\.1 200 /, "another address")
      assert.match(throughProxy, /^HTTP\/1\.1 200 /, "the trusted proxy past the per-address share")
    }), 30_000)
})
