/**
 * What the signer signs: one transfer per chain family, with every chain parameter already decided (nonce, fees,
 * reference block, inputs, blockhash). Choosing those needs the chain and belongs to the chain clients and the
 * withdrawal pipeline; the signer only turns a fully specified transfer into signed bytes, offline, so it can run
 * where no node is reachable and its output is reproducible.
 *
 * Amounts are bigint base units (wei, sun, satoshi, lamports, token units). Addresses are in the `normalized` form of
 * chains/AddressValidation and were validated before they got here: a malformed one is a caller bug (a defect).
 */
import type { BtcNetwork } from "../chains/ChainFamily.ts"
import type { PlatformRole, WalletIndices } from "../chains/Derivation.ts"

/**
 * Whose key signs: a tenant wallet's (tenantIndex >= 1), one of the platform's operating addresses (HOT, SWEEP), or
 * a tenant's GAS wallet (platform-held, under T = 0, one per tenant: chains/Derivation.ts `platformIndices`).
 */
export type SigningKey =
  | ({ readonly _tag: "Wallet" } & WalletIndices)
  | { readonly _tag: "Platform"; readonly role: Exclude<PlatformRole, "GAS"> }
  | { readonly _tag: "Gas"; readonly tenantIndex: number }

export const walletKey = (indices: WalletIndices): SigningKey => ({ _tag: "Wallet", ...indices })
export const platformKey = (role: Exclude<PlatformRole, "GAS">): SigningKey => ({ _tag: "Platform", role })
/** The GAS wallet of the tenant whose index (tenants.seq) is `tenantIndex`. */
export const gasKey = (tenantIndex: number): SigningKey => ({ _tag: "Gas", tenantIndex })

/** An EIP-1559 transfer of the native coin, or of an ERC-20 token when `token` is set. */
export interface EvmTransfer {
  readonly family: "EVM"
  readonly key: SigningKey
  readonly chainId: number
  readonly nonce: number
  /** The recipient; for a token transfer the token's recipient, not the contract. */
  readonly to: string
  /** Wei, or the token's base units. */
  readonly amount: bigint
  /** ERC-20 contract address; absent for the native coin. */
  readonly token?: string | undefined
  readonly gas: bigint
  readonly maxFeePerGas: bigint
  readonly maxPriorityFeePerGas: bigint
}

/** The recent block a TRON transaction refers to (TAPoS): it expires unless that block is on the chain. */
export interface TronReferenceBlock {
  readonly number: bigint
  /** `blockID`: 64 hex characters. */
  readonly id: string
  /** Block time, milliseconds since the epoch. */
  readonly timestamp: number
}

/** A TRX transfer, or a TRC-20 `transfer(address,uint256)` when `token` is set. */
export interface TronTransfer {
  readonly family: "TRON"
  readonly key: SigningKey
  readonly to: string
  /** Sun, or the token's base units. */
  readonly amount: bigint
  /** TRC-20 contract address (base58); absent for TRX. */
  readonly token?: string | undefined
  /** Most sun the contract call may burn for energy; required with `token`. */
  readonly feeLimit?: bigint | undefined
  readonly referenceBlock: TronReferenceBlock
  /**
   * When the network drops the transaction unconfirmed, ms since the epoch; default the block time plus
   * `tronExpirationAfterBlockMs`.
   */
  readonly expiration?: number | undefined
}

/** What TRON nodes use when a client does not choose: a transaction stays valid for 60 s after its block. */
export const tronExpirationAfterBlockMs = 60_000

export interface BtcInput {
  readonly txid: string
  readonly vout: number
  /** The output's value in satoshi, which the P2WPKH signature commits to. */
  readonly value: bigint
  /** The key of the P2WPKH address holding the output. */
  readonly key: SigningKey
}

export interface BtcOutput {
  readonly address: string
  readonly value: bigint
}

/** A P2WPKH spend: inputs may belong to several keys (a sweep); the fee is what the outputs leave over. */
export interface BtcTransfer {
  readonly family: "BTC"
  readonly btcNetwork: BtcNetwork
  readonly inputs: ReadonlyArray<BtcInput>
  readonly outputs: ReadonlyArray<BtcOutput>
}

export interface SolToken {
  readonly mint: string
  readonly decimals: number
  /** The token program owning the mint; default the original SPL Token program. */
  readonly programId?: string | undefined
}

/**
 * A SOL transfer, or an SPL `TransferChecked` between the associated token accounts of the key and of `to` (the
 * recipient's account is created when missing). The key pays the fee and that rent, unless `feePayer` is set.
 */
export interface SolTransfer {
  readonly family: "SOL"
  readonly key: SigningKey
  readonly recentBlockhash: string
  /** The recipient wallet (an on-curve address), also for tokens. */
  readonly to: string
  /** Lamports, or the token's base units. */
  readonly amount: bigint
  readonly token?: SolToken | undefined
  /**
   * Another key that pays the fee (and a missing recipient token account's rent) and signs first: a tenant's GAS
   * wallet sweeping an SPL deposit from an address holding no SOL (decisions.md "Operating wallets").
   */
  readonly feePayer?: SigningKey | undefined
}

export type TransactionRequest = EvmTransfer | TronTransfer | BtcTransfer | SolTransfer

/**
 * Signed and ready to broadcast. `raw` is what the family's broadcast call takes: EVM `0x` hex
 * (eth_sendRawTransaction), TRON hex of the protobuf Transaction (wallet/broadcasthex), BTC hex
 * (sendrawtransaction), SOL base64 (sendTransaction with base64 encoding). `txHash` is the id explorers show:
 * EVM 0x-prefixed keccak, TRON txID, BTC txid, SOL the base58 first signature.
 */
export interface SignedTransaction {
  readonly family: TransactionRequest["family"]
  /** The sending address (for BTC, the first input's). */
  readonly from: string
  readonly txHash: string
  readonly raw: string
}
