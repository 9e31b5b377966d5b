/**
 * A Solana JSON-RPC front over one in-process `litesvm` (chains.md 5.4): no Solana validator runs here, so the tests
 * put this HTTP server on a free loopback port in front of a real SVM. Every transaction is executed by litesvm (real
 * System, Token and Associated Token programs, real signature checks, real fees); the front keeps what a validator's
 * RPC adds on top: slots, blocks with their hashes and parents, block heights, commitments, the recent-blockhash
 * window, the signature status cache, and the transaction records with their `meta`.
 *
 * The answers follow the real RPC shapes; the strict check is @solana/web3.js 1.99's Connection, which parses every
 * answer with its superstruct schemas (GetBlockRpcResult, GetTransactionRpcResult, GetSignatureStatusesRpcResult, ...).
 * docs/sol.md lists what was checked against web3.js and Solana's RPC documentation and what is assumed.
 *
 * Model (docs/sol.md, "The test node"):
 * - Each transaction that lands closes a block of its own (like anvil's automine): `sendTransaction` executes it and
 *   seals the block that holds it; `mine` adds empty blocks. Slots normally advance by one per block; `skipSlots`
 *   leaves slots without a block, and a reorganization puts its new blocks at slots after the old head's, so the old
 *   slots read as skipped, as on Solana.
 * - Commitments: `processed` and `confirmed` are the head block; `finalized` is the head minus 31 blocks (Solana
 *   roots a block once 32 confirmed blocks sit on it). Blocks above `finalized` can be rolled back (`reorg`); the
 *   front keeps the SVM state after each of them (LiteSVM `toBytes`) to restore it.
 * - A blockhash is valid for transactions in blocks up to its block height + 150 (`lastValidBlockHeight`). A
 *   transaction with an unknown or expired blockhash, or whose fee payer cannot pay the fee, is dropped without an
 *   answer, as a real leader drops it (the client sends with `skipPreflight`, which is the only mode modelled here).
 * - A transaction that fails in execution is recorded with its `meta.err`, and its fee is charged (litesvm commits
 *   the fee of an included failed transaction, as Solana does).
 * - Sending bytes whose signature the chain already holds answers the signature again and executes nothing (the
 *   status cache).
 */
import { base58 } from "@scure/base"
import { getTransactionDecoder } from "@solana/kit"
import { Keypair, PublicKey, SystemProgram, Transaction, type TransactionInstruction, VersionedTransaction } from "@solana/web3.js"
import { ed25519 } from "@noble/curves/ed25519.js"
import { LiteSVM } from "litesvm"
import { createHash } from "node:crypto"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import {
  associatedTokenAddress,
  createAssociatedTokenAccountIdempotent,
  tokenProgramId,
  transferChecked
} from "../../src/signer/SolSigning.ts"

/** Blocks between the head and the finalized block (Solana: a block is rooted once 32 confirmed blocks sit on it). */
export const finalityDepth = 31
/** MAX_PROCESSING_AGE: a blockhash is valid for 150 blocks after its own. */
export const blockhashValidBlocks = 150
export const lamportsPerSignature = 5_000n
const token2022ProgramId = "TokenzQdBNbLqP7VjP6t8ZCt2yQtCjVkpsmUGd9Zf2xm"

type Commitment = "processed" | "confirmed" | "finalized"

interface TokenBalance {
  readonly accountIndex: number
  readonly mint: string
  readonly owner: string
  readonly programId: string
  readonly amount: bigint
  readonly decimals: number
}

interface RecordedTransaction {
  readonly signature: string
  readonly raw: Uint8Array
  readonly transaction: VersionedTransaction
  readonly err: unknown
  readonly fee: bigint
  readonly preBalances: ReadonlyArray<bigint>
  readonly postBalances: ReadonlyArray<bigint>
  readonly preTokenBalances: ReadonlyArray<TokenBalance>
  readonly postTokenBalances: ReadonlyArray<TokenBalance>
  readonly logs: ReadonlyArray<string>
  readonly computeUnits: bigint
}

interface Block {
  readonly slot: number
  readonly height: number
  readonly blockhash: string
  readonly previousBlockhash: string
  readonly parentSlot: number
  readonly blockTime: number
  readonly transactions: ReadonlyArray<RecordedTransaction>
  /** The SVM state after this block, kept while the block can still be rolled back. */
  snapshot: Uint8Array | undefined
}

