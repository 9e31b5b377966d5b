/**
 * The sending side of a TRON node (ChainClient's WithdrawalChain; docs/tron.md): balances, the fee a transfer may
 * burn, the reference block a signature commits to, the broadcast with java-tron's response codes sorted into
 * "accepted", "try again" and "refused for good", the transaction info that says whether and at what cost a
 * transaction was included, and whether a signed transaction has expired for good.
 *
 * Fees, in sun, from `wallet/getchainparameters`:
 * - bandwidth: a transaction's bytes (plus java-tron's 64 for the result) are paid from the sender's free daily
 *   allowance or burned at `getTransactionFee` a byte; the estimate assumes no allowance is left;
 * - a TRX transfer to an address without an account creates it: `getCreateAccountFee` burned instead of bandwidth
 *   plus `getCreateNewAccountFeeInSystemContract` (1.1 TRX on mainnet and Nile);
 * - a TRC-20 transfer burns energy at `getEnergyFee` a unit. Its `fee_limit` is the node's energy estimate for this
 *   very call (`wallet/triggerconstantcontract`) plus 20 %, times the price, never above the catalog's `feeRateCap`;
 *   while the estimate alone is above the cap nothing is signed (ChainUnavailable: the withdrawal waits).
 * `networkFee` is what the transaction can burn at most: fee_limit plus the bandwidth.
 */
import { Clock, Effect } from "effect"
import {
  BroadcastRejected,
  ChainUnavailable,
  type Inclusion,
  type SignedWithdrawal,
  type WithdrawalChain,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../ChainClient.ts"
import { decodeTronTransaction } from "./TronTransactionBytes.ts"
import type { TronHttp, TronJson } from "./TronHttp.ts"
import { contractRetOf, hexOfAddress, isObject, type TronBlockRead } from "./TronBlocks.ts"

/** Bytes of bandwidth a TRX transfer is priced at (measured: 268 with the 64 of the result; rounded up). */
export const trxTransferBytes = 300n
/** Bytes of bandwidth a TRC-20 transfer is priced at (measured: 345 with the 64 of the result, fee_limit 100 TRX; rounded up). */
export const trc20TransferBytes = 400n
/**
 * Energy a TRC-20 transfer is priced at before its call is known (cover checks, fee floors), and signed for when the
 * node's estimate says the call reverts (the chain decides; an included revert is FAILED with its fee booked): a
 * transfer to a holder without balance writes a new storage slot, about 65,000 on USDT.
 */
export const trc20EnergyNominal = 65_000n
/** How long one reading of the chain parameters is used. */
export const chainParametersMillis = 60_000

export interface TronSendingOptions {
  readonly networkKey: string
  readonly nativeAssetId: string
  /** The catalog's tokens: asset id to contract (base58). */
  readonly tokenContracts: ReadonlyMap<string, string>
  /** The most a TRC-20 call may burn, in sun (catalog `feeRateCap`): the highest fee_limit signed. */
  readonly feeRateCap: bigint
  readonly nowBlock: Effect.Effect<TronBlockRead, ChainUnavailable>
  readonly solidifiedBlock: Effect.Effect<TronBlockRead, ChainUnavailable>
  readonly includedAt: (
    txHash: string
  ) => Effect.Effect<{ readonly info: TronJson; readonly block: TronBlockRead; readonly tx: TronJson } | undefined, ChainUnavailable>
}

export interface TronWithdrawalChain extends WithdrawalChain {
  /**
   * Whether a signed transaction can never be included any more: it is in no block of the current chain and the
   * solidified block's time has reached its `expiration` (java-tron refuses a transaction whose expiration is not
   * after its parent block's time, and every future block descends from the solidified one).
   */
  readonly expired: (signed: { readonly raw: string; readonly txHash: string }) => Effect.Effect<boolean, ChainUnavailable>
}

interface ChainParameters {
  readonly transactionFee: bigint
  readonly energyFee: bigint
  readonly createAccountFee: bigint
  readonly createNewAccountFeeInSystemContract: bigint
}

/** Codes after which the same bytes may be accepted later (or `expired` settles them): not a refusal for good. */
const tryAgainCodes = new Set([
  "SERVER_BUSY",
  "NO_CONNECTION",
  "NOT_ENOUGH_EFFECTIVE_CONNECTION",
  "BLOCK_UNSOLIDIFIED",
  "OTHER_ERROR",
  // Not enough TRX for the bandwidth now: more may come before the transaction expires.
  "BANDWITH_ERROR",
  // Expired, or its reference block left the chain: never includable, which `expired` reports once provable.
  "TAPOS_ERROR",
  "TRANSACTION_EXPIRATION_ERROR"
])
const refusedCodes = new Set(["SIGERROR", "TOO_BIG_TRANSACTION_ERROR", "CONTRACT_VALIDATE_ERROR", "CONTRACT_EXE_ERROR"])
/** A contract-validation answer that is about the balance now, not about the transaction. */
const balanceNow = /balance is not sufficient|not enough balance/i

/** java-tron prints `message` as the hex of its bytes on some endpoints and as text on others. */
const messageText = (message: unknown): string => {
  if (typeof message !== "string") return ""
  if (/^([0-9a-fA-F]{2})+$/.test(message)) {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(message, "hex"))
    } catch {
      return message
    }
  }
  return message
}

