/**
 * Spec 4.1, without a node: a SOL withdrawal recipient must be a wallet (owner) address. The static part
 * (`isSolanaWalletAddress`) refuses off-curve addresses, the well-known programs, loaders, sysvars and native mints,
 * and the catalog's own mints; `isWalletAccount` is the rule a node's account read is judged by. The node side runs
 * against the litesvm front in test/chains/SolChainClient.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  NATIVE_MINT,
  NATIVE_MINT_2022,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID
} from "@solana/spl-token"
import { Keypair, PublicKey } from "@solana/web3.js"
import type { CatalogAsset, CatalogNetwork } from "../../src/catalog/Catalog.ts"
import developmentCatalog from "../../src/catalog/development.json" with { type: "json" }
import preproductionCatalog from "../../src/catalog/preproduction.json" with { type: "json" }
import productionCatalog from "../../src/catalog/production.json" with { type: "json" }
import {
  isSolanaWalletAddress,
  isWalletAccount,
  solNonWalletAddresses,
  solWellKnownAccounts
} from "../../src/chains/sol/SolWalletAddress.ts"

type CatalogShape = { readonly networks: ReadonlyArray<CatalogNetwork>; readonly assets: ReadonlyArray<CatalogAsset> }
const catalogs = {
  development: developmentCatalog as unknown as CatalogShape,
  preproduction: preproductionCatalog as unknown as CatalogShape,
  production: productionCatalog as unknown as CatalogShape
}
const nonWallets = solNonWalletAddresses(catalogs.preproduction)

const solWallet = "HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk"
const systemProgram = "11111111111111111111111111111111"

describe("the well-known ids are the libraries' own", () => {
  it("the SPL ids typed in the module equal @solana/spl-token's constants", () => {
    for (const key of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, ASSOCIATED_TOKEN_PROGRAM_ID, NATIVE_MINT, NATIVE_MINT_2022]) {
      expect(solWellKnownAccounts.has(key.toBase58()), key.toBase58()).toBe(true)
    }
  })

  it("every entry is a 32-byte base58 address in its canonical form", () => {
    for (const address of solWellKnownAccounts) expect(new PublicKey(address).toBase58()).toBe(address)
  })
})

describe("isSolanaWalletAddress (spec 4.1: SOL withdrawal recipients must be wallet addresses)", () => {
  const rows: ReadonlyArray<readonly [string, boolean, string]> = [
    [solWallet, true, "wallet, on curve"],
    [systemProgram, false, "System program (32 zero bytes, on curve)"],
    ["TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", false, "Token program, on curve"],
    ["TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb", false, "Token-2022 program, on curve"],
    ["ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL", false, "Associated Token program, on curve"],
    ["SysvarRent111111111111111111111111111111111", false, "Rent sysvar, on curve"],
    ["SysvarC1ock11111111111111111111111111111111", false, "Clock sysvar, on curve"],
    ["Sysvar1111111111111111111111111111111111111", false, "owner of the sysvars, on curve"],
    ["NativeLoader1111111111111111111111111111111", false, "native loader, on curve"],
    ["Config1111111111111111111111111111111111111", false, "Config program, on curve"],
    ["MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr", false, "Memo program, on curve"],
    ["So11111111111111111111111111111111111111112", false, "wrapped SOL mint, on curve"],
    ["4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU", false, "the catalog's USDC mint on SOL_DEVNET"],
    ["FF2BjgeRK2LgK8Lj4wY2CTJrmJAKV5ZPCdHqfq1tJLGi", false, "ATA of HAgk for mint 32x0x44, off curve"],
    ["5N3f1tj9v1vc5TUZ8S7mCAnVmjVKrfnzXWhxLaxyZAgt", false, "USDC ATA of HAgk, off curve"],
    ["abc", false, "not an address"],
    ["0x9858EfFD232B4033E47d90003D41EC34EcaEda94", false, "EVM address"]
  ]
  for (const [address, expected, why] of rows) {
    it(`${why} (${address})`, () => {
      expect(isSolanaWalletAddress(address, nonWallets)).toBe(expected)
    })
  }

  it("on-curve ids pass the curve test: only the list refuses them", () => {
    for (const address of [systemProgram, "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", "SysvarRent111111111111111111111111111111111"]) {
      expect(PublicKey.isOnCurve(new PublicKey(address).toBytes())).toBe(true)
      expect(isSolanaWalletAddress(address, new Set())).toBe(true)
    }
  })

  it("every catalog's SOL mints and token programs are refused; other families' contracts are not SOL's business", () => {
    for (const [name, catalog] of Object.entries(catalogs)) {
      const refused = solNonWalletAddresses(catalog)
      const sol = new Set(catalog.networks.filter((network) => network.chainFamily === "SOL").map((network) => network.networkKey))
      const mints = catalog.assets.filter((asset) => sol.has(asset.networkKey) && asset.contract !== null)
      expect(mints.length, `${name} has SOL tokens`).toBeGreaterThan(0)
      for (const asset of mints) {
        expect(isSolanaWalletAddress(asset.contract!, refused), `${name} ${asset.assetId}`).toBe(false)
        if (asset.tokenProgram !== null) expect(refused.has(asset.tokenProgram)).toBe(true)
      }
      for (const asset of catalog.assets.filter((candidate) => !sol.has(candidate.networkKey) && candidate.contract !== null)) {
        expect(refused.has(asset.contract!), `${name} ${asset.assetId}`).toBe(false)
      }
    }
  })

  it("a fresh key is a wallet", () => {
    expect(isSolanaWalletAddress(Keypair.generate().publicKey.toBase58(), nonWallets)).toBe(true)
  })

  it("the off-curve vector is the associated token account of HAgk for mint 32 x 0x44", () => {
    const mint = new PublicKey(new Uint8Array(32).fill(0x44))
    expect(mint.toBase58()).toBe("5bV6jUfhDHCQVA1WfKBUnXUsboJgoKgkzkKcxr3joew5")
    const [ata] = PublicKey.findProgramAddressSync(
      [new PublicKey(solWallet).toBuffer(), TOKEN_PROGRAM_ID.toBuffer(), mint.toBuffer()],
      ASSOCIATED_TOKEN_PROGRAM_ID
    )
    expect(ata.toBase58()).toBe("FF2BjgeRK2LgK8Lj4wY2CTJrmJAKV5ZPCdHqfq1tJLGi")
  })
})

describe("isWalletAccount (spec 4.1: what a node holds at a recipient address)", () => {
  const rows: ReadonlyArray<readonly [Parameters<typeof isWalletAccount>[0], boolean, string]> = [
    [null, true, "no account yet: a fresh wallet"],
    [{ executable: false, owner: systemProgram }, true, "a System-owned account: a wallet that holds SOL"],
    [{ executable: true, owner: "BPFLoaderUpgradeab1e11111111111111111111111" }, false, "a program"],
    [{ executable: true, owner: systemProgram }, false, "executable, whoever owns it"],
    [{ executable: false, owner: "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA" }, false, "a mint or token account"],
    [{ executable: false, owner: "Sysvar1111111111111111111111111111111111111" }, false, "a sysvar"],
    [{ executable: false, owner: Keypair.generate().publicKey.toBase58() }, false, "another program's data account"]
  ]
  for (const [account, expected, why] of rows) {
    it(why, () => {
      expect(isWalletAccount(account)).toBe(expected)
    })
  }
})
