/**
 * What a request's inner layers learn about it that its outer observer (RequestObservation.ts) reports: the route
 * template the router matched and the tenant that authenticated. Kept by the Node request object (the one thing
 * every layer of one request shares, whatever copies of the HttpServerRequest the router makes), in a WeakMap so
 * nothing outlives the request. Plain writes on the hot path: no context to provide, no fiber to look up.
 */
import type { HttpServerRequest } from "effect/http"

export interface RequestFacts {
  route: string | undefined
  tenantId: string | undefined
}

const facts = new WeakMap<object, RequestFacts>()

const keyOf = (request: HttpServerRequest.HttpServerRequest): object => request.source as object

/** This request's facts, created empty on first use. */
export const requestFacts = (request: HttpServerRequest.HttpServerRequest): RequestFacts => {
  const key = keyOf(request)
  let found = facts.get(key)
  if (found === undefined) {
    found = { route: undefined, tenantId: undefined }
    facts.set(key, found)
  }
  return found
}

/** The facts recorded for this request, if any layer recorded one. */
export const recordedFacts = (request: HttpServerRequest.HttpServerRequest): RequestFacts | undefined =>
  facts.get(keyOf(request))
