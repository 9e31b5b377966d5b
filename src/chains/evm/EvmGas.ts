/**
 * Gas constants of EVM sends, apart from the node client (EvmWithdrawals.ts) so that the modules that price or sign
 * sends load without viem's client: the service imports those only for a network with a node (NodeClients.ts).
 */

/** Gas of a plain transfer of the native coin to an account without code. */
export const nativeTransferGas = 21_000n
/**
 * Gas an ERC-20 `transfer` is priced at before its recipient is known (the hot wallet's cover, fee floors): a
 * transfer to a holder without balance writes a new storage slot (about 55,000 on OpenZeppelin and Tether's
 * contracts); rounded up.
 */
export const tokenTransferGasEstimate = 65_000n
/**
 * The gas limit signed when the node's estimate fails because the call reverts: the transaction is sent anyway and
 * the chain decides (an included revert is FAILED / REVERTED_ON_CHAIN with its fee booked), rather than guessing
 * from a simulation on a state that may change before inclusion.
 */
export const revertingCallGas = 100_000n
