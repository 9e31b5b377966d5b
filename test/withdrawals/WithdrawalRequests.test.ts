/**
 * withdrawals/WithdrawalRequests.ts: the signer's request for a withdrawal, from the catalog's network and asset and
 * the chain client's parameters, signed by the platform HOT key. Checked here on what the end-to-end tests on the
 * simulated chain cannot see: the catalog's `tokenProgram` of an SPL token (a Token-2022 mint must be moved by the
 * Token-2022 program, from and to its associated accounts under that program), and the token fields per family.
 */
import { assert, describe, it } from "@effect/vitest"
import { createTransferCheckedInstruction, getAssociatedTokenAddressSync, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from "@solana/spl-token"
import { Keypair, PublicKey, Transaction as SolTransaction } from "@solana/web3.js"
import { Effect, Redacted } from "effect"
import type { CatalogAsset, CatalogNetwork } from "../../src/catalog/Catalog.ts"
import catalogFile from "../../src/catalog/development.json" with { type: "json" }
import { Signer } from "../../src/signer/Signer.ts"
import { platformKey } from "../../src/signer/TransactionRequest.ts"
import { withdrawalRequest } from "../../src/withdrawals/WithdrawalRequests.ts"
import { testMnemonic } from "../support/TestApp.ts"

const network = (key: string) => catalogFile.networks.find((entry) => entry.networkKey === key) as unknown as CatalogNetwork
const asset = (id: string) => catalogFile.assets.find((entry) => entry.assetId === id) as unknown as CatalogAsset

const solTo = Keypair.fromSeed(new Uint8Array(32).fill(7)).publicKey.toBase58()
const recentBlockhash = "EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N"
const transfer = (from: string, assetId: string, to: string) => ({ withdrawalId: "w", from, to, assetId, amount: 25_000_000n })

describe("withdrawalRequest", () => {
  it.effect("SPL: the catalog's tokenProgram is the program the signed transfer uses (Token and Token-2022)", () =>
    Effect.gen(function*() {
      const signer = yield* Signer
      const hot = yield* signer.platformAddress({ family: "SOL", role: "HOT" })
      for (const program of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]) {
        const usdc = { ...asset("SOL_DEVNET_USDC"), tokenProgram: program.toBase58() }
        const request = withdrawalRequest(
          network("SOL_DEVNET"),
          usdc,
          transfer(hot.address, usdc.assetId, solTo),
          { family: "SOL", recentBlockhash, networkFee: 5000n }
        )
        assert.strictEqual(request.family, "SOL")
        assert.deepStrictEqual(request.family === "SOL" ? request.key : undefined, platformKey("HOT"))
        const signed = yield* signer.signTransaction(request)
        const transaction = SolTransaction.from(Buffer.from(signed.raw, "base64"))
        assert.isTrue(transaction.verifySignatures())
        const mint = new PublicKey(usdc.contract!)
        const owner = new PublicKey(hot.address)
        const expected = createTransferCheckedInstruction(
          getAssociatedTokenAddressSync(mint, owner, false, program),
          mint,
          getAssociatedTokenAddressSync(mint, new PublicKey(solTo), false, program),
          owner,
          25_000_000n,
          6,
          [],
          program
        )
        const sent = transaction.instructions.at(-1)!
        assert.strictEqual(sent.programId.toBase58(), program.toBase58(), `moved by ${program.toBase58()}`)
        assert.deepStrictEqual(sent.keys.map((key) => key.pubkey.toBase58()), expected.keys.map((key) => key.pubkey.toBase58()))
        assert.strictEqual(sent.data.toString("hex"), expected.data.toString("hex"))
      }
    }).pipe(Effect.provide(Signer.layerLocalHd(Redacted.make(testMnemonic))), Effect.orDie))

  it("ERC-20 and TRC-20: the token's contract, signed by HOT; TRON's fee limit only for tokens; parameters of another family are refused", () => {
    const evm = withdrawalRequest(network("ETH_SEPOLIA"), asset("ETH_SEPOLIA_USDT"), transfer("0x0", "ETH_SEPOLIA_USDT", "0xabc"), {
      family: "EVM",
      chainId: 11_155_111,
      nonce: 3,
      gas: 65_000n,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      networkFee: 130_000n
    })
    assert.deepStrictEqual(evm, {
      family: "EVM",
      key: platformKey("HOT"),
      chainId: 11_155_111,
      nonce: 3,
      to: "0xabc",
      amount: 25_000_000n,
      token: asset("ETH_SEPOLIA_USDT").contract!,
      gas: 65_000n,
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n
    })
    const referenceBlock = { number: 5n, id: "00".repeat(32), timestamp: 1 }
    const tron = (assetId: string) =>
      withdrawalRequest(network("TRON_NILE"), asset(assetId), transfer("T0", assetId, "T1"), {
        family: "TRON",
        referenceBlock,
        feeLimit: 100_000_000n,
        networkFee: 1_100_000n
      })
    assert.deepStrictEqual(tron("TRON_NILE_USDT"), {
      family: "TRON",
      key: platformKey("HOT"),
      to: "T1",
      amount: 25_000_000n,
      token: asset("TRON_NILE_USDT").contract!,
      feeLimit: 100_000_000n,
      referenceBlock
    })
    const trx = tron("TRON_NILE_TRX")
    assert.strictEqual(trx.family === "TRON" ? trx.token : "wrong family", undefined)
    assert.strictEqual(trx.family === "TRON" ? trx.feeLimit : "wrong family", undefined)
    assert.throws(
      () => withdrawalRequest(network("TRON_NILE"), asset("TRON_NILE_USDT"), transfer("T0", "TRON_NILE_USDT", "T1"), { family: "SOL", recentBlockhash, networkFee: 1n }),
      /TRON_NILE is TRON/
    )
  })
})
