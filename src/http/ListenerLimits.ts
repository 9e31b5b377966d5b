/**
 * What one client may hold of a listener (issue 36, "nothing held for strangers"): before, 800 connections trickling
 * their headers all stayed open, and a request could take up to Node's default 300 s to arrive. Node enforces these
 * in its HTTP server; answers for the timeouts are the envelope of ClientErrors.ts (408 `request not received in
 * time`, connection closed). Sizing and what a reverse proxy in front must do: docs/operations.md, "Connections".
 */
import type { Server, ServerOptions } from "node:http"
import type { Socket } from "node:net"

export const listenerLimits = {
  /** Open connections per listener; one more is closed at once, unanswered. */
  maxConnections: 1_000,
  /**
   * Open connections per client address (a trusted proxy's excepted): one client with no key could otherwise hold
   * all of `maxConnections`, shared by every tenant, by reopening what the header deadline closes. A tenant's
   * backend at the spec's highest rate (1,000/s) needs far fewer over keep-alive.
   */
  maxConnectionsPerAddress: 100,
  /** The whole header block must arrive within this of the request's start. */
  headersTimeoutMillis: 10_000,
  /**
   * The whole request, body included, must arrive within this: the body's deadline. One second past the 30 s
   * processing limit (spec 8, ErrorBoundary.ts), so that a body still trickling in at 30 s gets the boundary's 408
   * envelope: when Node's own deadline came first it closed the socket with the body unread, and the reset that sends
   * discarded the 408 already written (seen from outside: zero bytes at 30.1 s).
   */
  requestTimeoutMillis: 31_000,
  /** How often Node checks the two timeouts above (its default, 30 s, would let a deadline slip by as much). */
  checkIntervalMillis: 1_000
} as const

export const listenerServerOptions: ServerOptions = {
  headersTimeout: listenerLimits.headersTimeoutMillis,
  requestTimeout: listenerLimits.requestTimeoutMillis,
  connectionsCheckingInterval: listenerLimits.checkIntervalMillis
}

/**
 * Caps the listener's connections, in all and per client address. `isExempt` names addresses not capped per address
 * (the trusted proxies, whose one address carries every client behind them). A connection past a cap is closed at
 * once, unanswered, before Node reads a byte of it.
 */
export const limitConnections = (
  server: Server,
  isExempt: (address: string) => boolean = () => false,
  perAddress: number = listenerLimits.maxConnectionsPerAddress
): Server => {
  server.maxConnections = listenerLimits.maxConnections
  const open = new Map<string, number>()
  // Registered before Node's own listener, so a refused socket is gone before the HTTP parser is attached.
  server.prependListener("connection", (socket: Socket) => {
    const address = socket.remoteAddress
    if (address === undefined || isExempt(address)) return
    const count = (open.get(address) ?? 0) + 1
    if (count > perAddress) {
      socket.destroy()
      return
    }
    open.set(address, count)
    socket.once("close", () => {
      const left = (open.get(address) ?? 1) - 1
      if (left === 0) open.delete(address)
      else open.set(address, left)
    })
  })
  return server
}
