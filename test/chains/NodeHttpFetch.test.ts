/**
 * The node clients' HTTP (src/chains/NodeHttpFetch.ts): calls reuse a kept-alive connection, the answer is read as
 * viem reads it (status, headers, text), an answer over the limit is refused instead of buffered, and an abort (viem's
 * timeout) ends the call. Real sockets against a local server; viem on top of it is exercised by the anvil suites
 * (EvmChainClient, EvmFaults, EvmWithdrawals).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { idleConnectionMillis, makeNodeHttpFetch } from "../../src/chains/NodeHttpFetch.ts"
import { type LocalHttpServer, type LocalRequest, startLocalHttpServer } from "../support/LocalHttpServer.ts"

let server: LocalHttpServer
let base = ""
const seen: Array<LocalRequest> = []

beforeAll(async () => {
  server = await startLocalHttpServer((request, response) => {
    seen.push(request)
    if (request.url === "/big") return void response.writeHead(200).end("x".repeat(4_096))
    if (request.url === "/never") return
    if (request.url === "/slow") return void setTimeout(() => response.writeHead(200).end("late"), idleConnectionMillis + 1_000)
    response.writeHead(503, "Busy", { "content-type": "application/json" }).end(`{"echo":${JSON.stringify(request.body)}}`)
  })
  base = server.url
})
afterAll(() => server.close())

describe("NodeHttpFetch", () => {
  it("answers status, headers and body as viem reads them, over one kept-alive connection", async () => {
    const fetchFn = makeNodeHttpFetch({ maxResponseBytes: 1_024 })
    const before = server.connections()
    for (const payload of ["one", "two", "three"]) {
      const response = await fetchFn(`${base}/rpc`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer k" },
        body: JSON.stringify({ payload })
      })
      expect(response.ok).toBe(false)
      expect(response.status).toBe(503)
      expect(response.statusText).toBe("Busy")
      expect(response.headers.get("Content-Type")).toBe("application/json")
      expect(response.headers.get("x-absent")).toBeNull()
      expect(await response.json()).toEqual({ echo: JSON.stringify({ payload }) })
    }
    expect(server.connections() - before).toBe(1)
    const last = seen[seen.length - 1]!
    expect(last.method).toBe("POST")
    expect(last.headers.authorization).toBe("Bearer k")
    expect(last.headers["content-length"]).toBe(String(Buffer.byteLength(JSON.stringify({ payload: "three" }))))
    fetchFn.close()
  })

  it("refuses an answer over the limit instead of buffering it", async () => {
    const fetchFn = makeNodeHttpFetch({ maxResponseBytes: 1_024 })
    await expect(fetchFn(`${base}/big`, { method: "POST", body: "{}" })).rejects.toThrow("over 1024 bytes")
    const fits = makeNodeHttpFetch({ maxResponseBytes: 4_096 })
    expect((await (await fits(`${base}/big`, { method: "POST", body: "{}" })).text()).length).toBe(4_096)
    fetchFn.close()
    fits.close()
  })

  it("ends a call whose signal aborts (viem's timeout) with the signal's reason, as fetch does", async () => {
    const fetchFn = makeNodeHttpFetch({ maxResponseBytes: 1_024 })
    const started = performance.now()
    const error = await fetchFn(`${base}/never`, { method: "POST", body: "{}", signal: AbortSignal.timeout(200) })
      .then(() => undefined, (cause: unknown) => cause)
    expect((error as Error).name).toBe("TimeoutError")
    expect(performance.now() - started).toBeLessThan(5_000)
    fetchFn.close()
  })

  it("waits for a slow answer longer than the idle limit: only unused connections are closed", async () => {
    const fetchFn = makeNodeHttpFetch({ maxResponseBytes: 1_024 })
    const response = await fetchFn(`${base}/slow`, { method: "POST", body: "{}" })
    expect(await response.text()).toBe("late")
    fetchFn.close()
  }, 20_000)
})
