/**
 * Signer.signTransaction on all four families, each checked by an independent path: the signature is recovered or
 * verified from the raw bytes alone (not from what the signing code returned), the decoded transaction carries
 * exactly the requested transfer, and the hash is recomputed from the bytes.
 */
import { assert, describe, it } from "@effect/vitest"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { base58 } from "@scure/base"
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID
} from "@solana/spl-token"
import { PublicKey, SystemInstruction, Transaction, type TransactionInstruction } from "@solana/web3.js"
import * as bitcoin from "bitcoinjs-lib"
import * as ecc from "@bitcoinerlab/secp256k1"
import { ECPairFactory } from "ecpair"
import { Cause, Effect, Exit, Redacted } from "effect"
import { utils as tronUtils, TronWeb } from "tronweb"
import { decodeFunctionData, erc20Abi, keccak256, parseTransaction, recoverTransactionAddress } from "viem"
import type { DerivationRequest } from "../../src/chains/Derivation.ts"
import { Signer } from "../../src/signer/Signer.ts"
import {
  associatedTokenAddress,
  associatedTokenProgramId,
  createAssociatedTokenAccountIdempotent,
  tokenProgramId,
  transferChecked
} from "../../src/signer/SolSigning.ts"
import {
  gasKey,
  platformKey,
  type SignedTransaction,
  type TransactionRequest,
  walletKey
} from "../../src/signer/TransactionRequest.ts"
import { abandonMnemonic, schemeVector } from "../chains/vectors.ts"
import { decodeTronRaw, recoverTronAddress } from "../support/TronRaw.ts"

const abandonLayer = Signer.layerLocalHd(Redacted.make(abandonMnemonic))
const wallet = { tenantIndex: 1, userIndex: 0, walletIndex: 0 }
const otherWallet = { tenantIndex: 1, userIndex: 7, walletIndex: 2 }

const signerEffect = <A, E>(use: (signer: Signer["Service"]) => Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.service(Signer), use).pipe(Effect.provide(abandonLayer))

const sign = (request: TransactionRequest) => signerEffect((signer) => signer.signTransaction(request))
const addressOf = (request: DerivationRequest) => signerEffect((signer) => signer.deriveAddress(request))

const defectOf = (exit: Exit.Exit<unknown, unknown>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  if (!Exit.isFailure(exit)) return undefined
  assert.isTrue(Cause.hasDies(exit.cause), `expected a defect, got ${Cause.pretty(exit.cause)}`)
  return exit.cause.reasons.find(Cause.isDieReason)?.defect
}

