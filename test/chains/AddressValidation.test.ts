import { describe, expect, it } from "@effect/vitest"
import { addressLengthMax, validateAddress } from "../../src/chains/AddressValidation.ts"
import type { BtcNetwork, ChainFamily } from "../../src/chains/ChainFamily.ts"

interface Row {
  readonly address: string
  readonly why: string
  /** The expected `normalized` form, or null when the address must be invalid. */
  readonly normalized: string | null
}

const check = (family: ChainFamily, rows: ReadonlyArray<Row>, btcNetwork?: BtcNetwork) => {
  for (const row of rows) {
    it(`${family}${btcNetwork === undefined ? "" : ` ${btcNetwork}`}: ${row.why} (${row.address})`, () => {
      const result = validateAddress({ family, btcNetwork, address: row.address })
      expect(result).toEqual(row.normalized === null ? { isValid: false } : { isValid: true, normalized: row.normalized })
    })
  }
}

const eip55 = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"

describe("validateAddress EVM (spec: mixed case must pass EIP-55, zero address invalid, normalized lowercase)", () => {
  check("EVM", [
    { address: eip55, why: "EIP-55 vector", normalized: eip55.toLowerCase() },
    {
      address: "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
      why: "EIP-55 vector",
      normalized: "0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359"
    },
    { address: "0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed", why: "mixed case with a bad checksum", normalized: null },
    { address: eip55.toLowerCase(), why: "all lowercase", normalized: eip55.toLowerCase() },
    { address: "0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED", why: "all uppercase (viem strict)", normalized: null },
    { address: "0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", why: "0X prefix", normalized: null },
    { address: "5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", why: "no prefix", normalized: null },
    { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea", why: "39 hex digits", normalized: null },
    { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1bea0000", why: "21 bytes", normalized: null },
    { address: ` ${eip55}`, why: "leading space (no trimming)", normalized: null },
    { address: `${eip55} `, why: "trailing space (no trimming)", normalized: null },
    { address: "0x0000000000000000000000000000000000000000", why: "zero address", normalized: null },
    { address: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", why: "TRON address", normalized: null },
    { address: "", why: "empty", normalized: null }
  ])
})

const usdtTron = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"

describe("validateAddress TRON (decisions: normalized base58, 41-hex input converted)", () => {
  check("TRON", [
    { address: usdtTron, why: "USDT-TRC20 contract", normalized: usdtTron },
    { address: "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", why: "derivation vector", normalized: "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH" },
    { address: "41a614f803b6fd780986a42c78ec9c7f77e6ded13c", why: "hex form converted to base58", normalized: usdtTron },
    { address: "41A614F803B6FD780986A42C78EC9C7F77E6DED13C", why: "uppercase hex form", normalized: usdtTron },
    {
      address: "41c8599111f29c1e1e061265b4af93ea1f274ad78a",
      why: "hex of the derivation vector",
      normalized: "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"
    },
    { address: "0xa614f803b6fd780986a42c78ec9c7f77e6ded13c", why: "EVM-style hex", normalized: null },
    { address: "a614f803b6fd780986a42c78ec9c7f77e6ded13c", why: "bare 40 hex digits", normalized: null },
    { address: "0x41a614f803b6fd780986a42c78ec9c7f77e6ded13c", why: "0x-prefixed 41 hex", normalized: null },
    { address: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6T", why: "base58check checksum", normalized: null },
    { address: usdtTron.toLowerCase(), why: "lower-cased base58", normalized: null },
    { address: "T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb", why: "zero address (41 + 20 zero bytes)", normalized: null },
    { address: "41" + "00".repeat(20), why: "zero address in hex", normalized: null },
    { address: "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", why: "BTC base58 (version 0x00)", normalized: null },
    { address: ` ${usdtTron}`, why: "leading space", normalized: null },
    { address: "", why: "empty", normalized: null }
  ])
})

describe("validateAddress BTC mainnet (spec: must match the network; five standard templates only)", () => {
  check("BTC", [
    { address: "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", why: "p2pkh", normalized: "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2" },
    { address: "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", why: "p2sh", normalized: "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy" },
    { address: "37VucYSaXLCAsxYyAPfbSi9eh4iEcbShgf", why: "p2sh-p2wpkh", normalized: "37VucYSaXLCAsxYyAPfbSi9eh4iEcbShgf" },
    {
      address: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu",
      why: "p2wpkh BIP-84",
      normalized: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"
    },
    {
      address: "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",
      why: "p2wpkh uppercase, normalized lowercase",
      normalized: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"
    },
    {
      address: "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3",
      why: "p2wsh",
      normalized: "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3"
    },
    {
      address: "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0",
      why: "p2tr",
      normalized: "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0"
    },
    { address: "BC1SW50QGDZ25J", why: "future segwit v16", normalized: null },
    { address: "bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs", why: "future segwit v2", normalized: null },
    {
      address: "bc1pw508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kt5nd6y",
      why: "v1 with a 40-byte program (not p2tr)",
      normalized: null
    },
    {
      address: "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd",
      why: "v1 in bech32 instead of bech32m",
      normalized: null
    },
    { address: "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh", why: "v0 in bech32m instead of bech32", normalized: null },
    { address: "bc1pw5dgrnzv", why: "program length", normalized: null },
    { address: "BC1QR508D6QEJXTDG4Y5R3ZARVARYV98GJ9P", why: "v0 program length", normalized: null },
    {
      address: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306FYU",
      why: "mixed-case bech32",
      normalized: null
    },
    { address: "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3", why: "base58 checksum", normalized: null },
    { address: "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl", why: "testnet bech32", normalized: null },
    { address: "mkpZhYtJu2r87Js3pDiWJDmPte2NRZ8bJV", why: "testnet p2pkh", normalized: null },
    { address: "2Mww8dCYPUpKHofjgcXcBCEGmniw9CoaiD2", why: "testnet p2sh", normalized: null },
    { address: "bcrt1q6rz28mcfaxtmd6v789l9rrlrusdprr9pz3cppk", why: "regtest bech32", normalized: null },
    { address: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", why: "TRON address", normalized: null },
    { address: " bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", why: "leading space", normalized: null }
  ], "main")
})

describe("validateAddress BTC testnet", () => {
  check("BTC", [
    { address: "mkpZhYtJu2r87Js3pDiWJDmPte2NRZ8bJV", why: "p2pkh", normalized: "mkpZhYtJu2r87Js3pDiWJDmPte2NRZ8bJV" },
    { address: "2Mww8dCYPUpKHofjgcXcBCEGmniw9CoaiD2", why: "p2sh", normalized: "2Mww8dCYPUpKHofjgcXcBCEGmniw9CoaiD2" },
    {
      address: "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl",
      why: "p2wpkh",
      normalized: "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl"
    },
    {
      address: "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7",
      why: "p2wsh",
      normalized: "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7"
    },
    {
      address: "tb1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesf3hn0c",
      why: "p2tr",
      normalized: "tb1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesf3hn0c"
    },
    {
      address: "tb1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq47Zagq",
      why: "mixed-case bech32m",
      normalized: null
    },
    { address: "bcrt1q6rz28mcfaxtmd6v789l9rrlrusdprr9pz3cppk", why: "regtest bech32", normalized: null },
    { address: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", why: "mainnet bech32", normalized: null },
    { address: "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", why: "mainnet p2pkh", normalized: null },
    { address: "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", why: "mainnet p2sh", normalized: null }
  ], "test")
})

describe("validateAddress BTC regtest", () => {
  check("BTC", [
    {
      address: "bcrt1q6rz28mcfaxtmd6v789l9rrlrusdprr9pz3cppk",
      why: "p2wpkh",
      normalized: "bcrt1q6rz28mcfaxtmd6v789l9rrlrusdprr9pz3cppk"
    },
    { address: "mkpZhYtJu2r87Js3pDiWJDmPte2NRZ8bJV", why: "p2pkh shares testnet version bytes", normalized: "mkpZhYtJu2r87Js3pDiWJDmPte2NRZ8bJV" },
    { address: "2Mww8dCYPUpKHofjgcXcBCEGmniw9CoaiD2", why: "p2sh shares testnet version bytes", normalized: "2Mww8dCYPUpKHofjgcXcBCEGmniw9CoaiD2" },
    { address: "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl", why: "testnet bech32 (needs bcrt1)", normalized: null },
    { address: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", why: "mainnet bech32", normalized: null }
  ], "regtest")
})

it("validateAddress BTC without a network is a caller bug and throws", () => {
  expect(() => validateAddress({ family: "BTC", address: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu" })).toThrow(
    /btcNetwork is required/
  )
})

const solWallet = "HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk"

it("validateAddress: a string longer than addressLengthMax is invalid in every family, refused before decoding", () => {
  // Base58 characters throughout: decoded, 200,000 of them would cost minutes (the decoders are quadratic).
  const long = "x".repeat(200_000)
  const startedMillis = performance.now()
  for (const family of ["EVM", "TRON", "SOL"] as const) expect(validateAddress({ family, address: long })).toEqual({ isValid: false })
  for (const btcNetwork of ["main", "test", "regtest"] as const) {
    expect(validateAddress({ family: "BTC", btcNetwork, address: long })).toEqual({ isValid: false })
  }
  expect(performance.now() - startedMillis).toBeLessThan(100)
  expect(validateAddress({ family: "SOL", address: "x".repeat(addressLengthMax + 1) })).toEqual({ isValid: false })
})

describe("validateAddress SOL (32-byte base58, normalized as given; ownership is not judged here)", () => {
  check("SOL", [
    { address: solWallet, why: "derivation vector", normalized: solWallet },
    { address: "11111111111111111111111111111111", why: "System Program id", normalized: "11111111111111111111111111111111" },
    { address: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", why: "SPL Token program id", normalized: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA" },
    { address: "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL", why: "ATA program id", normalized: "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL" },
    { address: "FF2BjgeRK2LgK8Lj4wY2CTJrmJAKV5ZPCdHqfq1tJLGi", why: "ATA (off curve)", normalized: "FF2BjgeRK2LgK8Lj4wY2CTJrmJAKV5ZPCdHqfq1tJLGi" },
    { address: "5N3f1tj9v1vc5TUZ8S7mCAnVmjVKrfnzXWhxLaxyZAgt", why: "USDC ATA (off curve)", normalized: "5N3f1tj9v1vc5TUZ8S7mCAnVmjVKrfnzXWhxLaxyZAgt" },
    { address: `${solWallet}k`, why: "45 characters", normalized: null },
    { address: "z".repeat(44), why: "44 z (not 32 bytes)", normalized: null },
    { address: "abc", why: "too short", normalized: null },
    { address: "1".repeat(31), why: "31 zero bytes", normalized: null },
    { address: "1".repeat(33), why: "33 zero bytes", normalized: null },
    { address: "0x9858EfFD232B4033E47d90003D41EC34EcaEda94", why: "EVM address (non-base58)", normalized: null },
    { address: "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", why: "TRON address (25 bytes)", normalized: null },
    { address: ` ${solWallet}`, why: "leading space", normalized: null },
    { address: "", why: "empty", normalized: null }
  ])
})
