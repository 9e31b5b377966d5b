/**
 * A JSON-RPC proxy in front of a test node, for fault tests: `pass` forwards, `garbage` answers 200 with bytes that
 * are not JSON, `error500` answers an HTTP 500, `reset` destroys the connection without an answer, `nullReceipts`
 * forwards everything but answers `null` to receipt and transaction lookups (a node that forgot), `refuseNextSend`
 * answers the next eth_sendRawTransaction with a JSON-RPC error the node means for good ("invalid sender"), without
 * passing it on, then goes back to `pass`. The mode can be
 * switched at any time; the service under test only ever sees the proxy's URL.
 */
import http from "node:http"
import { afterAll } from "vitest"
import { freePortSync } from "./AnvilBinary.ts"

export type ProxyMode = "pass" | "garbage" | "error500" | "reset" | "nullReceipts" | "refuseNextSend"

export interface RpcProxy {
  readonly url: string
  mode: ProxyMode
  /** Requests seen per JSON-RPC method (all modes). */
  readonly calls: Map<string, number>
}

export const startRpcProxy = (target: string): RpcProxy => {
  const port = freePortSync()
  const proxy: RpcProxy = { url: `http://127.0.0.1:${port}`, mode: "pass", calls: new Map() }
  const server = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      let method = "?"
      try {
        method = (JSON.parse(body) as { method?: string }).method ?? "?"
      } catch {
        // a batch or garbage: counted as "?"
      }
      proxy.calls.set(method, (proxy.calls.get(method) ?? 0) + 1)
      switch (proxy.mode) {
        case "garbage":
          response.writeHead(200, { "content-type": "application/json" }).end("<html>bad gateway</html>")
          return
        case "error500":
          response.writeHead(500).end("internal error")
          return
        case "reset":
          request.socket.destroy()
          return
        case "refuseNextSend":
          if (method === "eth_sendRawTransaction") {
            proxy.mode = "pass"
            const id = (JSON.parse(body) as { id?: unknown }).id ?? null
            response.writeHead(200, { "content-type": "application/json" }).end(
              JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32000, message: "invalid sender" } })
            )
            return
          }
          break
        case "nullReceipts":
          if (method === "eth_getTransactionReceipt" || method === "eth_getTransactionByHash") {
            const id = (JSON.parse(body) as { id?: unknown }).id ?? null
            response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result: null }))
            return
          }
      }
      fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body }).then(
        async (answer) => response.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text()),
        () => response.writeHead(502).end()
      )
    })
  })
  server.listen(port, "127.0.0.1")
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return proxy
}
