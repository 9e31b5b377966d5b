/**
 * The HTTP under a node client's JSON-RPC calls: `node:http`/`node:https` requests over kept-alive connections, in
 * the shape of the part of `fetch` that viem's http transport uses (`fetchFn`): status, `headers.get`, a body read
 * whole as text. Why not the global `fetch` (undici): measured on these machines, 16 callers against anvil,
 * `eth_getBalance` took 330-530 µs of CPU per call through viem with undici and 110-160 µs with this, and the
 * EVM withdrawal pipeline makes several such calls per withdrawal besides the watcher's (README "Benchmark",
 * eighth measurement).
 *
 * The answer is read whole up to `maxResponseBytes` and the request is dropped beyond it, so a node cannot make the
 * service buffer without limit. An abort (viem's timeout, on the caller's signal) destroys the request and rejects
 * with the signal's reason, as `fetch` does. Idle kept connections close after `idleConnectionMillis`, before common
 * servers' own keep-alive limits, so a reused one is rarely closed under a call; a call that meets a closed
 * connection fails like any lost connection, and the callers' retry (the next scan, the next pass of a withdrawal)
 * covers it.
 */
import * as http from "node:http"
import * as https from "node:https"

/** How long an unused kept-alive connection stays open. */
export const idleConnectionMillis = 4_000
/** The largest answer read unless the caller says otherwise: a verbose block of any of the chains fits many times. */
export const responseBytesMaxDefault = 64 * 1_048_576

/** The subset of `Response` viem's http transport reads (viem/_esm/utils/rpc/http.js, utils/internal/http.js). */
export interface NodeHttpResponse {
  readonly ok: boolean
  readonly status: number
  readonly statusText: string
  readonly headers: { readonly get: (name: string) => string | null }
  /** Always null: the body is read whole, `text` answers it. */
  readonly body: null
  readonly text: () => Promise<string>
  readonly json: () => Promise<unknown>
}

/** What a call takes: the part of `RequestInit` the callers pass. */
export interface NodeHttpInit {
  readonly method?: string
  readonly headers?: unknown
  readonly body?: unknown
  readonly signal?: AbortSignal | null
}

export interface NodeHttpFetch {
  (url: string | URL, init?: NodeHttpInit): Promise<NodeHttpResponse>
  /** Closes the kept connections. */
  readonly close: () => void
}

/** Headers as viem passes them: a plain object (it builds one), or anything `Headers` takes. */
const headersOf = (headers: unknown): Record<string, string> => {
  if (headers === undefined || headers === null) return {}
  if (typeof headers === "object" && !(headers instanceof Headers) && !Array.isArray(headers)) {
    return headers as Record<string, string>
  }
  return Object.fromEntries(new Headers(headers as HeadersInit).entries())
}

export const makeNodeHttpFetch = (options: { readonly maxResponseBytes?: number } = {}): NodeHttpFetch => {
  const maxResponseBytes = options.maxResponseBytes ?? responseBytesMaxDefault
  const pool = { keepAlive: true, timeout: idleConnectionMillis }
  const agents = { http: new http.Agent(pool), https: new https.Agent(pool) }
  const call = (url: string | URL, init: NodeHttpInit = {}) =>
    new Promise<NodeHttpResponse>((resolve, reject) => {
      const target = typeof url === "string" ? new URL(url) : url
      const secure = target.protocol === "https:"
      const body = init.body === undefined || init.body === null ? undefined : String(init.body)
      const request = (secure ? https : http).request(target, {
        method: init.method ?? "GET",
        headers: {
          ...headersOf(init.headers),
          ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) })
        },
        agent: secure ? agents.https : agents.http,
        ...(init.signal === undefined || init.signal === null ? {} : { signal: init.signal })
      }, (response) => {
        const chunks: Array<Buffer> = []
        let received = 0
        response.on("data", (chunk: Buffer) => {
          received += chunk.byteLength
          if (received > maxResponseBytes) {
            response.destroy()
            reject(new Error(`the node's answer is over ${maxResponseBytes} bytes`))
            return
          }
          chunks.push(chunk)
        })
        response.on("error", reject)
        response.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          const status = response.statusCode ?? 0
          const headers = response.headers
          resolve({
            ok: status >= 200 && status <= 299,
            status,
            statusText: response.statusMessage ?? "",
            headers: {
              get: (name) => {
                const value = headers[name.toLowerCase()]
                return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value
              }
            },
            body: null,
            text: () => Promise.resolve(text),
            json: () => Promise.resolve().then(() => JSON.parse(text))
          })
        })
      })
      // As `fetch` does: an aborted call rejects with the signal's reason (AbortSignal.timeout's is a TimeoutError).
      request.on("error", (error) => reject(init.signal?.aborted === true ? init.signal.reason : error))
      request.end(body)
    })
  return Object.assign(call, {
    close: () => {
      agents.http.destroy()
      agents.https.destroy()
    }
  })
}