describe("EVM", () => {
  const evmRecipient = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
  const usdt = "0xdac17f958d2ee523a2206206994597c13d831ec7"
  const fees = { chainId: 11155111, nonce: 7, gas: 21_000n, maxFeePerGas: 30_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n }

  it.effect("a native transfer: the raw bytes recover to the wallet's address and carry the request", () =>
    Effect.gen(function*() {
      const request = { family: "EVM", key: walletKey(wallet), to: evmRecipient, amount: 10n ** 16n, ...fees } as const
      const signed = yield* sign(request)
      const expected = schemeVector("EVM", [1, 0, 0])
      assert.strictEqual(signed.from, expected)
      const raw = signed.raw as `0x02${string}`
      assert.strictEqual((yield* Effect.promise(() => recoverTransactionAddress({ serializedTransaction: raw }))).toLowerCase(), expected)
      assert.strictEqual(signed.txHash, keccak256(raw))
      const parsed = parseTransaction(raw)
      assert.strictEqual(parsed.type, "eip1559")
      assert.strictEqual(parsed.to, evmRecipient)
      assert.strictEqual(parsed.value, 10n ** 16n)
      assert.strictEqual(parsed.chainId, 11155111)
      assert.strictEqual(parsed.nonce, 7)
      assert.strictEqual(parsed.gas, 21_000n)
      assert.strictEqual(parsed.maxFeePerGas, 30_000_000_000n)
      assert.strictEqual(parsed.maxPriorityFeePerGas, 1_000_000_000n)
      // RFC 6979 signatures: the same request signs to the same bytes.
      assert.deepStrictEqual(yield* sign(request), signed)
    }))

  it.effect("an ERC-20 transfer calls transfer(to, amount) on the token with no value; amounts beyond 2^64 survive", () =>
    Effect.gen(function*() {
      const amount = 2n ** 100n + 12345n
      const signed = yield* sign({
        family: "EVM",
        key: platformKey("HOT"),
        to: evmRecipient,
        amount,
        token: usdt,
        ...fees,
        gas: 65_000n
      })
      assert.strictEqual(signed.from, schemeVector("EVM", [0, 0, 0]))
      const raw = signed.raw as `0x02${string}`
      assert.strictEqual((yield* Effect.promise(() => recoverTransactionAddress({ serializedTransaction: raw }))).toLowerCase(), signed.from)
      const parsed = parseTransaction(raw)
      assert.strictEqual(parsed.to, usdt)
      assert.strictEqual(parsed.value ?? 0n, 0n)
      const call = decodeFunctionData({ abi: erc20Abi, data: parsed.data! })
      assert.strictEqual(call.functionName, "transfer")
      assert.strictEqual(String(call.args?.[0]).toLowerCase(), evmRecipient)
      assert.strictEqual(call.args?.[1], amount)
    }))

  it.effect("a malformed recipient is a defect, not a signature", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(sign({ family: "EVM", key: walletKey(wallet), to: "0x1234", amount: 1n, ...fees }))
      assert.isDefined(defectOf(exit))
    }))
})

describe("TRON", () => {
  const recipient = "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"
  const usdt = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
  const referenceBlock = {
    number: 66_000_123n,
    id: "0000000003ef1a7b5b7e4d9c1d8a3f0e2c4b6a8d9e0f1a2b3c4d5e6f7a8b9c0d",
    timestamp: 1_763_800_000_000
  }

  const checkSignedBy = (signed: SignedTransaction, address: string) => {
    const { rawData, signatures } = decodeTronRaw(signed.raw)
    const hash = sha256(rawData)
    assert.strictEqual(signed.txHash, bytesToHex(hash))
    assert.lengthOf(signatures, 1)
    assert.strictEqual(recoverTronAddress(signatures[0]!, hash), address)
    return bytesToHex(rawData)
  }

  it.effect("a TRX transfer: signed by the wallet's key over sha256(raw_data), amount and TAPoS fields as asked", () =>
    Effect.gen(function*() {
      const signed = yield* sign({ family: "TRON", key: walletKey(wallet), to: recipient, amount: 1_500_000n, referenceBlock })
      const from = schemeVector("TRON", [1, 0, 0])
      assert.strictEqual(signed.from, from)
      const rawDataHex = checkSignedBy(signed, from)
      const decoded = tronUtils.deserializeTx.deserializeTransaction("TransferContract", rawDataHex) as any
      const value = decoded.contract[0].parameter.value
      assert.strictEqual(TronWeb.address.fromHex(value.owner_address), from)
      assert.strictEqual(TronWeb.address.fromHex(value.to_address), recipient)
      assert.strictEqual(String(value.amount), "1500000")
      assert.strictEqual(decoded.ref_block_bytes.toLowerCase(), (66_000_123).toString(16).slice(-4))
      assert.strictEqual(decoded.ref_block_hash.toLowerCase(), referenceBlock.id.slice(16, 32))
      assert.strictEqual(Number(decoded.timestamp), referenceBlock.timestamp)
      assert.strictEqual(Number(decoded.expiration), referenceBlock.timestamp + 60_000)
    }))

  it.effect("a TRC-20 transfer calls transfer(address,uint256) on the contract with the fee limit; big amounts exact", () =>
    Effect.gen(function*() {
      const amount = 10n ** 30n + 7n
      const signed = yield* sign({
        family: "TRON",
        key: platformKey("HOT"),
        to: recipient,
        amount,
        token: usdt,
        feeLimit: 30_000_000n,
        referenceBlock,
        expiration: referenceBlock.timestamp + 120_000
      })
      const from = schemeVector("TRON", [0, 0, 0])
      const rawDataHex = checkSignedBy(signed, from)
      const decoded = tronUtils.deserializeTx.deserializeTransaction("TriggerSmartContract", rawDataHex) as any
      const value = decoded.contract[0].parameter.value
      assert.strictEqual(TronWeb.address.fromHex(value.contract_address), usdt)
      assert.strictEqual(TronWeb.address.fromHex(value.owner_address), from)
      assert.strictEqual(String(decoded.fee_limit), "30000000")
      assert.strictEqual(Number(decoded.expiration), referenceBlock.timestamp + 120_000)
      const call = decodeFunctionData({ abi: erc20Abi, data: `0x${String(value.data).toLowerCase()}` })
      assert.strictEqual(call.functionName, "transfer")
      assert.strictEqual(call.args[1], amount)
      assert.strictEqual(TronWeb.address.fromHex(`41${(call.args[0] as string).slice(2)}`), recipient)
    }))

  it.effect("a TRX amount a JS number would round, and a TRC-20 transfer without a fee limit, are defects", () =>
    Effect.gen(function*() {
      const tooBig = yield* Effect.exit(
        sign({ family: "TRON", key: walletKey(wallet), to: recipient, amount: 2n ** 53n + 1n, referenceBlock })
      )
      assert.include(String(defectOf(tooBig)), "out of range")
      const noLimit = yield* Effect.exit(
        sign({ family: "TRON", key: walletKey(wallet), to: recipient, amount: 1n, token: usdt, referenceBlock })
      )
      assert.include(String(defectOf(noLimit)), "feeLimit")
    }))
})

