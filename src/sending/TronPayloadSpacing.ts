/**
 * TRON transactions carry no nonce. Two transfers of the same amount of the same asset from one address to one
 * recipient, signed on the same reference block with the default expiration, are the same bytes with one hash: the
 * second cannot be stored (`outgoing_versions` is unique by hash), dies, and goes through only once the head has
 * moved to another block, so N identical withdrawals took N blocks. Each repeat of a payload on a reference block here
 * gets an expiration one millisecond later, so its bytes and hash differ (docs/tron.md). SOL solves the same with
 * distinct blockhashes (chains/sol/SolWithdrawals.ts); EVM and BTC never repeat bytes (nonces, inputs).
 *
 * In memory per process, forgetting a network's payloads when its reference block changes. Two processes signing
 * the same payload on one block can still collide: the database's uniqueness refuses the second, and its retry here
 * is then a repeat.
 */
import type { WithdrawalParameters, WithdrawalTransfer } from "../chains/ChainClient.ts"
import { tronExpirationAfterBlockMs } from "../signer/TransactionRequest.ts"

export const makeTronPayloadSpacing = () => {
  const byNetwork = new Map<string, { block: string; repeats: Map<string, number> }>()
  return (networkKey: string, transfer: WithdrawalTransfer, parameters: WithdrawalParameters): WithdrawalParameters => {
    // Parameters that already name an expiration (a re-signature after expiry) are distinct by their block.
    if (parameters.family !== "TRON" || parameters.expiration !== undefined) return parameters
    let seen = byNetwork.get(networkKey)
    if (seen === undefined || seen.block !== parameters.referenceBlock.id) {
      seen = { block: parameters.referenceBlock.id, repeats: new Map() }
      byNetwork.set(networkKey, seen)
    }
    const payload = `${transfer.from}|${transfer.to}|${transfer.assetId}|${transfer.amount}|${parameters.feeLimit}`
    const repeat = seen.repeats.get(payload) ?? 0
    seen.repeats.set(payload, repeat + 1)
    return repeat === 0
      ? parameters
      : { ...parameters, expiration: parameters.referenceBlock.timestamp + tronExpirationAfterBlockMs + repeat }
  }
}
