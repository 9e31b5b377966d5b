/**
 * The strict decoding of request targets and the storable-text rule, as pure functions (spec section 7: a path or
 * query parameter that cannot be parsed is 400; PostgreSQL text holds neither NUL nor unpaired surrogates).
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { DecimalIntegerFromString, PageLimit } from "../../src/api/Common.ts"
import { charCount, isStorableText, isStorableValue, storable } from "../../src/domain/StorableText.ts"
import { undecodableTargetPart } from "../../src/http/RequestTarget.ts"

describe("request target (section 7)", () => {
  it("well-formed targets pass, encoded reserved characters and UTF-8 included", () => {
    for (
      const url of [
        "/v1/users",
        "/v1/users/alice?limit=5",
        "/v1/users/a%2Fb%3F%23%25",
        "/v1/transactions/external_tx_id/%F0%9F%98%80%20x",
        "/v1/users?status=ACTIVE&cursor=&limit=5",
        "/v1/wallets?customerRefId=a+b%2Bc",
        "/v1/users?flag",
        "/v1/users/%2500"
      ]
    ) {
      assert.isUndefined(undecodableTargetPart(url), url)
    }
  })

  it("a path segment that does not decode, or decodes to NUL, is the path's fault", () => {
    for (const url of ["/v1/users/%00", "/v1/users/a%00b", "/v1/users/%zz", "/v1/users/100%", "/v1/users/%FF",
      "/v1/users/%E0%A4%A", "/v1/users/%ED%A0%80", "/v1/users/%C0%80", "/v1/users/a\u0000b", "/v1/%FF/x?limit=5"])
    {
      assert.strictEqual(undecodableTargetPart(url), "path", url)
    }
  })

  it("a query name or value that does not decode, or decodes to NUL, is the query's fault", () => {
    for (const url of ["/v1/users?limit=%00", "/v1/users?a%00=1", "/v1/users?x=%", "/v1/users?x=%FF", "/v1/users?ok=1&x=%zz",
      "/v1/users?%ED%A0%80", "/v1/users?x=%ED%B0%80"])
    {
      assert.strictEqual(undecodableTargetPart(url), "query", url)
    }
  })
})

describe("storable text", () => {
  it("NUL and unpaired surrogates are not storable; paired ones and other controls are", () => {
    assert.isFalse(isStorableText("\u0000"))
    assert.isFalse(isStorableText("a\u0000"))
    assert.isFalse(isStorableText("\ud800"))
    assert.isFalse(isStorableText("\udc00x"))
    assert.isFalse(isStorableText("x\ud83d"))
    assert.isTrue(isStorableText("😀"))
    assert.isTrue(isStorableText("\u0001\t\n\u007f\u2028"))
    assert.isTrue(isStorableText(""))
  })

  it("a value is storable when every string in it is, object keys included", () => {
    assert.isTrue(isStorableValue({ a: ["b", { c: "d" }], e: 1, f: null, g: true, h: 10n }))
    assert.isFalse(isStorableValue({ a: ["b", { c: "d\u0000" }] }))
    assert.isFalse(isStorableValue({ a: { "\ud800": 1 } }))
    assert.isFalse(isStorableValue(["ok", "\u0000"]))
  })

  it("a deeply nested value is walked without overflowing the stack", () => {
    let deep: unknown = "\u0000"
    for (let depth = 0; depth < 200_000; depth++) deep = [deep]
    assert.isFalse(isStorableValue(deep))
  })

  it("storable(schema) refuses a decoded value with unstorable text and ignores dropped unknown fields", () => {
    const Body = storable(Schema.Struct({ name: Schema.String }))
    const decode = Schema.decodeUnknownExit(Body)
    assert.isTrue(decode({ name: "ok", unknown: "\u0000" })._tag === "Success")
    assert.isTrue(decode({ name: "a\u0000b" })._tag === "Failure")
    assert.isTrue(decode({ name: "\ud800" })._tag === "Failure")
  })

  it("chars are code points", () => {
    assert.strictEqual(charCount("😀".repeat(128)), 128)
    assert.strictEqual(charCount("é"), 1)
    assert.strictEqual(charCount(""), 0)
  })
})

describe("integer query values (section 8 page size, shared decisions)", () => {
  it("decimal digits only, then the range", () => {
    const decode = Schema.decodeUnknownExit(PageLimit)
    for (const good of ["1", "50", "200", "007"]) assert.isTrue(decode(good)._tag === "Success", good)
    for (const bad of [" 5", "5 ", "+5", "-1", "1e1", "0x10", "0b1", "5.0", ".5", "", "0", "201", "Infinity", "NaN", "５", "1_0"]) {
      assert.isTrue(decode(bad)._tag === "Failure", JSON.stringify(bad))
    }
    const big = Schema.decodeUnknownExit(DecimalIntegerFromString({ minimum: 1, maximum: 999_999_999_999_999 }))
    assert.isTrue(big("999999999999999")._tag === "Success")
    assert.isTrue(big("9999999999999999")._tag === "Failure")
  })
})
