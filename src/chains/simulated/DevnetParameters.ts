/**
 * The simulated networks' parameters: finality, default fees and the values a signed withdrawal carries, chosen near
 * the real networks' so signed bytes and amounts look like theirs.
 */
import type { ChainFamily } from "../ChainFamily.ts"

/** Blocks behind the head a network treats as final, as the real networks roughly do (TRON solidity, SOL roots). */
export const finalityDepthBlocks: Readonly<Record<ChainFamily, bigint>> = { EVM: 64n, TRON: 19n, BTC: 6n, SOL: 32n }

/**
 * The hot wallet's balance of an asset the operator never set: plenty, so withdrawals in development and tests go
 * through unless a test lowers it (PATCH /ops/devnet/{networkKey} `hotWalletBalance`).
 */
export const hotWalletBalanceDefault = 10n ** 27n

/** A withdrawal's network fee until the operator sets one, in the native coin's base unit, near real networks'. */
export const networkFeeDefault: Readonly<Record<ChainFamily, bigint>> = {
  EVM: 21_000n * 1_000_000_000n,
  TRON: 1_100_000n,
  BTC: 2_000n,
  SOL: 5_000n
}

/** EIP-155 chain ids of the simulated EVM networks (the real networks' ids, so signed bytes look like theirs). */
export const evmChainIds: Readonly<Record<string, number>> = { ETH_SEPOLIA: 11_155_111, BSC_TESTNET: 97 }
export const evmChainIdDefault = 1_337
export const evmNativeGas = 21_000n
export const evmTokenGas = 65_000n
export const evmPriorityFeeMax = 1_000_000_000n
/** A transaction displaces a pending one of the same sender and nonce when both its fee fields are this much higher. */
export const evmReplacementBumpPercent = 10n
/** The most sun a TRC-20 call may burn (TRON feeLimit): 100 TRX. */
export const tronFeeLimit = 100_000_000n
/** What the synthetic BTC input leaves over beyond amount and fee, paid back to the hot wallet as change. */
export const btcChangeSatoshi = 10_000n