class RpcError extends Error {
  readonly code: number
  readonly data: unknown
  constructor(code: number, message: string, data?: unknown) {
    super(message)
    this.code = code
    this.data = data
  }
}

const instructionErrors = [
  "GenericError", "InvalidArgument", "InvalidInstructionData", "InvalidAccountData", "AccountDataTooSmall",
  "InsufficientFunds", "IncorrectProgramId", "MissingRequiredSignature", "AccountAlreadyInitialized",
  "UninitializedAccount", "UnbalancedInstruction", "ModifiedProgramId", "ExternalAccountLamportSpend",
  "ExternalAccountDataModified", "ReadonlyLamportChange", "ReadonlyDataModified", "DuplicateAccountIndex",
  "ExecutableModified", "RentEpochModified", "NotEnoughAccountKeys", "AccountDataSizeChanged", "AccountNotExecutable"
]
const transactionErrors = [
  "AccountInUse", "AccountLoadedTwice", "AccountNotFound", "ProgramAccountNotFound", "InsufficientFundsForFee",
  "InvalidAccountForFee", "AlreadyProcessed", "BlockhashNotFound", "CallChainTooDeep", "MissingSignatureForFee",
  "InvalidAccountIndex", "SignatureFailure", "InvalidProgramForExecution", "SanitizeFailure", "ClusterMaintenance"
]

/** litesvm's error objects in the JSON form the RPC gives `TransactionError` (`{"InstructionError":[1,{"Custom":1}]}`). */
const errorJson = (error: unknown): unknown => {
  if (typeof error === "number") return transactionErrors[error] ?? `TransactionError${error}`
  if (error !== null && typeof error === "object") {
    const record = error as Record<string, unknown>
    if (typeof record.err === "function" && typeof record.index === "number") {
      const inner = (record.err as () => unknown).call(error)
      const innerJson = typeof inner === "number"
        ? instructionErrors[inner] ?? `InstructionError${inner}`
        : inner !== null && typeof inner === "object" && "code" in inner
        ? { Custom: (inner as { code: number }).code }
        : { BorshIoError: String(inner) }
      return { InstructionError: [record.index, innerJson] }
    }
    if (typeof record.accountIndex === "number") return { InsufficientFundsForRent: { account_index: record.accountIndex } }
    if (typeof record.index === "number") return { DuplicateInstruction: record.index }
  }
  return String(error)
}

const decimalString = (amount: bigint, decimals: number) => {
  const text = amount.toString().padStart(decimals + 1, "0")
  const whole = text.slice(0, text.length - decimals)
  const fraction = text.slice(text.length - decimals).replace(/0+$/, "")
  return fraction === "" ? whole : `${whole}.${fraction}`
}

const uiTokenAmount = (amount: bigint, decimals: number) => ({
  amount: amount.toString(),
  decimals,
  uiAmount: Number(decimalString(amount, decimals)),
  uiAmountString: decimalString(amount, decimals)
})

export interface SolanaRpcFrontOptions {
  /** When set, requests must carry these as HTTP Basic credentials (401 otherwise): tests the client's userinfo. */
  readonly basicAuth?: { readonly user: string; readonly password: string } | undefined
  /** Seeds the genesis hash and blockhashes, so two fronts are two different chains. */
  readonly seed?: string | undefined
  /** The loopback port to listen on (a service layer built before the front starts needs its URL); default: any free one. */
  readonly port?: number | undefined
}

export interface SolanaRpcFront {
  readonly url: string
  readonly genesisHash: string
  /** A keypair with 10^6 SOL that pays the harness's transfers and fee. */
  readonly faucet: Keypair
  /** Adds `count` empty blocks; `skipSlots` slots before each are left without a block. */
  readonly mine: (count: number, skipSlots?: number) => void
  /** Replaces the top `depth` blocks (all above `finalized`) by `depth + 1` empty ones at later slots. */
  readonly reorg: (depth: number) => void
  /** Creates `mint` (decimals, supply held by the faucet's token account) as the Token program's mint account. */
  readonly createMint: (mint: string, decimals: number, programId?: string) => void
  /** Pays SOL from the faucet in a transaction of its own block; returns its signature and block height. */
  readonly paySol: (to: string, lamports: bigint) => { readonly signature: string; readonly height: number }
  /** Pays tokens from the faucet to `owner`'s associated token account (created when missing). */
  readonly payToken: (owner: string, mint: string, amount: bigint) => { readonly signature: string; readonly height: number }
  /**
   * Overwrites the amount in `owner`'s associated token account (which must exist), outside any transaction, like
   * anvil's setBalance: a test empties the hot wallet between a signature and its inclusion.
   */
  readonly setTokenAmount: (owner: string, mint: string, amount: bigint) => void
  /** Creates an empty token account of `mint` at `address` (not the owner's associated one) owned by `owner`. */
  readonly createTokenAccount: (address: string, owner: string, mint: string) => void
  /** While true, transactions sent over RPC are answered with their signature and dropped (a congested leader). */
  readonly setDropping: (dropping: boolean) => void
  readonly headHeight: () => number
  /** Where the signature is in the current chain, if it is. */
  readonly blockOf: (signature: string) => { readonly height: number; readonly slot: number; readonly err: unknown } | undefined
  /** The signatures of the current chain's transactions paid for by `feePayer`, in block order. */
  readonly signaturesFrom: (feePayer: string) => ReadonlyArray<string>
  readonly lamports: (address: string) => bigint
  readonly tokenAmount: (owner: string, mint: string) => bigint
  readonly close: () => Promise<void>
}

