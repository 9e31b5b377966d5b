/** chains/TronAddress.ts against tronweb itself, the library it stands in for at start-up. */
import { assert, describe, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { TronWeb } from "tronweb"
import { tronAddressBytes, tronAddressFromHex } from "../../src/chains/TronAddress.ts"

describe("TRON addresses without tronweb", () => {
  it("encode and decode exactly as tronweb does, for 200 random account ids", () => {
    for (let index = 0; index < 200; index++) {
      const hex = `41${randomBytes(20).toString("hex")}`
      const expected = TronWeb.address.fromHex(hex)
      assert.strictEqual(tronAddressFromHex(hex), expected)
      assert.strictEqual(Buffer.from(tronAddressBytes(expected)!).toString("hex"), hex)
      assert.isTrue(TronWeb.isAddress(expected))
    }
  })

  it("refuses what tronweb refuses: bad checksum, wrong version byte, wrong length", () => {
    const valid = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
    for (const address of [`${valid.slice(0, -1)}T`, "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "T9yD14Nj9j7xAB4dbGeiX9h8unk"]) {
      assert.isUndefined(tronAddressBytes(address), address)
      assert.isFalse(TronWeb.isAddress(address), address)
    }
    assert.throws(() => tronAddressFromHex(`42${"11".repeat(20)}`), "not a TRON address")
  })
})