const word = (hex: string) => hex.padStart(64, "0")

export const makeTronWithdrawals = (http: TronHttp, options: TronSendingOptions): TronWithdrawalChain => {
  const { post } = http
  const { feeRateCap, nativeAssetId, networkKey } = options
  const unavailable = (message: string) => new ChainUnavailable({ networkKey, message })

  const addressHex = (address: string) => {
    const hex = hexOfAddress(address)
    return hex === undefined ? Effect.fail(unavailable("not a TRON address")) : Effect.succeed(hex)
  }
  const contractOfAsset = (assetId: string) => options.tokenContracts.get(assetId)

  const readChainParameters = Effect.gen(function*() {
    const answer = yield* post("/wallet/getchainparameters")
    const entries = isObject(answer) && Array.isArray(answer.chainParameter) ? answer.chainParameter : undefined
    if (entries === undefined) return yield* unavailable("getchainparameters: malformed answer")
    const value = (key: string) => {
      const entry = entries.find((candidate) => isObject(candidate) && candidate.key === key)
      // A parameter of value 0 is printed without `value`.
      return isObject(entry) ? (entry.value === undefined ? 0n : typeof entry.value === "bigint" ? entry.value : undefined) : undefined
    }
    const parameters = {
      transactionFee: value("getTransactionFee"),
      energyFee: value("getEnergyFee"),
      createAccountFee: value("getCreateAccountFee"),
      createNewAccountFeeInSystemContract: value("getCreateNewAccountFeeInSystemContract")
    }
    if (Object.values(parameters).some((entry) => entry === undefined || entry < 0n)) {
      return yield* unavailable("getchainparameters: a fee parameter is missing")
    }
    return parameters as ChainParameters
  })

  /** Chain parameters change only by a governance proposal: one reading is used for a minute. */
  let quoted: { readonly at: number; readonly parameters: ChainParameters } | undefined
  const chainParameters = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (quoted !== undefined && now - quoted.at < chainParametersMillis) return quoted.parameters
    const parameters = yield* readChainParameters
    quoted = { at: now, parameters }
    return parameters
  })

  const account = (address: string) =>
    Effect.gen(function*() {
      const answer = yield* post("/wallet/getaccount", { address: yield* addressHex(address), visible: false })
      if (!isObject(answer)) return yield* unavailable("getaccount: malformed answer")
      // An address without an account (never received TRX) is answered with `{}`.
      if (answer.address === undefined) return undefined
      const balance = answer.balance === undefined ? 0n : answer.balance
      if (typeof balance !== "bigint") return yield* unavailable("getaccount: malformed balance")
      return { balance }
    })

  const triggerConstant = (owner: string, contract: string, selector: string, parameter: string) =>
    Effect.gen(function*() {
      const answer = yield* post("/wallet/triggerconstantcontract", {
        owner_address: yield* addressHex(owner),
        contract_address: yield* addressHex(contract),
        function_selector: selector,
        parameter,
        visible: false
      })
      if (!isObject(answer) || !isObject(answer.result)) return yield* unavailable("triggerconstantcontract: malformed answer")
      const transaction = isObject(answer.transaction) ? answer.transaction : {}
      const ret = Array.isArray(transaction.ret) && isObject(transaction.ret[0]) ? transaction.ret[0] : {}
      return {
        succeeded: answer.result.result === true && ret.ret !== "FAILED",
        code: typeof answer.result.code === "string" ? answer.result.code : undefined,
        energyUsed: typeof answer.energy_used === "bigint" ? answer.energy_used : undefined,
        constantResult: Array.isArray(answer.constant_result) ? answer.constant_result[0] : undefined
      }
    })

  const balance = (address: string, assetId: string) =>
    Effect.gen(function*() {
      const contract = contractOfAsset(assetId)
      if (contract === undefined) return (yield* account(address))?.balance ?? 0n
      const hex = yield* addressHex(address)
      const result = yield* triggerConstant(address, contract, "balanceOf(address)", word(hex.slice(2)))
      if (!result.succeeded || typeof result.constantResult !== "string" || !/^[0-9a-f]{64}$/.test(result.constantResult)) {
        return yield* unavailable(`balanceOf on ${assetId}: ${result.code ?? "malformed answer"}`)
      }
      return BigInt(`0x${result.constantResult}`)
    })

  /** fee_limit for `energy`: 20 % room, capped; the estimate alone above the cap waits. */
  const feeLimitFor = (energy: bigint, parameters: ChainParameters) =>
    Effect.gen(function*() {
      const expected = energy * parameters.energyFee
      if (expected > feeRateCap) {
        return yield* unavailable(`energy would cost ${expected} sun, above the network's fee cap ${feeRateCap}; waiting`)
      }
      const wanted = ((energy * 6n + 4n) / 5n) * parameters.energyFee
      return wanted > feeRateCap ? feeRateCap : wanted
    })

  const networkFee = (assetId: string) =>
    Effect.gen(function*() {
      const parameters = yield* chainParameters
      if (contractOfAsset(assetId) === undefined) {
        // The recipient is not known yet: priced as creating its account, the dearer case.
        const creating = parameters.createAccountFee + parameters.createNewAccountFeeInSystemContract
        const bandwidth = trxTransferBytes * parameters.transactionFee
        return creating > bandwidth ? creating : bandwidth
      }
      return (yield* feeLimitFor(trc20EnergyNominal, parameters)) + trc20TransferBytes * parameters.transactionFee
    })

  const hotWalletCovers = (transfer: WithdrawalTransfer, fee: bigint) =>
    Effect.gen(function*() {
      const native = yield* balance(transfer.from, nativeAssetId)
      if (contractOfAsset(transfer.assetId) === undefined) return native >= transfer.amount + fee
      return native >= fee && (yield* balance(transfer.from, transfer.assetId)) >= transfer.amount
    })

  const withdrawalParameters = (transfer: WithdrawalTransfer): Effect.Effect<WithdrawalParameters, ChainUnavailable> =>
    Effect.gen(function*() {
      const parameters = yield* chainParameters
      // The head, as tronweb does: the transaction expires 60 s after its reference block's time.
      const reference = yield* options.nowBlock
      const referenceBlock = { number: reference.number, id: reference.blockID, timestamp: Number(reference.timestamp) }
      const contract = contractOfAsset(transfer.assetId)
      if (contract === undefined) {
        const recipient = yield* account(transfer.to)
        const fee = recipient === undefined
          ? parameters.createAccountFee + parameters.createNewAccountFeeInSystemContract
          : trxTransferBytes * parameters.transactionFee
        return { family: "TRON" as const, referenceBlock, feeLimit: 0n, networkFee: fee }
      }
      const to = yield* addressHex(transfer.to)
      const estimate = yield* triggerConstant(
        transfer.from,
        contract,
        "transfer(address,uint256)",
        word(to.slice(2)) + word(transfer.amount.toString(16))
      )
      const energy = estimate.succeeded && estimate.energyUsed !== undefined && estimate.energyUsed > 0n
        ? estimate.energyUsed
        : trc20EnergyNominal
      const feeLimit = yield* feeLimitFor(energy, parameters)
      return { family: "TRON" as const, referenceBlock, feeLimit, networkFee: feeLimit + trc20TransferBytes * parameters.transactionFee }
    })

  const broadcast = (signed: SignedWithdrawal) =>
    Effect.gen(function*() {
      const answer = yield* post("/wallet/broadcasthex", { transaction: signed.raw })
      if (!isObject(answer)) return yield* unavailable("broadcasthex: malformed answer")
      if (answer.result === true) return
      const code = typeof answer.code === "string" ? answer.code : "UNKNOWN"
      if (code === "DUP_TRANSACTION_ERROR") return
      const message = `${code}: ${messageText(answer.message).slice(0, 300)}`
      if (refusedCodes.has(code) && !balanceNow.test(message)) {
        return yield* new BroadcastRejected({ networkKey, message })
      }
      // tryAgainCodes, an answer about the balance now, and codes this client does not know.
      return yield* unavailable(`broadcasthex: ${message}${tryAgainCodes.has(code) ? "" : " (not known as a refusal)"}`)
    })

  const inclusion = (txHash: string): Effect.Effect<Inclusion | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      const found = yield* options.includedAt(txHash)
      if (found === undefined) return undefined
      const { block, info, tx } = found
      const receipt = isObject(info.receipt) ? info.receipt : {}
      const fee = info.fee === undefined ? 0n : info.fee
      if (typeof fee !== "bigint") return yield* unavailable("gettransactioninfobyid: malformed fee")
      const succeeded = contractRetOf(tx) === "SUCCESS" && info.result !== "FAILED" &&
        (receipt.result === undefined || receipt.result === "SUCCESS")
      return { height: block.number, succeeded, networkFee: fee }
    })

  const expired = (signed: { readonly raw: string; readonly txHash: string }) =>
    Effect.gen(function*() {
      let expiration: bigint
      try {
        expiration = decodeTronTransaction(signed.raw).expiration
      } catch {
        return yield* unavailable("expired: the signed bytes are not a TRON transaction")
      }
      // The solidified block first: while it is before the expiration (the common case) one call answers.
      const solid = yield* options.solidifiedBlock
      if (solid.timestamp < expiration) return false
      return (yield* options.includedAt(signed.txHash)) === undefined
    })

  return { balance, hotWalletCovers, networkFee, withdrawalParameters, broadcast, inclusion, expired }
}