const hashOf = (...parts: ReadonlyArray<string>) =>
  base58.encode(createHash("sha256").update(parts.join("/")).digest())

const tokenAccountSize = 165
const mintSize = 82

export const startSolanaRpcFront = async (options: SolanaRpcFrontOptions = {}): Promise<SolanaRpcFront> => {
  const seed = options.seed ?? "coffer-test-cluster"
  const genesisHash = hashOf(seed, "genesis")
  const decoder = getTransactionDecoder()
  let svm = new LiteSVM().withBlockhashCheck(false)
  const faucet = Keypair.fromSeed(createHash("sha256").update(`${seed}/faucet`).digest())
  // 10^6 SOL: every balance stays below 2^53 lamports, which web3.js 1.x parses as a JS number (docs/sol.md).
  svm.setAccount({
    address: faucet.publicKey.toBase58() as never,
    lamports: (10n ** 15n) as never,
    programAddress: SystemProgram.programId.toBase58() as never,
    executable: false,
    space: 0n,
    data: new Uint8Array(0)
  } as never)

  const startSeconds = Math.floor(Date.now() / 1000)
  let forks = 0
  let dropping = false
  const blocks: Array<Block> = []
  const mintDecimals = new Map<string, number>()

  const seal = (slot: number, transactions: ReadonlyArray<RecordedTransaction>) => {
    const parent = blocks.at(-1)
    const height = blocks.length
    const block: Block = {
      slot,
      height,
      blockhash: hashOf(seed, "block", String(slot), String(forks)),
      previousBlockhash: parent?.blockhash ?? genesisHash,
      parentSlot: parent?.slot ?? 0,
      blockTime: startSeconds + Math.floor((slot * 400) / 1000),
      transactions,
      snapshot: svm.toBytes()
    }
    blocks.push(block)
    // Only blocks that can still be rolled back keep their state (one snapshot is ~1.4 MB).
    const drop = blocks.length - finalityDepth - 3
    if (drop >= 0 && blocks[drop] !== undefined) blocks[drop]!.snapshot = undefined
    return block
  }
  // Genesis (height 0 at slot 0).
  seal(0, [])

  const head = () => blocks.at(-1)!
  const heightAt = (commitment: Commitment) =>
    commitment === "finalized" ? Math.max(0, head().height - finalityDepth) : head().height
  const blockAtCommitment = (commitment: Commitment) => blocks[heightAt(commitment)]!

  const nextSlot = (skip = 0) => head().slot + 1 + skip

  const located = (signature: string) => {
    for (const block of blocks) {
      const index = block.transactions.findIndex((tx) => tx.signature === signature)
      if (index >= 0) return { block, tx: block.transactions[index]! }
    }
    return undefined
  }

  const blockhashHeight = (blockhash: string) => blocks.find((block) => block.blockhash === blockhash)?.height

  const isTokenProgram = (owner: string) => owner === tokenProgramId.toBase58() || owner === token2022ProgramId

  const tokenBalanceOf = (key: string, accountIndex: number): TokenBalance | undefined => {
    const account = svm.getAccount(key as never)
    if (!account.exists || !isTokenProgram(account.programAddress) || account.data.length < tokenAccountSize) return undefined
    const data = Buffer.from(account.data)
    if (data[108] === 0) return undefined
    const mint = new PublicKey(data.subarray(0, 32)).toBase58()
    const mintAccount = svm.getAccount(mint as never)
    const decimals = mintAccount.exists ? Buffer.from(mintAccount.data)[44]! : (mintDecimals.get(mint) ?? 0)
    return {
      accountIndex,
      mint,
      owner: new PublicKey(data.subarray(32, 64)).toBase58(),
      programId: account.programAddress,
      amount: data.readBigUInt64LE(64),
      decimals
    }
  }

  const balancesOf = (keys: ReadonlyArray<string>) => keys.map((key) => BigInt(svm.getBalance(key as never) ?? 0n))
  const tokenBalancesOf = (keys: ReadonlyArray<string>) =>
    keys.flatMap((key, index) => {
      const balance = tokenBalanceOf(key, index)
      return balance === undefined ? [] : [balance]
    })

  const verifySignatures = (transaction: VersionedTransaction) => {
    const message = transaction.message.serialize()
    const signers = transaction.message.staticAccountKeys.slice(0, transaction.message.header.numRequiredSignatures)
    if (transaction.signatures.length !== signers.length) return false
    return signers.every((key, index) => {
      try {
        return ed25519.verify(transaction.signatures[index]!, message, key.toBytes())
      } catch {
        return false
      }
    })
  }

  /**
   * A transaction as the cluster takes it: the signature it is known by, and whether it landed (in a block of its
   * own, which becomes the head) or was dropped.
   */
  const submit = (raw: Uint8Array): { readonly signature: string; readonly landed: Block | undefined } => {
    let transaction: VersionedTransaction
    try {
      transaction = VersionedTransaction.deserialize(raw)
    } catch (error) {
      throw new RpcError(-32602, `invalid transaction: failed to deserialize VersionedTransaction: ${String(error)}`)
    }
    if (!verifySignatures(transaction)) throw new RpcError(-32003, "Transaction signature verification failure")
    if ("addressTableLookups" in transaction.message && transaction.message.addressTableLookups.length > 0) {
      throw new RpcError(-32602, "address lookup tables are not modelled by this front")
    }
    const signature = base58.encode(transaction.signatures[0]!)
    if (dropping) return { signature, landed: undefined }
    // The status cache: a signature the chain holds is not executed twice.
    const known = located(signature)
    if (known !== undefined) return { signature, landed: undefined }
    const recentHeight = blockhashHeight(transaction.message.recentBlockhash)
    const height = head().height + 1
    if (recentHeight === undefined || height > recentHeight + blockhashValidBlocks) return { signature, landed: undefined }

    const keys = transaction.message.staticAccountKeys.map((key) => key.toBase58())
    const preBalances = balancesOf(keys)
    const preTokenBalances = tokenBalancesOf(keys)
    const result = svm.sendTransaction(decoder.decode(raw) as never)
    const postBalances = balancesOf(keys)
    const failed = "err" in result && typeof (result as { err?: unknown }).err === "function"
    const err = failed ? errorJson((result as unknown as { err: () => unknown }).err()) : null
    // A failed transaction whose fee payer was not charged never got into a block: the leader drops it.
    if (failed && postBalances[0] === preBalances[0]) return { signature, landed: undefined }
    const meta = failed ? (result as unknown as { meta: () => { logs: () => Array<string>; computeUnitsConsumed: () => bigint } }).meta() : result as unknown as { logs: () => Array<string>; computeUnitsConsumed: () => bigint }
    const fee = lamportsPerSignature * BigInt(transaction.message.header.numRequiredSignatures)
    const recorded: RecordedTransaction = {
      signature,
      raw,
      transaction,
      err,
      fee,
      preBalances,
      postBalances,
      preTokenBalances,
      postTokenBalances: tokenBalancesOf(keys),
      logs: meta.logs(),
      computeUnits: meta.computeUnitsConsumed()
    }
    return { signature, landed: seal(nextSlot(), [recorded]) }
  }

  const mine = (count: number, skipSlots = 0) => {
    for (let index = 0; index < count; index++) seal(nextSlot(skipSlots), [])
  }

  const reorg = (depth: number) => {
    const top = head()
    const forkHeight = top.height - depth
    if (depth < 1 || forkHeight < heightAt("finalized")) {
      throw new Error(`cannot reorganize ${depth} blocks: the finalized block is at ${heightAt("finalized")}`)
    }
    const base = blocks[forkHeight]!
    if (base.snapshot === undefined) throw new Error(`no state kept for block ${forkHeight}`)
    svm = LiteSVM.fromBytes(base.snapshot).withBlockhashCheck(false)
    blocks.length = forkHeight + 1
    forks++
    // The new fork's blocks come at slots after the old head's: the replaced slots read as skipped.
    seal(top.slot + 2, [])
    mine(depth)
  }

  const runHarness = (instructions: ReadonlyArray<TransactionInstruction>) => {
    const transaction = new Transaction({ feePayer: faucet.publicKey, recentBlockhash: head().blockhash })
    transaction.add(...instructions)
    transaction.sign(faucet)
    const { landed, signature } = submit(transaction.serialize())
    if (landed === undefined) throw new Error("the harness's transaction was dropped")
    const recorded = landed.transactions[0]!
    if (recorded.err !== null) throw new Error(`the harness's transaction failed: ${JSON.stringify(recorded.err)}`)
    return { signature, height: landed.height }
  }

  const setTokenAccount = (address: PublicKey, mint: PublicKey, owner: PublicKey, amount: bigint, programId: string) => {
    const data = Buffer.alloc(tokenAccountSize)
    mint.toBuffer().copy(data, 0)
    owner.toBuffer().copy(data, 32)
    data.writeBigUInt64LE(amount, 64)
    data[108] = 1
    svm.setAccount({
      address: address.toBase58() as never,
      lamports: svm.minimumBalanceForRentExemption(BigInt(tokenAccountSize)) as never,
      programAddress: programId as never,
      executable: false,
      space: BigInt(tokenAccountSize),
      data
    } as never)
  }

  const createMint = (mint: string, decimals: number, programId = tokenProgramId.toBase58()) => {
    const supply = 10n ** 18n
    const data = Buffer.alloc(mintSize)
    data.writeUInt32LE(1, 0)
    faucet.publicKey.toBuffer().copy(data, 4)
    data.writeBigUInt64LE(supply, 36)
    data[44] = decimals
    data[45] = 1
    svm.setAccount({
      address: mint as never,
      lamports: svm.minimumBalanceForRentExemption(BigInt(mintSize)) as never,
      programAddress: programId as never,
      executable: false,
      space: BigInt(mintSize),
      data
    } as never)
    mintDecimals.set(mint, decimals)
    const mintKey = new PublicKey(mint)
    setTokenAccount(associatedTokenAddress(faucet.publicKey, mintKey, new PublicKey(programId)), mintKey, faucet.publicKey, supply, programId)
    // The state the harness set up is part of the head block's state, so a reorganization keeps it.
    head().snapshot = svm.toBytes()
  }

  const programOf = (mint: string) => {
    const account = svm.getAccount(mint as never)
    return new PublicKey(account.exists ? account.programAddress : tokenProgramId.toBase58())
  }

  const paySol = (to: string, lamports: bigint) =>
    runHarness([SystemProgram.transfer({ fromPubkey: faucet.publicKey, toPubkey: new PublicKey(to), lamports })])

  const payToken = (owner: string, mint: string, amount: bigint) => {
    const mintKey = new PublicKey(mint)
    const ownerKey = new PublicKey(owner)
    const programId = programOf(mint)
    const destination = associatedTokenAddress(ownerKey, mintKey, programId)
    return runHarness([
      createAssociatedTokenAccountIdempotent(faucet.publicKey, destination, ownerKey, mintKey, programId),
      transferChecked(
        associatedTokenAddress(faucet.publicKey, mintKey, programId),
        mintKey,
        destination,
        faucet.publicKey,
        amount,
        mintDecimals.get(mint) ?? 0,
        programId
      )
    ])
  }

  // ---- the JSON-RPC methods -------------------------------------------------------------------------------------

  const configOf = (params: ReadonlyArray<unknown>, index: number): Record<string, unknown> => {
    const config = params[index]
    return config !== null && typeof config === "object" ? config as Record<string, unknown> : {}
  }
  const commitmentOf = (config: Record<string, unknown>, floor?: "confirmed"): Commitment => {
    const commitment = (config.commitment ?? "finalized") as string
    if (commitment !== "processed" && commitment !== "confirmed" && commitment !== "finalized") {
      throw new RpcError(-32602, `Invalid params: unknown commitment ${commitment}`)
    }
    if (floor === "confirmed" && commitment === "processed") {
      throw new RpcError(-32602, "Method does not support commitment below `confirmed`")
    }
    return commitment
  }
  const context = (value: unknown) => ({ context: { apiVersion: "2.2.0", slot: head().slot }, value })

  const messageJson = (transaction: VersionedTransaction) => {
    const message = transaction.message
    return {
      accountKeys: message.staticAccountKeys.map((key) => key.toBase58()),
      header: message.header,
      instructions: message.compiledInstructions.map((instruction) => ({
        accounts: [...instruction.accountKeyIndexes],
        data: base58.encode(instruction.data),
        programIdIndex: instruction.programIdIndex,
        stackHeight: null
      })),
      recentBlockhash: message.recentBlockhash,
      ...(message.version === 0 ? { addressTableLookups: [] } : {})
    }
  }

  const tokenBalancesJson = (balances: ReadonlyArray<TokenBalance>) =>
    balances.map((balance) => ({
      accountIndex: balance.accountIndex,
      mint: balance.mint,
      owner: balance.owner,
      programId: balance.programId,
      uiTokenAmount: uiTokenAmount(balance.amount, balance.decimals)
    }))

  const versionOf = (transaction: VersionedTransaction) => transaction.message.version === "legacy" ? "legacy" : 0

  const checkVersion = (tx: RecordedTransaction, config: Record<string, unknown>) => {
    const supported = config.maxSupportedTransactionVersion
    if (versionOf(tx.transaction) !== "legacy" && (typeof supported !== "number" || supported < 0)) {
      throw new RpcError(
        -32015,
        "Transaction version (0) is not supported by the requesting client. Please try the request again with the following configuration parameter: \"maxSupportedTransactionVersion\": 0"
      )
    }
  }

  const transactionJson = (tx: RecordedTransaction, encoding: string) => {
    const meta = {
      err: tx.err,
      status: tx.err === null ? { Ok: null } : { Err: tx.err },
      fee: Number(tx.fee),
      preBalances: tx.preBalances.map(Number),
      postBalances: tx.postBalances.map(Number),
      innerInstructions: [],
      logMessages: [...tx.logs],
      preTokenBalances: tokenBalancesJson(tx.preTokenBalances),
      postTokenBalances: tokenBalancesJson(tx.postTokenBalances),
      rewards: [],
      loadedAddresses: { writable: [], readonly: [] },
      computeUnitsConsumed: Number(tx.computeUnits)
    }
    const transaction = encoding === "base64"
      ? [Buffer.from(tx.raw).toString("base64"), "base64"]
      : { signatures: tx.transaction.signatures.map((signature) => base58.encode(signature)), message: messageJson(tx.transaction) }
    return { transaction, meta, version: versionOf(tx.transaction) }
  }

  const blockBySlot = (slot: number, commitment: Commitment) => {
    const limit = blockAtCommitment(commitment)
    if (slot > limit.slot) throw new RpcError(-32004, `Block not available for slot ${slot}`)
    const block = blocks.find((candidate) => candidate.slot === slot)
    if (block === undefined) {
      throw new RpcError(-32007, `Slot ${slot} was skipped, or missing due to ledger jump to recent snapshot`)
    }
    return block
  }

  const readAccount = (address: string, commitment: Commitment) => {
    if (commitment !== "finalized") return svm.getAccount(address as never)
    const finalized = blockAtCommitment("finalized")
    if (finalized === head()) return svm.getAccount(address as never)
    if (finalized.snapshot === undefined) throw new RpcError(-32603, "finalized state not kept by this front")
    return LiteSVM.fromBytes(finalized.snapshot).getAccount(address as never)
  }

  const checkAddress = (value: unknown) => {
    try {
      return new PublicKey(value as string).toBase58()
    } catch {
      throw new RpcError(-32602, "Invalid param: Invalid")
    }
  }

  const methods: Record<string, (params: ReadonlyArray<unknown>) => unknown> = {
    getGenesisHash: () => genesisHash,
    getHealth: () => "ok",
    getVersion: () => ({ "solana-core": "2.2.0", "feature-set": 0 }),
    getSlot: (params) => blockAtCommitment(commitmentOf(configOf(params, 0))).slot,
    getBlockHeight: (params) => heightAt(commitmentOf(configOf(params, 0))),
    getLatestBlockhash: (params) => {
      const block = blockAtCommitment(commitmentOf(configOf(params, 0)))
      // The context is the bank the answer comes from: the block whose blockhash it is.
      return { context: { apiVersion: "2.2.0", slot: block.slot }, value: { blockhash: block.blockhash, lastValidBlockHeight: block.height + blockhashValidBlocks } }
    },
    isBlockhashValid: (params) => {
      const bank = heightAt(commitmentOf(configOf(params, 1)))
      const height = blocks.find((block) => block.blockhash === params[0] && block.height <= bank)?.height
      return context(height !== undefined && bank <= height + blockhashValidBlocks)
    },
    getBlocks: (params) => {
      const start = Number(params[0])
      const endGiven = typeof params[1] === "number" ? params[1] : undefined
      const config = configOf(params, endGiven === undefined ? 1 : 2)
      const limit = blockAtCommitment(commitmentOf(config, "confirmed")).slot
      const end = Math.min(endGiven ?? limit, limit)
      if (end - start > 500_000) throw new RpcError(-32602, "Slot range too large; max 500000")
      return blocks.filter((block) => block.slot >= start && block.slot <= end).map((block) => block.slot)
    },
    getBlock: (params) => {
      const slot = params[0]
      if (typeof slot !== "number" || !Number.isInteger(slot) || slot < 0) throw new RpcError(-32602, "Invalid params")
      const config = configOf(params, 1)
      const block = blockBySlot(slot, commitmentOf(config, "confirmed"))
      const encoding = (config.encoding ?? "json") as string
      if (encoding !== "json" && encoding !== "base64") throw new RpcError(-32602, `encoding ${encoding} is not modelled by this front`)
      const details = (config.transactionDetails ?? "full") as string
      const base = {
        blockhash: block.blockhash,
        previousBlockhash: block.previousBlockhash,
        parentSlot: block.parentSlot,
        blockTime: block.blockTime,
        blockHeight: block.height,
        ...(config.rewards === false ? {} : { rewards: [] })
      }
      if (details === "none") return base
      if (details === "signatures") return { ...base, signatures: block.transactions.map((tx) => tx.signature) }
      if (details !== "full") throw new RpcError(-32602, `transactionDetails ${details} is not modelled by this front`)
      for (const tx of block.transactions) checkVersion(tx, config)
      return { ...base, transactions: block.transactions.map((tx) => transactionJson(tx, encoding)) }
    },
    getTransaction: (params) => {
      const config = configOf(params, 1)
      const commitment = commitmentOf(config, "confirmed")
      const found = located(String(params[0]))
      if (found === undefined || found.block.height > heightAt(commitment)) return null
      checkVersion(found.tx, config)
      const encoding = (config.encoding ?? "json") as string
      return { slot: found.block.slot, blockTime: found.block.blockTime, ...transactionJson(found.tx, encoding) }
    },
    getSignatureStatuses: (params) => {
      const signatures = params[0]
      if (!Array.isArray(signatures) || signatures.length > 256) throw new RpcError(-32602, "Invalid params")
      const finalized = heightAt("finalized")
      return context(signatures.map((signature) => {
        if (typeof signature !== "string" || base58.decode(signature).length !== 64) {
          throw new RpcError(-32602, "Invalid param: Invalid")
        }
        const found = located(signature)
        if (found === undefined) return null
        const isFinal = found.block.height <= finalized
        return {
          slot: found.block.slot,
          confirmations: isFinal ? null : head().height - found.block.height,
          err: found.tx.err,
          status: found.tx.err === null ? { Ok: null } : { Err: found.tx.err },
          confirmationStatus: isFinal ? "finalized" : "confirmed"
        }
      }))
    },
    getBalance: (params) => {
      const account = readAccount(checkAddress(params[0]), commitmentOf(configOf(params, 1)))
      return context(account.exists ? Number(account.lamports) : 0)
    },
    getAccountInfo: (params) => {
      const config = configOf(params, 1)
      const account = readAccount(checkAddress(params[0]), commitmentOf(config))
      if (!account.exists) return context(null)
      const encoding = (config.encoding ?? "base64") as string
      if (encoding !== "base64") throw new RpcError(-32602, `encoding ${encoding} is not modelled by this front`)
      // `dataSlice` cuts the data returned, not `space` (as on a validator).
      const slice = config.dataSlice as { offset: number; length: number } | undefined
      const data = slice === undefined ? account.data : account.data.subarray(slice.offset, slice.offset + slice.length)
      return context({
        data: [Buffer.from(data).toString("base64"), "base64"],
        executable: account.executable,
        lamports: Number(account.lamports),
        owner: account.programAddress,
        rentEpoch: 0,
        space: account.data.length
      })
    },
    getTokenAccountBalance: (params) => {
      const address = checkAddress(params[0])
      const account = readAccount(address, commitmentOf(configOf(params, 1)))
      const balance = account.exists ? tokenBalanceOf(address, 0) : undefined
      if (balance === undefined) throw new RpcError(-32602, "Invalid param: could not find account")
      return context(uiTokenAmount(balance.amount, balance.decimals))
    },
    getMinimumBalanceForRentExemption: (params) => Number(svm.minimumBalanceForRentExemption(BigInt(Number(params[0] ?? 0)))),
    getFeeForMessage: (params) => {
      const message = VersionedTransaction.deserialize(
        Buffer.concat([Buffer.from([1]), Buffer.alloc(64), Buffer.from(String(params[0]), "base64")])
      ).message
      return context(Number(lamportsPerSignature) * message.header.numRequiredSignatures)
    },
    sendTransaction: (params) => {
      const config = configOf(params, 1)
      if (config.encoding !== "base64") throw new RpcError(-32602, "this front takes base64-encoded transactions only")
      if (config.skipPreflight !== true) throw new RpcError(-32602, "this front models skipPreflight: true only")
      return submit(Buffer.from(String(params[0]), "base64")).signature
    }
  }

  const answer = (request: unknown) => {
    const { id, method, params } = (request ?? {}) as { id?: unknown; method?: unknown; params?: unknown }
    const handler = typeof method === "string" ? methods[method] : undefined
    if (handler === undefined) return { jsonrpc: "2.0", id: id ?? null, error: { code: -32601, message: "Method not found" } }
    try {
      return { jsonrpc: "2.0", id, result: handler(Array.isArray(params) ? params : []) }
    } catch (error) {
      if (error instanceof RpcError) {
        return { jsonrpc: "2.0", id, error: { code: error.code, message: error.message, ...(error.data === undefined ? {} : { data: error.data }) } }
      }
      return { jsonrpc: "2.0", id, error: { code: -32603, message: `Internal error: ${String(error)}` } }
    }
  }

  const expectedAuthorization = options.basicAuth === undefined
    ? undefined
    : `Basic ${Buffer.from(`${options.basicAuth.user}:${options.basicAuth.password}`).toString("base64")}`

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      if (expectedAuthorization !== undefined && request.headers.authorization !== expectedAuthorization) {
        response.writeHead(401).end("Unauthorized")
        return
      }
      let body: unknown
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        response.writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }))
        return
      }
      const result = Array.isArray(body) ? body.map(answer) : answer(body)
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(result))
    })
  }

  const server: Server = createServer(handle)
  // A test blocks the event loop while it mines many blocks (each snapshots the SVM): the server's keep-alive timer
  // would then close an idle connection the same moment the client reuses it ("fetch failed"). The client's own idle
  // timer closes connections instead.
  server.keepAliveTimeout = 0
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  // A few blocks to begin with, one slot skipped: heights and slots differ from the start.
  mine(2)
  mine(3, 1)

  return {
    url: `http://127.0.0.1:${port}`,
    genesisHash,
    faucet,
    mine,
    reorg,
    createMint,
    paySol,
    payToken,
    setTokenAmount: (owner, mint, amount) => {
      const programId = programOf(mint)
      const ata = associatedTokenAddress(new PublicKey(owner), new PublicKey(mint), programId)
      if (tokenBalanceOf(ata.toBase58(), 0) === undefined) throw new Error(`${owner} has no token account for ${mint}`)
      setTokenAccount(ata, new PublicKey(mint), new PublicKey(owner), amount, programId.toBase58())
    },
    createTokenAccount: (address, owner, mint) => {
      setTokenAccount(new PublicKey(address), new PublicKey(mint), new PublicKey(owner), 0n, programOf(mint).toBase58())
      head().snapshot = svm.toBytes()
    },
    setDropping: (value) => {
      dropping = value
    },
    headHeight: () => head().height,
    blockOf: (signature) => {
      const found = located(signature)
      return found === undefined ? undefined : { height: found.block.height, slot: found.block.slot, err: found.tx.err }
    },
    signaturesFrom: (feePayer) =>
      blocks.flatMap((block) =>
        block.transactions
          .filter((tx) => tx.transaction.message.staticAccountKeys[0]!.toBase58() === feePayer)
          .map((tx) => tx.signature)
      ),
    lamports: (address) => BigInt(svm.getBalance(address as never) ?? 0n),
    tokenAmount: (owner, mint) => {
      const mintKey = new PublicKey(mint)
      const ata = associatedTokenAddress(new PublicKey(owner), mintKey, programOf(mint))
      return tokenBalanceOf(ata.toBase58(), 0)?.amount ?? 0n
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
