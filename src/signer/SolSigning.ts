/**
 * SOL and SPL token transfers signed offline with @solana/web3.js 1.x.
 *
 * The two SPL instructions are built here rather than with @solana/spl-token: that package adds about 190 ms to
 * every start (measured here) and brings `bigint-buffer`, which has an open memory-safety advisory. Both are a few
 * bytes of fixed layout, and test/signer/SolSigning.test.ts holds them byte-equal to spl-token's builders.
 */
import { base58 } from "@scure/base"
import { Keypair, PublicKey, SystemProgram, Transaction, TransactionInstruction } from "@solana/web3.js"
import type { DerivedKey } from "../chains/Derivation.ts"
import { type KeySource, withKey } from "./KeySource.ts"
import type { SignedTransaction, SolToken, SolTransfer } from "./TransactionRequest.ts"

export const tokenProgramId = new PublicKey("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
export const associatedTokenProgramId = new PublicKey("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")

/** spl-token's instruction numbers. */
const transferCheckedInstruction = 12
const createIdempotentInstruction = 1
const u64Max = 2n ** 64n - 1n

export const associatedTokenAddress = (owner: PublicKey, mint: PublicKey, programId: PublicKey): PublicKey =>
  PublicKey.findProgramAddressSync([owner.toBuffer(), programId.toBuffer(), mint.toBuffer()], associatedTokenProgramId)[0]

/** Creates `owner`'s account for `mint` unless it exists (then it does nothing), paid by `payer`. */
export const createAssociatedTokenAccountIdempotent = (
  payer: PublicKey,
  account: PublicKey,
  owner: PublicKey,
  mint: PublicKey,
  programId: PublicKey
): TransactionInstruction =>
  new TransactionInstruction({
    programId: associatedTokenProgramId,
    keys: [
      { pubkey: payer, isSigner: true, isWritable: true },
      { pubkey: account, isSigner: false, isWritable: true },
      { pubkey: owner, isSigner: false, isWritable: false },
      { pubkey: mint, isSigner: false, isWritable: false },
      { pubkey: SystemProgram.programId, isSigner: false, isWritable: false },
      { pubkey: programId, isSigner: false, isWritable: false }
    ],
    data: Buffer.from([createIdempotentInstruction])
  })

/** `TransferChecked`: the program re-checks mint and decimals, so a wrong `decimals` fails instead of mis-scaling. */
export const transferChecked = (
  source: PublicKey,
  mint: PublicKey,
  destination: PublicKey,
  owner: PublicKey,
  amount: bigint,
  decimals: number,
  programId: PublicKey
): TransactionInstruction => {
  if (amount <= 0n || amount > u64Max) throw new RangeError(`SPL amount out of range: ${amount}`)
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 255) throw new RangeError(`bad decimals ${decimals}`)
  const data = Buffer.alloc(10)
  data.writeUInt8(transferCheckedInstruction, 0)
  data.writeBigUInt64LE(amount, 1)
  data.writeUInt8(decimals, 9)
  return new TransactionInstruction({
    programId,
    keys: [
      { pubkey: source, isSigner: false, isWritable: true },
      { pubkey: mint, isSigner: false, isWritable: false },
      { pubkey: destination, isSigner: false, isWritable: true },
      { pubkey: owner, isSigner: true, isWritable: false }
    ],
    data
  })
}

const tokenInstructions = (sender: PublicKey, payer: PublicKey, recipient: PublicKey, amount: bigint, token: SolToken) => {
  const mint = new PublicKey(token.mint)
  const programId = token.programId === undefined ? tokenProgramId : new PublicKey(token.programId)
  const destination = associatedTokenAddress(recipient, mint, programId)
  return [
    createAssociatedTokenAccountIdempotent(payer, destination, recipient, mint, programId),
    transferChecked(
      associatedTokenAddress(sender, mint, programId),
      mint,
      destination,
      sender,
      amount,
      token.decimals,
      programId
    )
  ]
}

export const signSolTransfer = (keys: KeySource, request: SolTransfer): Promise<SignedTransaction> =>
  withKey(keys, request.key, { family: "SOL" }, (derived) =>
    request.feePayer === undefined
      ? build(request, derived, undefined)
      : withKey(keys, request.feePayer, { family: "SOL" }, (payer) => build(request, derived, payer)))

const keypairOf = (derived: DerivedKey) => {
  const keypair = Keypair.fromSeed(derived.privateKey)
  if (keypair.publicKey.toBase58() !== derived.address) throw new Error("SOL key and derived address disagree")
  return keypair
}

const build = (request: SolTransfer, derived: DerivedKey, payerKey: DerivedKey | undefined): SignedTransaction => {
  const keypair = keypairOf(derived)
  const sender = keypair.publicKey
  const payer = payerKey === undefined ? keypair : keypairOf(payerKey)
  const recipient = new PublicKey(request.to)
  // Tokens sent to a program-derived (off-curve) owner land in an account nobody can sign for.
  if (!PublicKey.isOnCurve(recipient.toBytes())) throw new Error("SOL recipient is not an on-curve wallet address")
  if (request.amount <= 0n || request.amount > u64Max) throw new RangeError(`SOL amount out of range: ${request.amount}`)
  const transaction = new Transaction({ feePayer: payer.publicKey, recentBlockhash: request.recentBlockhash })
  if (request.token === undefined) {
    transaction.add(SystemProgram.transfer({ fromPubkey: sender, toPubkey: recipient, lamports: request.amount }))
  } else {
    transaction.add(...tokenInstructions(sender, payer.publicKey, recipient, request.amount, request.token))
  }
  // The fee payer's signature comes first and is the transaction's id.
  if (payer === keypair) transaction.sign(keypair)
  else transaction.sign(payer, keypair)
  if (!transaction.verifySignatures()) throw new Error("SOL transaction signature does not verify")
  const signature = transaction.signature
  if (signature === null) throw new Error("SOL transaction has no signature after signing")
  return {
    family: "SOL",
    from: derived.address,
    txHash: base58.encode(signature),
    raw: transaction.serialize().toString("base64")
  }
}
