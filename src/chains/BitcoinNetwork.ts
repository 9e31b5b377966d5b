/**
 * The bitcoinjs network objects behind our `BtcNetwork` names, and the one-time ECC set-up bitcoinjs needs before
 * it can handle Taproot outputs. Address validation and derivation both go through here so they can never disagree
 * on which prefixes belong to which network.
 */
import * as ecc from "@bitcoinerlab/secp256k1"
import * as bitcoin from "bitcoinjs-lib"
import type { BtcNetwork } from "./ChainFamily.ts"

// P2TR output classification (`payments.p2tr`) throws "No ECC Library provided" without this; it is idempotent.
bitcoin.initEccLib(ecc)

export const bitcoinNetworks: Readonly<Record<BtcNetwork, bitcoin.Network>> = {
  main: bitcoin.networks.bitcoin,
  test: bitcoin.networks.testnet,
  regtest: bitcoin.networks.regtest
}

/**
 * A BTC address or key is meaningless without its network, and guessing mainnet would turn a test deployment's
 * addresses into real-money ones. A missing network is a caller bug, so this throws instead of defaulting.
 */
export const requireBtcNetwork = (btcNetwork: BtcNetwork | undefined): BtcNetwork => {
  if (btcNetwork === undefined) throw new TypeError("btcNetwork is required for the BTC family")
  return btcNetwork
}
