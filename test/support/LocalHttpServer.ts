/**
 * A plain HTTP server on 127.0.0.1 for tests of the service's HTTP clients: each request is answered by `answer`
 * once its body is read whole (or left hanging when it answers nothing); accepted connections are counted.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface LocalRequest {
  readonly method: string
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

export interface LocalHttpServer {
  readonly url: string
  readonly port: number
  readonly connections: () => number
  readonly close: () => Promise<void>
}

export const startLocalHttpServer = (
  answer: (request: LocalRequest, response: http.ServerResponse) => void
): Promise<LocalHttpServer> =>
  new Promise((resolve) => {
    let connections = 0
    const server = http.createServer((request, response) => {
      let body = ""
      request.on("data", (chunk: Buffer) => body += chunk.toString("utf8"))
      request.on("end", () => answer({ method: request.method!, url: request.url!, headers: request.headers, body }, response))
    })
    server.on("connection", () => connections++)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        port,
        connections: () => connections,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