describe("BTC", () => {
  const ECPair = ECPairFactory(ecc)
  const network = bitcoin.networks.testnet
  const destination = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx"

  it.effect("a spend of two wallets' outputs: each witness signature verifies against its own input's key", () =>
    Effect.gen(function*() {
      const first = yield* addressOf({ family: "BTC", btcNetwork: "test", ...wallet })
      const second = yield* addressOf({ family: "BTC", btcNetwork: "test", ...otherWallet })
      const change = yield* signerEffect((signer) => signer.platformAddress({ family: "BTC", btcNetwork: "test", role: "HOT" }))
      const inputs = [
        { txid: "aa".repeat(32), vout: 1, value: 70_000n, key: walletKey(wallet) },
        { txid: "bb".repeat(32), vout: 0, value: 50_000n, key: walletKey(otherWallet) }
      ]
      const outputs = [{ address: destination, value: 100_000n }, { address: change.address, value: 19_000n }]
      const signed = yield* sign({ family: "BTC", btcNetwork: "test", inputs, outputs })
      assert.strictEqual(signed.from, first.address)

      const transaction = bitcoin.Transaction.fromHex(signed.raw)
      assert.strictEqual(signed.txHash, transaction.getId())
      assert.deepStrictEqual(
        transaction.outs.map((output) => [bitcoin.address.fromOutputScript(output.script, network), output.value]),
        [[destination, 100_000n], [change.address, 19_000n]]
      )
      const owners = [first.address, second.address]
      transaction.ins.forEach((input, index) => {
        assert.strictEqual(Buffer.from(input.hash).reverse().toString("hex"), inputs[index]!.txid)
        assert.strictEqual(input.index, inputs[index]!.vout)
        assert.strictEqual(input.sequence, 0xfffffffd, "replaceable (BIP-125)")
        const [encodedSignature, publicKey] = input.witness
        const payment = bitcoin.payments.p2wpkh({ pubkey: publicKey!, network })
        assert.strictEqual(payment.address, owners[index])
        const { signature, hashType } = bitcoin.script.signature.decode(encodedSignature!)
        assert.strictEqual(hashType, bitcoin.Transaction.SIGHASH_ALL)
        const scriptCode = bitcoin.payments.p2pkh({ hash: payment.hash!, network }).output!
        const digest = transaction.hashForWitnessV0(index, scriptCode, inputs[index]!.value, hashType)
        assert.isTrue(ECPair.fromPublicKey(publicKey!).verify(digest, signature))
      })
    }))

  it.effect("outputs that leave no fee are a defect", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(sign({
        family: "BTC",
        btcNetwork: "test",
        inputs: [{ txid: "aa".repeat(32), vout: 0, value: 10_000n, key: walletKey(wallet) }],
        outputs: [{ address: destination, value: 10_000n }]
      }))
      assert.include(String(defectOf(exit)), "leave no fee")
    }))
})

