/** RFC 3339 UTC times (spec section 1, "Times"). */
import { Clock, Effect, Schema } from "effect"

/** RFC 3339 with a `T`, seconds, optional fraction and an offset (`Z` or `±hh:mm`). */
export const rfc3339Pattern = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i

export const parseRfc3339 = (text: string): Date | undefined => {
  if (!rfc3339Pattern.test(text)) return undefined
  const date = new Date(text)
  return Number.isNaN(date.getTime()) ? undefined : date
}

export const Rfc3339 = Schema.String.check(
  Schema.makeFilter((text: string) => parseRfc3339(text) !== undefined || "expected an RFC 3339 time")
).annotate({ identifier: "Rfc3339", format: "date-time" })

export const toRfc3339 = (date: Date): string => date.toISOString()

export const nowDate: Effect.Effect<Date> = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
