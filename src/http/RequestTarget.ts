/**
 * The request target (path plus query) as text, checked before routing and before authentication (spec section 7:
 * a path or query parameter that cannot be parsed is 400). The router itself is lenient where we must not be: a
 * path whose percent-encoding does not decode is a route miss there (404), and a query value that does not decode
 * is passed on still encoded. Decoding every component strictly here makes both a 400, and also catches NUL
 * (`%00`), which PostgreSQL text cannot hold, whatever route or parameter it is aimed at.
 */
import { isStorableText } from "../domain/StorableText.ts"

/**
 * Longest path parameter the routers accept, encoded. Node's 16 KiB header limit bounds the request line anyway;
 * below that, a parameter too long for its rule gets that rule's error, not the router's 404.
 */
export const pathParamLengthMax = 16 * 1024

/** `decodeURIComponent` throws on a malformed escape and on escapes that are not UTF-8 (so no lone surrogates). */
const decodes = (component: string): boolean => {
  try {
    return isStorableText(decodeURIComponent(component))
  } catch {
    return false
  }
}

/**
 * Which part of the target cannot be decoded into storable text: "path", "query", or undefined when all is well.
 * Components without `%` or NUL need no decoding, so an ordinary request costs two `indexOf`s.
 */
export const undecodableTargetPart = (url: string): "path" | "query" | undefined => {
  if (url.indexOf("%") === -1 && url.indexOf("\u0000") === -1) return undefined
  const queryStart = url.indexOf("?")
  const path = queryStart === -1 ? url : url.slice(0, queryStart)
  if (!path.split("/").every(decodes)) return "path"
  if (queryStart === -1) return undefined
  const query = url.slice(queryStart + 1).replaceAll("+", " ")
  for (const pair of query.split("&")) {
    const equals = pair.indexOf("=")
    if (equals === -1 ? !decodes(pair) : !decodes(pair.slice(0, equals)) || !decodes(pair.slice(equals + 1))) {
      return "query"
    }
  }
  return undefined
}
