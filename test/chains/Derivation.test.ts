import { describe, expect, it } from "@effect/vitest"
import { ed25519 } from "@noble/curves/ed25519.js"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { HDKey } from "@scure/bip32"
import { mnemonicToSeedSync } from "@scure/bip39"
import { Keypair } from "@solana/web3.js"
import * as bitcoin from "bitcoinjs-lib"
import { HDKey as Slip10HDKey } from "micro-key-producer/slip10.js"
import { TronWeb } from "tronweb"
import { privateKeyToAddress } from "viem/accounts"
import { validateAddress } from "../../src/chains/AddressValidation.ts"
import type { BtcNetwork, ChainFamily } from "../../src/chains/ChainFamily.ts"
import {
  addressFromPublicKey,
  derivationIndexMax,
  derivationPath,
  deriveAddress,
  deriveKey,
  deriveWebhookSigningKey,
  hdRootFromSeed,
  isDerivationIndex,
  platformIndices,
  webhookSigningKeyPath
} from "../../src/chains/Derivation.ts"
import { abandonMnemonic, schemeVector, schemeVectors } from "./vectors.ts"

const seed = mnemonicToSeedSync(abandonMnemonic)
const secpMaster = HDKey.fromMasterSeed(seed)
const edMaster = Slip10HDKey.fromMasterSeed(seed)
const root = hdRootFromSeed(seed)

const secpPublicKey = (path: string): Uint8Array => {
  const publicKey = secpMaster.derive(path).publicKey
  if (publicKey === null) throw new Error("no public key")
  return publicKey
}

