/**
 * What one client may hold of a listener (issue 36, "nothing held for strangers"): before, 800 connections trickling
 * their headers all stayed open, and a request could take up to Node's default 300 s to arrive. Node enforces these
 * in its HTTP server; answers for the timeouts are the envelope of ClientErrors.ts (408 `request not received in
 * time`, connection closed). Sizing and what a reverse proxy in front must do: docs/operations.md, "Connections".
 */
import type { Server, ServerOptions } from "node:http"

export const listenerLimits = {
  /** Open connections per listener; one more is closed at once, unanswered. */
  maxConnections: 1_000,
  /** The whole header block must arrive within this of the request's start. */
  headersTimeoutMillis: 10_000,
  /** The whole request, body included, must arrive within this: the body's deadline (spec 8: 30 s processing). */
  requestTimeoutMillis: 30_000,
  /** How often Node checks the two timeouts above (its default, 30 s, would let a deadline slip by as much). */
  checkIntervalMillis: 1_000
} as const

export const listenerServerOptions: ServerOptions = {
  headersTimeout: listenerLimits.headersTimeoutMillis,
  requestTimeout: listenerLimits.requestTimeoutMillis,
  connectionsCheckingInterval: listenerLimits.checkIntervalMillis
}

export const limitConnections = (server: Server): Server => {
  server.maxConnections = listenerLimits.maxConnections
  return server
}
