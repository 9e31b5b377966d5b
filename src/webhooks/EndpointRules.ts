/**
 * The input rules of webhook endpoints (spec 4.5, section 8, operator interface "SERVICE_ENV"), each stated once
 * with the message the spec quotes. Pure: the service applies them, the tests hold them.
 */
import type { ServiceEnv } from "../Config.ts"
import { type EventType, eventTypes } from "./EventTypes.ts"

export const webhookUrlLengthMax = 2048
/** The spec gives no bound; every stored text has one (STYLE). */
export const webhookDescriptionLengthMax = 500
/** Section 8. */
export const activeWebhookEndpointsMax = 10
/**
 * `GET /v1/webhooks` is not paged (spec 4), and disabled endpoints are kept: the newest this many are listed, far
 * more than 10 active ones and their history.
 */
export const webhookEndpointsListMax = 1_000

export const invalidUrlMessage = "invalid url"
export const mustUseHttpsMessage = "webhook url must use https"
export const mustStartWithHttpsMessage = "webhook url must start with https://"
export const credentialsMessage = "webhook url must not contain credentials"
export const unknownEventTypeMessage = (type: string) => `unknown event type ${type}`
export const descriptionMessage = `description must be at most ${webhookDescriptionLengthMax} chars`
export const activeLimitMessage = `at most ${activeWebhookEndpointsMax} active webhook endpoints`

/**
 * Which schemes an environment delivers to: production only `https://` (spec 4.5 and 6 rule 4); development and
 * preproduction also `http://`, so a receiver on a developer machine or in a test needs no certificate.
 */
export const allowsPlainHttp = (env: ServiceEnv): boolean => env !== "production"

/**
 * Whitespace as Unicode defines it (`White_Space`, which holds U+0085 NEXT LINE) and as JavaScript's `\s` does (which
 * lacks U+0085 but holds U+FEFF): the spec's "no whitespace" refuses both.
 */
const whitespace = /[\s\p{White_Space}]/u

/**
 * The URL as given, or the message of the first rule it breaks, in this order:
 *
 * 1. empty, longer than 2048 characters, any whitespace (also leading or trailing: nothing is trimmed), or not a URL
 *    by the WHATWG parser: `invalid url`;
 * 2. production, and the URL parses with the scheme `http:`: `webhook url must use https` (a web URL, but plain);
 * 3. the text does not begin with `https://` (or, outside production, `http://`) exactly as written: any other
 *    scheme (`ftp://`, `javascript:`), or spellings the parser would repair (`HTTPS://`, `https:/x`, `https:x`):
 *    `webhook url must start with https://`. What is stored is what is called, byte for byte;
 * 4. a user name or password (`user:pass@`, also `user@`): `webhook url must not contain credentials`.
 */
export const checkWebhookUrl = (text: string, env: ServiceEnv): { readonly url: string } | { readonly error: string } => {
  if (text.length === 0 || text.length > webhookUrlLengthMax || whitespace.test(text)) return { error: invalidUrlMessage }
  let parsed: URL
  try {
    parsed = new URL(text)
  } catch {
    return { error: invalidUrlMessage }
  }
  const plainAllowed = allowsPlainHttp(env)
  if (parsed.protocol === "http:" && !plainAllowed) return { error: mustUseHttpsMessage }
  if (!(text.startsWith("https://") || (plainAllowed && text.startsWith("http://")))) {
    return { error: mustStartWithHttpsMessage }
  }
  if (parsed.hostname.length === 0) return { error: invalidUrlMessage }
  if (parsed.username.length > 0 || parsed.password.length > 0) return { error: credentialsMessage }
  return { url: text }
}

const knownEventTypes: ReadonlySet<string> = new Set(eventTypes)
export const isEventType = (value: string): value is EventType => knownEventTypes.has(value)

/** The subscription as stored: known types only, each once, in the order given; [] means every type. */
export const checkEvents = (
  values: ReadonlyArray<string>
): { readonly events: ReadonlyArray<EventType> } | { readonly error: string } => {
  const events: Array<EventType> = []
  for (const value of values) {
    if (!isEventType(value)) return { error: unknownEventTypeMessage(value) }
    if (!events.includes(value)) events.push(value)
  }
  return { events }
}

/** An empty description counts as none. */
export const checkDescription = (
  value: string | null
): { readonly description: string | null } | { readonly error: string } =>
  value === null || value.length === 0
    ? { description: null }
    : value.length > webhookDescriptionLengthMax
    ? { error: descriptionMessage }
    : { description: value }