describe("published vectors (abandon x11 about): libraries plus our public-key encoders", () => {
  it("EVM m/44'/60'/0'/0/0", () => {
    expect(addressFromPublicKey({ family: "EVM" }, secpPublicKey("m/44'/60'/0'/0/0"))).toBe(
      "0x9858EfFD232B4033E47d90003D41EC34EcaEda94".toLowerCase()
    )
  })

  it("TRON m/44'/195'/0'/0/0 and its hex form", () => {
    const address = addressFromPublicKey({ family: "TRON" }, secpPublicKey("m/44'/195'/0'/0/0"))
    expect(address).toBe("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH")
    expect(TronWeb.address.toHex(address)).toBe("41c8599111f29c1e1e061265b4af93ea1f274ad78a")
  })

  const bip84: ReadonlyArray<readonly [string, BtcNetwork, string]> = [
    ["m/84'/0'/0'/0/0", "main", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"],
    ["m/84'/0'/0'/0/1", "main", "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"],
    ["m/84'/0'/0'/1/0", "main", "bc1q8c6fshw2dlwun7ekn9qwf37cu2rn755upcp6el"],
    ["m/84'/1'/0'/0/0", "test", "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl"],
    ["m/84'/1'/0'/0/0", "regtest", "bcrt1q6rz28mcfaxtmd6v789l9rrlrusdprr9pz3cppk"]
  ]
  for (const [path, btcNetwork, expected] of bip84) {
    it(`BTC ${btcNetwork} P2WPKH ${path}`, () => {
      expect(addressFromPublicKey({ family: "BTC", btcNetwork }, secpPublicKey(path))).toBe(expected)
    })
  }

  it("BTC BIP-84 first public key", () => {
    expect(bytesToHex(secpPublicKey("m/84'/0'/0'/0/0"))).toBe(
      "0330d54fd0dd420a6e5f8d3624f5f3482cae350f79d5f0753bf5beef9c2d91af3c"
    )
  })

  it("BTC BIP-84 account xpub and zpub (m/84'/0'/0')", () => {
    expect(secpMaster.derive("m/84'/0'/0'").publicExtendedKey).toBe(
      "xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V"
    )
    const zpubVersions = { private: 0x04b2430c, public: 0x04b24746 }
    expect(HDKey.fromMasterSeed(seed, zpubVersions).derive("m/84'/0'/0'").publicExtendedKey).toBe(
      "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"
    )
  })

  it("BTC BIP-86 P2TR m/86'/0'/0'/0/0 (bitcoinjs)", () => {
    const internalPubkey = secpPublicKey("m/86'/0'/0'/0/0").slice(1)
    expect(bitcoin.payments.p2tr({ internalPubkey }).address).toBe(
      "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr"
    )
  })

  it("BTC BIP-44 P2PKH m/44'/0'/0'/0/0 (bitcoinjs)", () => {
    expect(bitcoin.payments.p2pkh({ pubkey: secpPublicKey("m/44'/0'/0'/0/0") }).address).toBe(
      "1LqBGSKuX5yYUonjxT5qGfpUsXKYYWeabA"
    )
  })

  const sol: ReadonlyArray<readonly [string, string]> = [
    ["m/44'/501'/0'/0'", "HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk"],
    ["m/44'/501'/1'/0'", "Hh8QwFUA6MtVu1qAoq12ucvFHNwCcVTV7hpWjeY1Hztb"],
    ["m/44'/501'/0'", "GjJyeC1r2RgkuoCWMyPYkCWSGSGLcz266EaAkLA27AhL"]
  ]
  for (const [path, expected] of sol) {
    it(`SOL ${path} (SLIP-0010), and Keypair.fromSeed agrees`, () => {
      const node = edMaster.derive(path)
      expect(addressFromPublicKey({ family: "SOL" }, node.publicKeyRaw)).toBe(expected)
      expect(Keypair.fromSeed(node.privateKey).publicKey.toBase58()).toBe(expected)
    })
  }
})

const pathOf = (family: ChainFamily, [t, u, w]: readonly [number, number, number]): string => {
  switch (family) {
    case "EVM":
      return `m/44'/60'/${t}'/${u}'/${w}`
    case "TRON":
      return `m/44'/195'/${t}'/${u}'/${w}`
    case "BTC":
      return `m/84'/0'/${t}'/${u}'/${w}`
    case "SOL":
      return `m/44'/501'/${t}'/${u}'/${w}'`
  }
}

describe("scheme vectors (T,U,W): m/44'/60'/T'/U'/W, m/44'/195'/T'/U'/W, m/84'/0'/T'/U'/W, m/44'/501'/T'/U'/W'", () => {
  for (const [indices] of schemeVectors) {
    for (const family of ["EVM", "TRON", "BTC", "SOL"] as const) {
      it(`${family} (${indices.join(",")})`, () => {
        const [tenantIndex, userIndex, walletIndex] = indices
        const request = { family, btcNetwork: "main" as const, tenantIndex, userIndex, walletIndex }
        const derived = deriveAddress(root, request)
        expect(derived).toEqual({ address: schemeVector(family, indices), path: pathOf(family, indices) })
        expect(derivationPath(request)).toBe(derived.path)
      })
    }
  }

  it("BTC test and regtest use coin type 1' and share the key, not the prefix", () => {
    const indices = { tenantIndex: 3, userIndex: 4, walletIndex: 5 }
    const test = deriveAddress(root, { family: "BTC", btcNetwork: "test", ...indices })
    const regtest = deriveAddress(root, { family: "BTC", btcNetwork: "regtest", ...indices })
    expect(test.path).toBe("m/84'/1'/3'/4'/5")
    expect(regtest.path).toBe(test.path)
    expect(test.address.startsWith("tb1q")).toBe(true)
    expect(regtest.address.startsWith("bcrt1q")).toBe(true)
    expect(bitcoin.address.fromBech32(test.address).data).toEqual(bitcoin.address.fromBech32(regtest.address).data)
    expect(addressFromPublicKey({ family: "BTC", btcNetwork: "test" }, secpPublicKey(test.path))).toBe(test.address)
  })

  it("derived addresses are already in the normalized form validateAddress returns", () => {
    const targets: ReadonlyArray<{ family: ChainFamily; btcNetwork?: BtcNetwork }> = [
      { family: "EVM" },
      { family: "TRON" },
      { family: "BTC", btcNetwork: "main" },
      { family: "BTC", btcNetwork: "test" },
      { family: "BTC", btcNetwork: "regtest" },
      { family: "SOL" }
    ]
    for (const target of targets) {
      const { address } = deriveAddress(root, { ...target, tenantIndex: 7, userIndex: 8, walletIndex: 9 })
      expect(validateAddress({ ...target, address })).toEqual({ isValid: true, normalized: address })
    }
  })
})

describe("index range [0, 2^31-1]", () => {
  it("isDerivationIndex bounds", () => {
    expect([0, 1, derivationIndexMax].every(isDerivationIndex)).toBe(true)
    expect([-1, 2 ** 31, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1].some(isDerivationIndex))
      .toBe(false)
  })

  const bad = [-1, 2 ** 31, 0.5, Number.NaN, Number.POSITIVE_INFINITY]
  for (const field of ["tenantIndex", "userIndex", "walletIndex"] as const) {
    for (const value of bad) {
      it(`${field} = ${value} is rejected for every family`, () => {
        for (const family of ["EVM", "TRON", "BTC", "SOL"] as const) {
          const request = { family, btcNetwork: "main" as const, tenantIndex: 1, userIndex: 1, walletIndex: 1, [field]: value }
          expect(() => derivationPath(request)).toThrow(new RegExp(`${field} must be an integer in \\[0, 2147483647\\]`))
          expect(() => deriveAddress(root, request)).toThrow(RangeError)
        }
      })
    }
  }

  it("BTC without a network throws instead of guessing mainnet", () => {
    expect(() => derivationPath({ family: "BTC", tenantIndex: 1, userIndex: 0, walletIndex: 0 })).toThrow(
      /btcNetwork is required/
    )
  })
})

describe("determinism and separation", () => {
  it("two roots from the same seed derive the same addresses; another mnemonic does not", () => {
    const again = hdRootFromSeed(mnemonicToSeedSync(abandonMnemonic))
    const other = hdRootFromSeed(mnemonicToSeedSync("legal winner thank year wave sausage worth useful legal winner thank yellow"))
    for (const family of ["EVM", "TRON", "SOL"] as const) {
      const request = { family, tenantIndex: 2, userIndex: 3, walletIndex: 4 }
      expect(deriveAddress(again, request)).toEqual(deriveAddress(root, request))
      expect(deriveAddress(other, request).address).not.toBe(deriveAddress(root, request).address)
    }
  })

  it("distinct (T,U,W) give distinct addresses, including swapped indexes", () => {
    for (const family of ["EVM", "SOL"] as const) {
      const seen = new Set<string>()
      for (let t = 0; t < 3; t++) {
        for (let u = 0; u < 3; u++) {
          for (let w = 0; w < 3; w++) {
            seen.add(deriveAddress(root, { family, tenantIndex: t, userIndex: u, walletIndex: w }).address)
          }
        }
      }
      expect(seen.size).toBe(27)
    }
  })

  it("platform roles sit under T = 0: HOT U=0 W=0, SWEEP U=1 W=0, a tenant's GAS U=2 W=tenant index", () => {
    expect(platformIndices("HOT")).toEqual({ tenantIndex: 0, userIndex: 0, walletIndex: 0 })
    expect(platformIndices("SWEEP")).toEqual({ tenantIndex: 0, userIndex: 1, walletIndex: 0 })
    expect(platformIndices("GAS", 3)).toEqual({ tenantIndex: 0, userIndex: 2, walletIndex: 3 })
    // decisions.md "Operating wallets": GAS is per tenant; there is no platform-wide one.
    expect(() => platformIndices("GAS")).toThrow(RangeError)
    expect(() => platformIndices("GAS", 0)).toThrow(RangeError)
    expect(() => platformIndices("HOT", 1)).toThrow(RangeError)
  })
})

describe("deriveKey (signer-internal)", () => {
  it("the private key belongs to the derived address on every family", () => {
    const indices = { tenantIndex: 1, userIndex: 2, walletIndex: 3 }
    const evm = deriveKey(root, { family: "EVM", ...indices })
    expect(privateKeyToAddress(`0x${bytesToHex(evm.privateKey)}`).toLowerCase()).toBe(evm.address)
    const tron = deriveKey(root, { family: "TRON", ...indices })
    expect(TronWeb.address.fromPrivateKey(bytesToHex(tron.privateKey))).toBe(tron.address)
    const btc = deriveKey(root, { family: "BTC", btcNetwork: "test", ...indices })
    expect(secp256k1.getPublicKey(btc.privateKey, true)).toEqual(btc.publicKey)
    const sol = deriveKey(root, { family: "SOL", ...indices })
    expect(Keypair.fromSeed(sol.privateKey).publicKey.toBase58()).toBe(sol.address)
  })

  it("the webhook key is SLIP-0010 ed25519 at its dedicated path, pinned for the abandon mnemonic", () => {
    const key = deriveWebhookSigningKey(root)
    expect(webhookSigningKeyPath).toBe("m/1668244070'/0'/1'")
    expect(key.publicKey).toEqual(ed25519.getPublicKey(key.privateKey))
    expect(key.publicKey).toEqual(edMaster.derive(webhookSigningKeyPath).publicKeyRaw)
    expect(bytesToHex(key.publicKey)).toBe(webhookPublicKeyOfAbandon)
  })
})

/** Self-computed (no published vector for a private path): a regression pin so the webhook key never moves. */
const webhookPublicKeyOfAbandon = "f39e683350f18af355dd78a0e68447a709270330f7236dab4a13d822a48bcbda"
