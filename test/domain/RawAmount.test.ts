/**
 * Raw amounts (spec section 1 "Amounts", section 8 "amount range"): decimal digit strings only, up to 2^256-1; a JSON
 * number or any other spelling is rejected (422 over HTTP, see test/ops/Ops.test.ts for the settings path).
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import { RawAmount, rawAmountMax } from "../../src/domain/RawAmount.ts"

const decode = Schema.decodeUnknownResult(RawAmount)
const encode = Schema.encodeSync(RawAmount)

describe("RawAmount", () => {
  it("accepts canonical digit strings from 0 to 2^256-1", () => {
    for (const [text, value] of [["0", 0n], ["1", 1n], ["10", 10n], ["1000000000000000000", 10n ** 18n]] as const) {
      const result = decode(text)
      assert.isTrue(Result.isSuccess(result), text)
      assert.strictEqual(Result.getOrThrow(result), value)
    }
    const max = (2n ** 256n - 1n).toString()
    assert.strictEqual(max.length, 78)
    assert.strictEqual(Result.getOrThrow(decode(max)), rawAmountMax)
  })

  it("rejects JSON numbers and every non-canonical spelling", () => {
    const rejected: ReadonlyArray<unknown> = [
      7,
      0,
      1.5,
      7n,
      null,
      true,
      ["1"],
      { value: "1" },
      "",
      "-1",
      "+1",
      "1.0",
      "1.",
      ".5",
      "1e3",
      "1E3",
      "0x10",
      "01",
      "00",
      " 1",
      "1 ",
      "1_000",
      "1,000",
      "١٢٣", // Arabic-Indic digits
      "NaN",
      "Infinity",
      (2n ** 256n).toString(),
      "9".repeat(79)
    ]
    for (const input of rejected) {
      assert.isTrue(Result.isFailure(decode(input)), `${typeof input} ${String(input)}`)
    }
  })

  it("encodes a bigint back to its digit string", () => {
    assert.strictEqual(encode(12n), "12")
    assert.strictEqual(encode(0n), "0")
    assert.strictEqual(encode(rawAmountMax), (2n ** 256n - 1n).toString())
  })
})
