/**
 * tenants/BlockedAddresses.ts alone (operator-interface.md, "Tenant settings", `blockedAddresses`): an entry blocks
 * the address it denotes in the destination network's family, however either side is spelled; invalid entries are
 * refused at save. The same rule through the API: test/tenants/BlockedAddressesPolicy.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import * as bitcoin from "bitcoinjs-lib"
import {
  blockedAddressesProblem,
  type BlockedAddressNetwork,
  invalidEntryQuotedLengthMax,
  isBlockedAddress
} from "../../src/tenants/BlockedAddresses.ts"

const evm: BlockedAddressNetwork = { chainFamily: "EVM", btcNetwork: null }
const tron: BlockedAddressNetwork = { chainFamily: "TRON", btcNetwork: null }
const btcTest: BlockedAddressNetwork = { chainFamily: "BTC", btcNetwork: "test" }
const btcMain: BlockedAddressNetwork = { chainFamily: "BTC", btcNetwork: "main" }
const sol: BlockedAddressNetwork = { chainFamily: "SOL", btcNetwork: null }

// EIP-55's own vector, and the same account id lowercased (the form the service stores destinations in).
const eip55 = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
const eip55Lower = eip55.toLowerCase()
const otherEvm = "0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359"
// USDT-TRC20's contract: base58 and the `41…` hex form of the same 21 bytes (test/chains/AddressValidation.test.ts).
const tronBase58 = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
const tronHex = "41a614f803b6fd780986a42c78ec9c7f77e6ded13c"
const otherTron = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"
const bech32Test = "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl"
const base58Test = "mkpZhYtJu2r87Js3pDiWJDmPte2NRZ8bJV"
const solAddress = "B9sVeu4rJU12oUrUtzjc6BSNuEXdfvurZkdcaTVkP2LY"

describe("isBlockedAddress: the same address, not the same text (operator-interface.md, blockedAddresses)", () => {
  it("EVM: an EIP-55 entry blocks the lowercase destination, and a lowercase entry the EIP-55 one", () => {
    assert.isTrue(isBlockedAddress([eip55], evm, eip55Lower))
    assert.isTrue(isBlockedAddress([eip55Lower], evm, eip55))
    assert.isFalse(isBlockedAddress([eip55], evm, otherEvm))
  })

  it("TRON: a 41-hex entry (either case) blocks the base58 destination, a base58 entry the hex one", () => {
    assert.isTrue(isBlockedAddress([tronHex], tron, tronBase58))
    assert.isTrue(isBlockedAddress([tronHex.toUpperCase()], tron, tronBase58))
    assert.isTrue(isBlockedAddress([tronBase58], tron, tronHex))
    assert.isFalse(isBlockedAddress([tronHex], tron, otherTron))
  })

  it("BTC: bech32 in capitals blocks the lowercase destination; base58 is exact; another network's address blocks nothing", () => {
    assert.isTrue(isBlockedAddress([bech32Test.toUpperCase()], btcTest, bech32Test))
    assert.isTrue(isBlockedAddress([base58Test], btcTest, base58Test))
    assert.isFalse(isBlockedAddress([base58Test.toLowerCase()], btcTest, base58Test))
    // The same witness program under the mainnet prefix is another network's address.
    const { data, version } = bitcoin.address.fromBech32(bech32Test)
    const sameProgramOnMain = bitcoin.address.toBech32(data, version, "bc")
    assert.isTrue(sameProgramOnMain.startsWith("bc1q"))
    assert.isFalse(isBlockedAddress([sameProgramOnMain], btcTest, bech32Test))
    assert.isFalse(isBlockedAddress([bech32Test], btcMain, sameProgramOnMain))
  })

  it("SOL: exact base58", () => {
    assert.isTrue(isBlockedAddress([solAddress], sol, solAddress))
    assert.isFalse(isBlockedAddress([solAddress.toLowerCase()], sol, solAddress))
  })

  it("an entry blocks only in its own family: the EVM account id of a TRON address is not that TRON address", () => {
    const sameAccountIdOnEvm = `0x${tronHex.slice(2)}`
    assert.isFalse(isBlockedAddress([sameAccountIdOnEvm], tron, tronBase58))
    assert.isFalse(isBlockedAddress([tronHex], evm, sameAccountIdOnEvm))
  })

  it("one list serves every network kind (the per-list memo keeps them apart), and no list blocks nothing", () => {
    const entries = [eip55, tronHex, bech32Test.toUpperCase(), solAddress, "not an address"]
    for (let round = 0; round < 2; round++) {
      assert.isTrue(isBlockedAddress(entries, evm, eip55Lower))
      assert.isTrue(isBlockedAddress(entries, tron, tronBase58))
      assert.isTrue(isBlockedAddress(entries, btcTest, bech32Test))
      assert.isTrue(isBlockedAddress(entries, sol, solAddress))
      assert.isFalse(isBlockedAddress(entries, evm, otherEvm))
      assert.isFalse(isBlockedAddress(entries, btcMain, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"))
    }
    assert.isFalse(isBlockedAddress(undefined, evm, eip55Lower))
    assert.isFalse(isBlockedAddress([], evm, eip55Lower))
  })

  it("a destination that is no valid address still meets an entry of exactly its text (fail closed)", () => {
    assert.isTrue(isBlockedAddress(["not an address"], evm, "not an address"))
    assert.isFalse(isBlockedAddress([eip55], evm, "not an address"))
  })
})

describe("blockedAddressesProblem: each entry an address of some supported family (422 at save)", () => {
  it("accepts every family's forms, BTC on any network", () => {
    assert.isUndefined(blockedAddressesProblem([
      eip55,
      eip55Lower,
      tronBase58,
      tronHex,
      tronHex.toUpperCase(),
      bech32Test,
      bech32Test.toUpperCase(),
      base58Test,
      "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu",
      "bcrt1q6rz28mcfaxtmd6v789l9rrlrusdprr9pz3cppk",
      solAddress
    ]))
    assert.isUndefined(blockedAddressesProblem([]))
  })

  it("names the first invalid entry and its index", () => {
    assert.strictEqual(
      blockedAddressesProblem([eip55, "nope", "also nope"]),
      "blockedAddresses[1] \"nope\" is not a valid EVM, TRON, BTC or SOL address"
    )
    for (
      const entry of [
        "0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed", // mixed case with a bad EIP-55 checksum: a typo
        eip55.toUpperCase().replace("0X", "0x"), // all uppercase: invalid everywhere in the service
        ` ${eip55}`, // no trimming
        `0x${"00".repeat(20)}`, // the EVM zero address burns funds
        "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6T", // base58check checksum
        ""
      ]
    ) {
      assert.strictEqual(
        blockedAddressesProblem([entry]),
        `blockedAddresses[0] ${JSON.stringify(entry)} is not a valid EVM, TRON, BTC or SOL address`
      )
    }
  })

  it("quotes at most invalidEntryQuotedLengthMax characters of an entry, and refuses a long one without decoding it", () => {
    // Base58 characters: decoded, a string this long would cost seconds (chains/AddressValidation.ts addressLengthMax).
    const long = "x".repeat(100_000)
    const startedMillis = performance.now()
    assert.strictEqual(
      blockedAddressesProblem([long]),
      `blockedAddresses[0] "${"x".repeat(invalidEntryQuotedLengthMax)}…" is not a valid EVM, TRON, BTC or SOL address`
    )
    assert.isBelow(performance.now() - startedMillis, 100)
  })
})