describe("SOL", () => {
  const recipient = "9pedgei8s5tZ7S4FpLjg2WXAs5cG9SFvfgPig5RhcGdU"
  const usdcMint = "EPjFWrd5PLdpy7X4hr3nXTU7nQgkdx9w2YdMV3oEvqKA"
  const recentBlockhash = "EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N"

  const decode = (signed: SignedTransaction) => {
    const transaction = Transaction.from(Buffer.from(signed.raw, "base64"))
    assert.isTrue(transaction.verifySignatures(), "every required signature verifies over the message")
    assert.strictEqual(transaction.feePayer?.toBase58(), signed.from)
    assert.strictEqual(transaction.recentBlockhash, recentBlockhash)
    assert.strictEqual(signed.txHash, base58.encode(transaction.signature!))
    return transaction
  }

  it.effect("a SOL transfer from the wallet, which pays the fee", () =>
    Effect.gen(function*() {
      const signed = yield* sign({ family: "SOL", key: walletKey(wallet), recentBlockhash, to: recipient, amount: 2_500_000_000n })
      assert.strictEqual(signed.from, schemeVector("SOL", [1, 0, 0]))
      const transaction = decode(signed)
      assert.lengthOf(transaction.instructions, 1)
      const transfer = SystemInstruction.decodeTransfer(transaction.instructions[0]!)
      assert.strictEqual(transfer.fromPubkey.toBase58(), signed.from)
      assert.strictEqual(transfer.toPubkey.toBase58(), recipient)
      assert.strictEqual(BigInt(transfer.lamports), 2_500_000_000n)
    }))

  it.effect("an SPL transfer: the two instructions are byte-equal to @solana/spl-token's (Token and Token-2022)", () =>
    Effect.gen(function*() {
      for (const programId of [undefined, TOKEN_2022_PROGRAM_ID.toBase58()]) {
        const amount = 2n ** 63n + 5n
        const signed = yield* sign({
          family: "SOL",
          key: platformKey("HOT"),
          recentBlockhash,
          to: recipient,
          amount,
          token: { mint: usdcMint, decimals: 6, programId }
        })
        assert.strictEqual(signed.from, schemeVector("SOL", [0, 0, 0]))
        const transaction = decode(signed)
        const owner = new PublicKey(signed.from)
        const mint = new PublicKey(usdcMint)
        const to = new PublicKey(recipient)
        const program = programId === undefined ? undefined : new PublicKey(programId)
        const destination = getAssociatedTokenAddressSync(mint, to, false, program)
        const expected = [
          createAssociatedTokenAccountIdempotentInstruction(owner, destination, to, mint, program),
          createTransferCheckedInstruction(
            getAssociatedTokenAddressSync(mint, owner, false, program),
            mint,
            destination,
            owner,
            amount,
            6,
            [],
            program
          )
        ]
        assert.lengthOf(transaction.instructions, 2)
        transaction.instructions.forEach((instruction, index) => {
          const reference = expected[index]!
          assert.strictEqual(instruction.programId.toBase58(), reference.programId.toBase58())
          // Flags in a decoded transaction are per account for the whole message (the owner also pays the fee, so
          // it is writable there); the builders' own flags are compared below.
          assert.deepStrictEqual(
            instruction.keys.map((key) => key.pubkey.toBase58()),
            reference.keys.map((key) => key.pubkey.toBase58())
          )
          assert.strictEqual(instruction.data.toString("hex"), reference.data.toString("hex"))
        })
      }
    }))

  it.effect("an SPL sweep paid by a GAS wallet (decisions.md: on SOL the GAS wallet is the fee payer): it signs first and pays the fee and any account rent; the deposit key only authorizes the transfer", () =>
    Effect.gen(function*() {
      const gas = yield* signerEffect((signer) => signer.platformAddress({ family: "SOL", role: "GAS", tenantIndex: 1 }))
      const signed = yield* sign({
        family: "SOL",
        key: walletKey(wallet),
        feePayer: gasKey(1),
        recentBlockhash,
        to: recipient,
        amount: 5_000_000n,
        token: { mint: usdcMint, decimals: 6 }
      })
      assert.strictEqual(signed.from, schemeVector("SOL", [1, 0, 0]), "the sender is the deposit wallet")
      const transaction = Transaction.from(Buffer.from(signed.raw, "base64"))
      assert.isTrue(transaction.verifySignatures(), "both signatures verify")
      assert.strictEqual(transaction.feePayer?.toBase58(), gas.address)
      assert.deepStrictEqual(transaction.signatures.map((entry) => entry.publicKey.toBase58()), [gas.address, signed.from])
      assert.strictEqual(signed.txHash, base58.encode(transaction.signatures[0]!.signature!), "the id is the fee payer's signature")
      const [create, transfer] = transaction.instructions
      assert.strictEqual(create!.keys[0]!.pubkey.toBase58(), gas.address, "the GAS wallet pays a missing account's rent")
      assert.strictEqual(transfer!.keys[3]!.pubkey.toBase58(), signed.from, "the deposit wallet owns the tokens moved")
    }))

  it("the builders' accounts, flags and data equal @solana/spl-token's", () => {
    const owner = new PublicKey(schemeVector("SOL", [0, 0, 0]))
    const mint = new PublicKey(usdcMint)
    const to = new PublicKey(recipient)
    const flags = (instruction: TransactionInstruction) => ({
      programId: instruction.programId.toBase58(),
      keys: instruction.keys.map((key) => [key.pubkey.toBase58(), key.isSigner, key.isWritable]),
      data: instruction.data.toString("hex")
    })
    for (const program of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID]) {
      const source = getAssociatedTokenAddressSync(mint, owner, false, program)
      const destination = getAssociatedTokenAddressSync(mint, to, false, program)
      assert.strictEqual(associatedTokenAddress(to, mint, program).toBase58(), destination.toBase58())
      assert.deepStrictEqual(
        flags(createAssociatedTokenAccountIdempotent(owner, destination, to, mint, program)),
        flags(createAssociatedTokenAccountIdempotentInstruction(owner, destination, to, mint, program))
      )
      assert.deepStrictEqual(
        flags(transferChecked(source, mint, destination, owner, 2n ** 64n - 1n, 9, program)),
        flags(createTransferCheckedInstruction(source, mint, destination, owner, 2n ** 64n - 1n, 9, [], program))
      )
    }
    assert.strictEqual(tokenProgramId.toBase58(), TOKEN_PROGRAM_ID.toBase58())
    assert.strictEqual(associatedTokenProgramId.toBase58(), ASSOCIATED_TOKEN_PROGRAM_ID.toBase58())
  })

  it.effect("an off-curve (program-derived) recipient is a defect", () =>
    Effect.gen(function*() {
      const offCurve = getAssociatedTokenAddressSync(new PublicKey(usdcMint), new PublicKey(recipient)).toBase58()
      const exit = yield* Effect.exit(sign({ family: "SOL", key: walletKey(wallet), recentBlockhash, to: offCurve, amount: 1n }))
      assert.include(String(defectOf(exit)), "on-curve")
    }))
})

