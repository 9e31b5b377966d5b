/** RFC 3339 parsing (spec section 1, "Times"; RFC 3339 sections 5.6 and 5.7): every field in range, exact instants. */
import { assert, describe, it } from "@effect/vitest"
import { parseRfc3339 } from "../../src/domain/Time.ts"

const iso = (text: string) => parseRfc3339(text)?.toISOString()

describe("parseRfc3339", () => {
  it("gives the instant named, offsets applied, a fraction truncated to milliseconds", () => {
    assert.strictEqual(iso("2026-11-27T10:20:30Z"), "2026-11-27T10:20:30.000Z")
    assert.strictEqual(iso("2026-11-27t10:20:30.5z"), "2026-11-27T10:20:30.500Z")
    assert.strictEqual(iso("2026-11-27T10:20:30.1239999999999Z"), "2026-11-27T10:20:30.123Z")
    assert.strictEqual(iso("2026-11-27T10:20:30+05:30"), "2026-11-27T04:50:30.000Z")
    assert.strictEqual(iso("2026-11-27T00:20:30-01:00"), "2026-11-27T01:20:30.000Z")
    assert.strictEqual(iso("2028-02-29T00:00:00Z"), "2028-02-29T00:00:00.000Z")
    assert.strictEqual(iso("2000-02-29T00:00:00Z"), "2000-02-29T00:00:00.000Z")
    // A leap second is the instant its minute ends; years below 100 are not read as 19xx.
    assert.strictEqual(iso("2016-12-31T23:59:60Z"), "2017-01-01T00:00:00.000Z")
    assert.strictEqual(iso("0050-01-01T00:00:00Z"), "0050-01-01T00:00:00.000Z")
  })

  it("refuses fields out of range instead of rolling them over", () => {
    for (
      const text of [
        "2026-02-30T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-11-31T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2026-00-10T00:00:00Z",
        "2026-13-10T00:00:00Z",
        "2026-11-00T00:00:00Z",
        "2026-11-26T24:00:00Z",
        "2026-11-26T23:60:00Z",
        "2026-11-26T23:59:61Z",
        "2026-11-26T12:00:00+24:00",
        "2026-11-26T12:00:00+05:60"
      ]
    ) assert.isUndefined(parseRfc3339(text), text)
  })

  it("refuses what is not RFC 3339 at all", () => {
    for (
      const text of ["", "2026-11-26", "2026-11-26T12:00:00", "2026-11-26 12:00:00Z", "2026-11-26T12:00Z", "2026-11-26T12:00:00.Z", "+2026-11-26T12:00:00Z"]
    ) assert.isUndefined(parseRfc3339(text), text)
  })
})
