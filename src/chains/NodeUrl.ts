/** What every family's node client does with the URL `CHAIN_RPC_URLS` gives it. */

/**
 * A URL's userinfo (`https://user:password@host/...`, how node providers and Bitcoin-style RPC hand out credentials)
 * as an HTTP Basic `authorization` header: fetch refuses to send a request to a URL that holds credentials
 * ("Request cannot be constructed from a URL that includes credentials"), so it would never reach the node.
 */
export const splitCredentials = (url: string): { readonly transportUrl: string; readonly authorization?: string } => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return { transportUrl: url }
  }
  if (parsed.username === "" && parsed.password === "") return { transportUrl: url }
  const user = decodeURIComponent(parsed.username)
  const password = decodeURIComponent(parsed.password)
  parsed.username = ""
  parsed.password = ""
  return { transportUrl: parsed.toString(), authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}` }
}
