/** RFC 3339 UTC times (spec section 1, "Times"). */
import { Clock, Effect, Schema } from "effect"

/**
 * RFC 3339 (section 5.6) with a `T`, seconds, an optional fraction of any length and an offset (`Z` or `±hh:mm`),
 * with every field in its range (section 5.7): no 30th of February, no hour 24. `new Date` alone would roll
 * `2026-11-31` over to the 1st of December, which would move a reconciliation window to another day.
 */
const rfc3339Parts = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:Z|([+-])(\d{2}):(\d{2}))$/i

const daysInMonth = (year: number, month: number): number =>
  month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31

/** The instant `text` names, or undefined when it is not RFC 3339. A fraction beyond milliseconds is truncated. */
export const parseRfc3339 = (text: string): Date | undefined => {
  const parts = rfc3339Parts.exec(text)
  if (parts === null) return undefined
  const [year, month, day, hour, minute, second] = parts.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const [offsetHours, offsetMinutes] = [Number(parts[9] ?? 0), Number(parts[10] ?? 0)]
  // Second 60 is a leap second (section 5.7); it is the instant the minute ends.
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 60) {
    return undefined
  }
  if (offsetHours > 23 || offsetMinutes > 59) return undefined
  const millis = Number((parts[7] ?? "").slice(0, 3).padEnd(3, "0"))
  const date = new Date(0)
  // setUTCFullYear: Date.UTC would read years 0-99 as 1900-1999.
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, second, millis)
  const offsetMillis = (offsetHours * 60 + offsetMinutes) * 60_000 * (parts[8] === "-" ? -1 : 1)
  return new Date(date.getTime() - offsetMillis)
}

export const Rfc3339 = Schema.String.check(
  Schema.makeFilter((text: string) => parseRfc3339(text) !== undefined || "expected an RFC 3339 time")
).annotate({ identifier: "Rfc3339", format: "date-time" })

export const toRfc3339 = (date: Date): string => date.toISOString()

export const nowDate: Effect.Effect<Date> = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))
