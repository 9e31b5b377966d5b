/**
 * The signer's request for one withdrawal (signer/TransactionRequest.ts): the transfer from the platform's hot wallet
 * with the chain parameters its network's client chose. Pure: the same withdrawal and parameters always give the
 * same request, and with the signer's deterministic signatures the same bytes.
 */
import type { CatalogAsset, CatalogNetwork } from "../catalog/Catalog.ts"
import type { BtcNetwork } from "../chains/ChainFamily.ts"
import type { WithdrawalParameters, WithdrawalTransfer } from "../chains/ChainClient.ts"
import { platformKey, type SigningKey, type TransactionRequest } from "../signer/TransactionRequest.ts"

export const withdrawalRequest = (
  network: CatalogNetwork,
  asset: CatalogAsset,
  transfer: WithdrawalTransfer,
  parameters: WithdrawalParameters,
  /** Whose key signs: the platform HOT for withdrawals; a deposit wallet or a tenant's GAS wallet for sweeps. */
  key: SigningKey = platformKey("HOT")
): TransactionRequest => {
  const token = asset.kind === "TOKEN" ? asset.contract ?? undefined : undefined
  if (asset.kind === "TOKEN" && token === undefined) throw new Error(`token ${asset.assetId} has no contract`)
  if (parameters.family !== network.chainFamily) {
    throw new Error(`${network.networkKey} is ${network.chainFamily}, its client gave ${parameters.family} parameters`)
  }
  switch (parameters.family) {
    case "EVM":
      return {
        family: "EVM",
        key,
        chainId: parameters.chainId,
        nonce: parameters.nonce,
        to: transfer.to,
        amount: transfer.amount,
        token,
        gas: parameters.gas,
        maxFeePerGas: parameters.maxFeePerGas,
        maxPriorityFeePerGas: parameters.maxPriorityFeePerGas
      }
    case "TRON":
      return {
        family: "TRON",
        key,
        to: transfer.to,
        amount: transfer.amount,
        token,
        feeLimit: token === undefined ? undefined : parameters.feeLimit,
        referenceBlock: parameters.referenceBlock,
        ...(parameters.expiration === undefined ? {} : { expiration: parameters.expiration })
      }
    case "BTC": {
      // BTC has no tokens in the catalog; the change is whatever the inputs leave over beyond amount and fee.
      const inputTotal = parameters.inputs.reduce((sum, input) => sum + input.value, 0n)
      const change = inputTotal - transfer.amount - parameters.networkFee
      if (change < 0n) throw new RangeError(`BTC inputs ${inputTotal} do not cover ${transfer.amount} + fee`)
      return {
        family: "BTC",
        btcNetwork: network.btcNetwork as BtcNetwork,
        inputs: parameters.inputs.map((input) => ({ txid: input.txid, vout: input.vout, value: input.value, key: input.key ?? key })),
        outputs: [
          { address: transfer.to, value: transfer.amount },
          ...(change > 0n ? [{ address: transfer.from, value: change }] : [])
        ]
      }
    }
    case "SOL":
      return {
        family: "SOL",
        key,
        recentBlockhash: parameters.recentBlockhash,
        to: transfer.to,
        amount: transfer.amount,
        // The catalog's tokenProgram goes with the mint: a Token-2022 mint signed through the classic Token program
        // (the signer's default) would name the wrong program and associated accounts, and fail on chain.
        token: token === undefined ? undefined : { mint: token, decimals: asset.decimals, programId: asset.tokenProgram ?? undefined },
        ...(parameters.feePayer === undefined ? {} : { feePayer: parameters.feePayer })
      }
  }
}
