/**
 * The sending side of a Solana node (ChainClient's WithdrawalChain; docs/sol.md, docs/sending.md): balances, the
 * fee, the recent blockhash a signature needs, the broadcast with the node's answers sorted into "accepted", "try
 * again" and "refused for good", the transaction's `meta` (fee and error), and whether a signed transaction's
 * blockhash has expired for good (the only moment a SOL withdrawal may be signed again, decisions.md), and whether a
 * recipient address holds a wallet's account or none (spec 4.1, SolWalletAddress.ts).
 *
 * Fee: 5,000 lamports per signature (the network's base fee; the signer's transactions carry one signature and no
 * compute-budget instruction, so no priority fee). An SPL withdrawal to a wallet without an associated token account
 * also creates that account (signer/SolSigning.ts, idempotently), which moves its rent-exempt minimum from HOT into
 * the new account: part of what HOT must cover and of the parameters' `networkFee`, but not of the fee the chain
 * reports (`meta.fee`), which is what is booked (decisions.md "Sending on real networks").
 */
import { type Connection, PublicKey, SendTransactionError, type SignatureStatus, VersionedTransaction } from "@solana/web3.js"
import { Duration, Effect } from "effect"
import { associatedTokenAddress, tokenProgramId } from "../../signer/SolSigning.ts"
import type { SigningKey } from "../../signer/TransactionRequest.ts"
import {
  broadcastAnswerMaxMillis,
  BroadcastRejected,
  ChainUnavailable,
  type Inclusion,
  type SignedWithdrawal,
  type WithdrawalChain,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../ChainClient.ts"
import type { SolCall, SolToken } from "./SolChainClient.ts"
import { isWalletAccount } from "./SolWalletAddress.ts"

/** A blockhash is valid for transactions in blocks up to its own block height + 150 (MAX_PROCESSING_AGE). */
export const blockhashValidBlocks = 150n
/** The base fee of one signature, in lamports. */
export const lamportsPerSignature = 5_000n
/** A token account's size (spl-token `AccountLayout`): its rent-exempt minimum is what creating one costs. */
export const tokenAccountSize = 165

/**
 * The parameters of a transfer whose fee another wallet pays (an SPL sweep paid by the tenant's GAS wallet,
 * docs/sweeps.md): the same blockhash, the payer, and one more signature's fee (the payer signs beside the sender, so
 * the transaction carries two signatures, 2 × 5,000 lamports). `parameters` are the client's own for the transfer
 * (one signature; a missing recipient token account's rent, which the payer then also pays). Already fee-payer
 * parameters are returned as they are.
 */
export const withFeePayer = (parameters: WithdrawalParameters, feePayer: SigningKey): WithdrawalParameters => {
  if (parameters.family !== "SOL") throw new Error(`a fee payer is a SOL matter, not ${parameters.family}`)
  if (parameters.feePayer !== undefined) return parameters
  return { ...parameters, feePayer, networkFee: parameters.networkFee + lamportsPerSignature }
}

/**
 * The lamports of the token accounts a transaction created (none before it, a token balance after it): their
 * rent-exempt minimum, which only the fee payer can have paid (the signer's transactions create nothing else), and
 * which `meta.fee` does not include. 0 when it created none, or failed (a failed transaction changes no account).
 */
export const createdTokenAccountsRent = (meta: {
  readonly preBalances: ReadonlyArray<number>
  readonly postBalances: ReadonlyArray<number>
  readonly postTokenBalances?: ReadonlyArray<{ readonly accountIndex: number }> | null | undefined
}): bigint => {
  let rent = 0n
  for (const { accountIndex } of meta.postTokenBalances ?? []) {
    if (meta.preBalances[accountIndex] === 0) rent += BigInt(meta.postBalances[accountIndex] ?? 0)
  }
  return rent
}

export interface SolRpc {
  readonly connection: Connection
  readonly call: SolCall
  readonly describe: (error: unknown) => string
  readonly blockHeader: (slot: number) => Effect.Effect<
    {
      readonly blockHeight: number | null
      readonly previousBlockhash: string
      readonly parentSlot: number
    } | null,
    ChainUnavailable
  >
  readonly signatureStatus: (txHash: string) => Effect.Effect<SignatureStatus | null, ChainUnavailable>
}

export interface SolSendingOptions {
  readonly networkKey: string
  readonly nativeAssetId: string
  readonly feeRateCap: bigint
  /** The catalog's tokens by asset id. */
  readonly tokens: ReadonlyMap<string, SolToken>
}

/** Answers after which the same bytes may be accepted later (a node behind, rate limits): not a refusal. */
const tryAgain = /blockhash not found|node is behind|unhealthy|too many requests|rate limit|429|timed? ?out/i
/** The chain has the signature already: the bytes were sent before, which is fine. */
const alreadyProcessed = /already been processed|AlreadyProcessed/i

export interface SolWithdrawalChain extends WithdrawalChain {
  /**
   * Whether a signed transaction can provably never be included any more: its blockhash is valid neither in the
   * confirmed bank nor in the finalized one, and the chain does not hold its signature. A blockhash newer than the
   * finalized block is valid in the confirmed bank; one older than 150 blocks in the finalized bank is invalid in
   * both and in every later bank, so no later block can take the transaction. Read from the signed bytes (their
   * blockhash), so it holds for versions signed before `lastValidBlockHeight` was stored too.
   */
  readonly expired: (signed: { readonly raw: string; readonly txHash: string }) => Effect.Effect<boolean, ChainUnavailable>
  /** Always present on a SOL node's client (optional on WithdrawalChain, where other families leave it out). */
  readonly isWalletAddress: (address: string) => Effect.Effect<boolean, ChainUnavailable>
}

export const makeSolWithdrawals = (rpc: SolRpc, options: SolSendingOptions): SolWithdrawalChain => {
  const { call, connection } = rpc
  const { networkKey, nativeAssetId } = options
  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })

  const tokenOf = (assetId: string) => options.tokens.get(assetId)
  const programOf = (token: SolToken) => new PublicKey(token.programId ?? tokenProgramId.toBase58())

  const publicKey = (address: string) =>
    Effect.try({ try: () => new PublicKey(address), catch: () => unavailable(`not a Solana address: ${address}`) })

  const tokenAccountOf = (owner: string, token: SolToken) =>
    Effect.map(publicKey(owner), (key) => associatedTokenAddress(key, new PublicKey(token.mint), programOf(token)))

  const tokenAccountRent = call(
    "getMinimumBalanceForRentExemption",
    () => connection.getMinimumBalanceForRentExemption(tokenAccountSize, "confirmed")
  ).pipe(Effect.map(BigInt))

  const systemAccountRent = call(
    "getMinimumBalanceForRentExemption",
    () => connection.getMinimumBalanceForRentExemption(0, "confirmed")
  ).pipe(Effect.map(BigInt))

  /**
   * The amount of a token account as the node holds it now (`processed`: counting what the node executed already),
   * read from its data (spl-token layout: mint 0..32, owner 32..64, amount u64 LE at 64); none is zero.
   */
  const tokenBalance = (owner: string, token: SolToken) =>
    Effect.gen(function*() {
      const account = yield* tokenAccountOf(owner, token)
      const info = yield* call("getAccountInfo", () => connection.getAccountInfo(account, "processed"))
      if (info === null) return 0n
      if (!info.owner.equals(programOf(token)) || info.data.length < tokenAccountSize) {
        return yield* unavailable(`the token account of ${owner} is not a ${token.mint} account`)
      }
      if (new PublicKey(info.data.subarray(0, 32)).toBase58() !== token.mint) {
        return yield* unavailable(`the token account of ${owner} holds another mint`)
      }
      return info.data.readBigUInt64LE(64)
    })

  const balance = (address: string, assetId: string) =>
    Effect.gen(function*() {
      const token = tokenOf(assetId)
      if (token !== undefined) return yield* tokenBalance(address, token)
      const key = yield* publicKey(address)
      return BigInt(yield* call("getBalance", () => connection.getBalance(key, "processed")))
    })

  /**
   * Only whether the account exists, is executable and who owns it are needed, so no data is asked for (`dataSlice`
   * of length 0): a program's or a data account's bytes can be megabytes.
   */
  const isWalletAddress = (address: string) =>
    Effect.gen(function*() {
      const key = yield* publicKey(address)
      const account = yield* call(
        "getAccountInfo",
        () => connection.getAccountInfo(key, { commitment: "confirmed", dataSlice: { offset: 0, length: 0 } })
      )
      return isWalletAccount(
        account === null ? null : { executable: account.executable, owner: account.owner.toBase58() }
      )
    })

  const checkCap = (fee: bigint) =>
    fee > options.feeRateCap
      ? Effect.fail(unavailable(`the fee ${fee} lamports is above the network's cap ${options.feeRateCap}; waiting`))
      : Effect.succeed(fee)

  /** The fee before the recipient is known: a token withdrawal is priced as if it creates the recipient's account. */
  const networkFee = (assetId: string) =>
    tokenOf(assetId) === undefined
      ? checkCap(lamportsPerSignature)
      : Effect.map(tokenAccountRent, (rent) => lamportsPerSignature + rent)

  const hotWalletCovers = (transfer: WithdrawalTransfer, fee: bigint) =>
    Effect.gen(function*() {
      const native = yield* balance(transfer.from, nativeAssetId)
      const token = tokenOf(transfer.assetId)
      if (token !== undefined) return native >= fee && (yield* tokenBalance(transfer.from, token)) >= transfer.amount
      // A system account that keeps lamports must keep at least its rent-exempt minimum (else the transaction
      // fails with InsufficientFundsForRent): HOT stays above it.
      return native >= transfer.amount + fee + (yield* systemAccountRent)
    })

  /**
   * Blockhashes handed out per payload (sender, recipient, asset, amount) while they are valid. Two withdrawals of
   * the same amount to the same address from HOT, signed on the same blockhash, are the same bytes with the same
   * signature: the chain would run one of them, and the second send's version could not be stored (outgoing_versions
   * is unique by tx hash). So an identical payload gets the blockhash of an earlier block (still valid, 150 blocks
   * from its own) instead. In memory, per process: the database's uniqueness stays the guarantee; after a restart
   * the blockhash has moved on anyway.
   */
  const handedOut = new Map<string, Map<string, bigint>>()
  const payloadKey = (transfer: WithdrawalTransfer) => `${transfer.from}|${transfer.to}|${transfer.assetId}|${transfer.amount}`
  /** Blocks walked back at most for a blockhash this payload has not had (then the caller tries again later). */
  const distinctBlockhashSteps = 32

  const distinctBlockhash = (transfer: WithdrawalTransfer) =>
    Effect.gen(function*() {
      const latest = yield* call("getLatestBlockhash", () => connection.getLatestBlockhashAndContext("confirmed"))
      const currentHeight = BigInt(latest.value.lastValidBlockHeight) - blockhashValidBlocks
      for (const [key, given] of handedOut) {
        for (const [blockhash, lastValid] of given) if (lastValid < currentHeight) given.delete(blockhash)
        if (given.size === 0) handedOut.delete(key)
      }
      const key = payloadKey(transfer)
      // Checked and recorded with no wait in between: concurrent callers never take the same one.
      const take = (blockhash: string, lastValid: bigint) => {
        const given = handedOut.get(key) ?? new Map<string, bigint>()
        if (given.has(blockhash)) return false
        given.set(blockhash, lastValid)
        handedOut.set(key, given)
        return true
      }
      let lastValid = BigInt(latest.value.lastValidBlockHeight)
      if (take(latest.value.blockhash, lastValid)) return { blockhash: latest.value.blockhash, lastValid }
      let slot = latest.context.slot
      for (let step = 0; step < distinctBlockhashSteps; step++) {
        const header = yield* rpc.blockHeader(slot)
        if (header === null) return yield* unavailable(`slot ${slot} holds no block any more (the chain moved); retrying`)
        // A block's previousBlockhash is its parent's blockhash, one block height lower.
        lastValid -= 1n
        if (take(header.previousBlockhash, lastValid)) return { blockhash: header.previousBlockhash, lastValid }
        slot = header.parentSlot
      }
      return yield* unavailable(`${distinctBlockhashSteps} recent blockhashes already carry this payload; waiting for new blocks`)
    })

  const withdrawalParameters = (transfer: WithdrawalTransfer): Effect.Effect<WithdrawalParameters, ChainUnavailable> =>
    Effect.gen(function*() {
      const latest = yield* distinctBlockhash(transfer)
      const token = tokenOf(transfer.assetId)
      let fee = lamportsPerSignature
      if (token !== undefined) {
        const account = yield* tokenAccountOf(transfer.to, token)
        const existing = yield* call("getAccountInfo", () => connection.getAccountInfo(account, "confirmed"))
        if (existing === null) fee += yield* tokenAccountRent
      }
      yield* checkCap(lamportsPerSignature)
      return {
        family: "SOL" as const,
        recentBlockhash: latest.blockhash,
        lastValidBlockHeight: latest.lastValid,
        networkFee: fee
      }
    })

  const broadcast = (signed: SignedWithdrawal) =>
    Effect.gen(function*() {
      const answer = yield* Effect.tryPromise({
        // skipPreflight: the transaction goes to the chain even when a simulation would fail, so a transfer that
        // fails is included with its meta.err and fee (FAILED / REVERTED_ON_CHAIN), as decided for every family.
        // maxRetries 0: the node forwards once; OutgoingSends rebroadcasts the same bytes until they land or expire.
        try: () => connection.sendRawTransaction(Buffer.from(signed.raw, "base64"), { skipPreflight: true, maxRetries: 0 }),
        catch: (error) => error
      }).pipe(
        Effect.map((signature) => ({ signature })),
        Effect.catch((error) => Effect.succeed({ error })),
        Effect.timeoutOrElse({
          duration: Duration.millis(broadcastAnswerMaxMillis),
          orElse: () => Effect.succeed({ error: new Error(`no answer within ${broadcastAnswerMaxMillis} ms`) })
        })
      )
      if ("signature" in answer) {
        if (answer.signature !== signed.txHash) {
          return yield* unavailable(`sendTransaction answered signature ${answer.signature}, not ${signed.txHash}`)
        }
        return
      }
      const message = rpc.describe(answer.error)
      if (alreadyProcessed.test(message)) return
      // Only an error answer of the node is a refusal; a transport failure, a timeout or "not now" is not.
      if (!(answer.error instanceof SendTransactionError) || tryAgain.test(message)) {
        return yield* unavailable(`sendTransaction: ${message}`)
      }
      return yield* new BroadcastRejected({ networkKey, message })
    })

  const inclusion = (txHash: string): Effect.Effect<Inclusion | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      const read = yield* call(
        "getTransaction",
        () => connection.getTransaction(txHash, { commitment: "confirmed", maxSupportedTransactionVersion: 0 })
      )
      if (read === null) return undefined
      if (read.meta === null) return yield* unavailable(`getTransaction(${txHash}) has no meta`)
      // The slot must hold a block on the current chain (a node may still answer for a block a fork abandoned).
      const header = yield* rpc.blockHeader(read.slot)
      if (header === null) return undefined
      if (header.blockHeight === null) return yield* unavailable(`the block at slot ${read.slot} has no height`)
      return {
        height: BigInt(header.blockHeight),
        succeeded: read.meta.err === null,
        networkFee: BigInt(read.meta.fee),
        accountCost: createdTokenAccountsRent(read.meta)
      }
    })

  const blockhashValid = (blockhash: string, commitment: "confirmed" | "finalized") =>
    call(`isBlockhashValid(${commitment})`, () => connection.isBlockhashValid(blockhash, { commitment })).pipe(
      Effect.map((answer) => answer.value)
    )

  const expired = (signed: { readonly raw: string; readonly txHash: string }) =>
    Effect.gen(function*() {
      const blockhash = yield* Effect.try({
        try: () => VersionedTransaction.deserialize(Buffer.from(signed.raw, "base64")).message.recentBlockhash,
        catch: () => unavailable(`the signed bytes of ${signed.txHash} do not decode`)
      })
      if (yield* blockhashValid(blockhash, "confirmed")) return false
      if (yield* blockhashValid(blockhash, "finalized")) return false
      // Asked last: a transaction included while the blockhash checks ran is seen here.
      return (yield* rpc.signatureStatus(signed.txHash)) === null
    })

  return { balance, hotWalletCovers, isWalletAddress, networkFee, withdrawalParameters, broadcast, inclusion, expired }
}
