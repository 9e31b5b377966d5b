/**
 * Requests that Node's HTTP parser refuses before any route or middleware runs: a raw byte outside ASCII in the
 * request target, a header block over Node's 16 KiB, a method word it does not know, a malformed `Content-Length`,
 * a request that did not arrive within the server's request timeout, and `CONNECT` (which Node hands to a
 * `connect` listener, or drops). Node answers these with a bare status line, or nothing for `CONNECT`. Spec
 * section 7 says "All 4xx/5xx responses" carry the error envelope and section 1 that every response carries
 * `X-Request-Id`, so these answers are written here, with the connection closed after them, as Node does.
 */
import type { IncomingMessage, Server } from "node:http"
import type { Duplex } from "node:stream"
import { BadRequestParams, envelopeOf, type ErrorRow, MethodNotAllowed, RequestTimedOut } from "../domain/ApiError.ts"
import { jsonContentType } from "./ErrorBoundary.ts"

interface ParserAnswer {
  readonly status: number
  readonly reason: string
  readonly cls: ErrorRow
  readonly message: string
}

/** The answer for one of Node's parser error codes (`HPE_*`, `ERR_HTTP_*`); anything else is a malformed request. */
export const parserAnswer = (code: string | undefined): ParserAnswer => {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, reason: "Request Header Fields Too Large", cls: BadRequestParams, message: "request headers too large" }
    case "HPE_INVALID_METHOD":
      return { status: 405, reason: "Method Not Allowed", cls: MethodNotAllowed, message: "method not allowed" }
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, reason: "Request Timeout", cls: RequestTimedOut, message: "request not received in time" }
    default:
      return { status: 400, reason: "Bad Request", cls: BadRequestParams, message: "malformed request" }
  }
}

const writeAnswer = (socket: Duplex, answer: ParserAnswer, requestId: string) => {
  const body = JSON.stringify(envelopeOf(answer.cls, answer.message, requestId))
  socket.end(
    `HTTP/1.1 ${answer.status} ${answer.reason}\r\n` +
      `content-type: ${jsonContentType}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      `x-request-id: ${requestId}\r\n` +
      (answer.cls === MethodNotAllowed ? "allow: GET, POST, PUT, PATCH, DELETE\r\n" : "") +
      "connection: close\r\n\r\n" +
      body
  )
}

/**
 * Installs the answers on `server` (before it listens). `requestId` makes each answer's id (the service's `Ids`,
 * as for every other response).
 */
export const answerParserErrors = (server: Server, requestId: () => string): Server => {
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    // As Node's own handler: answer only while nothing of a response is on this socket yet.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage
    if (error.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent === true) {
      socket.destroy()
      return
    }
    writeAnswer(socket, parserAnswer(error.code), requestId())
  })
  server.on("connect", (_request: IncomingMessage, socket: Duplex) => {
    socket.on("error", () => socket.destroy())
    writeAnswer(socket, parserAnswer("HPE_INVALID_METHOD"), requestId())
  })
  return server
}