describe("keys", () => {
  /** A plain 1-wei transfer; the tests below add the key. */
  const smallEvmTransfer = {
    family: "EVM",
    to: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
    amount: 1n,
    chainId: 11155111,
    nonce: 0,
    gas: 21_000n,
    maxFeePerGas: 2n,
    maxPriorityFeePerGas: 1n
  } as const

  it.effect("a wallet key in tenant 0 (the platform's) is a defect on every family", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(sign({
        family: "SOL",
        key: walletKey({ tenantIndex: 0, userIndex: 0, walletIndex: 0 }),
        recentBlockhash: "EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N",
        to: "9pedgei8s5tZ7S4FpLjg2WXAs5cG9SFvfgPig5RhcGdU",
        amount: 1n
      }))
      assert.include(String(defectOf(exit)), "reserved for platform keys")
    }))

  it.effect("a tenant's GAS key signs as its GAS wallet (T=0, U=2, W=tenant index); GAS without a tenant is a defect", () =>
    Effect.gen(function*() {
      // decisions.md "Operating wallets": a GAS wallet per tenant and network pays the top-ups of token sweeps.
      const request = { ...smallEvmTransfer, key: gasKey(3) } as const
      const signed = yield* sign(request)
      const gasWallet = yield* signerEffect((signer) => signer.platformAddress({ family: "EVM", role: "GAS", tenantIndex: 3 }))
      assert.strictEqual(gasWallet.path, "m/44'/60'/0'/2'/3")
      assert.strictEqual(signed.from, gasWallet.address)
      const recovered = yield* Effect.promise(() => recoverTransactionAddress({ serializedTransaction: signed.raw as `0x02${string}` }))
      assert.strictEqual(recovered.toLowerCase(), gasWallet.address)
      const noTenant = yield* Effect.exit(sign({ ...request, key: { _tag: "Platform", role: "GAS" } as any }))
      assert.include(String(defectOf(noTenant)), "GAS wallet belongs to a tenant")
      const tenantZero = yield* Effect.exit(sign({ ...request, key: gasKey(0) }))
      assert.include(String(defectOf(tenantZero)), "GAS wallet belongs to a tenant")
    }))

  it.effect("a key signs again after a use: every signature gets its own copy of the memoised key, wiped afterwards", () =>
    Effect.gen(function*() {
      // Signer.ts memoises derived keys and withKey zeroes the bytes it was given: were the cached bytes handed out,
      // the second signature would be made with a zeroed key (refused on secp256k1, another key on ed25519).
      const evm = { ...smallEvmTransfer, key: walletKey(wallet) } as const
      const sol = {
        family: "SOL",
        key: walletKey(wallet),
        recentBlockhash: "EkSnNWid2cvwEVnVx9aBqawnmiCNiDgp3gUdkDPTKN1N",
        to: "9pedgei8s5tZ7S4FpLjg2WXAs5cG9SFvfgPig5RhcGdU",
        amount: 1n
      } as const
      const signed = yield* signerEffect((signer) =>
        Effect.forEach([evm, evm, sol, sol], (request) => signer.signTransaction(request)))
      for (const evmSigned of signed.slice(0, 2)) {
        const recovered = yield* Effect.promise(() =>
          recoverTransactionAddress({ serializedTransaction: evmSigned.raw as `0x02${string}` }))
        assert.strictEqual(recovered.toLowerCase(), schemeVector("EVM", [1, 0, 0]))
      }
      for (const solSigned of signed.slice(2)) {
        const transaction = Transaction.from(Buffer.from(solSigned.raw, "base64"))
        assert.isTrue(transaction.verifySignatures(), "the signature verifies over the message")
        assert.strictEqual(transaction.feePayer?.toBase58(), schemeVector("SOL", [1, 0, 0]))
      }
      assert.deepStrictEqual(signed[1], signed[0])
      assert.deepStrictEqual(signed[3], signed[2])
    }))

  it.effect("the disabled signer answers SignerUnavailable", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.flatMap(Effect.service(Signer), (signer) =>
          signer.signTransaction({
            family: "EVM",
            key: walletKey(wallet),
            chainId: 1,
            nonce: 0,
            to: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
            amount: 1n,
            gas: 21_000n,
            maxFeePerGas: 1n,
            maxPriorityFeePerGas: 1n
          })).pipe(Effect.provide(Signer.layerDisabled))
      )
      assert.strictEqual(error._tag, "SignerUnavailable")
    }))
})
