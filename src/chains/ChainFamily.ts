/**
 * The four chain families of the spec (`chainFamily` on wallets, networks and assets). A family fixes the key
 * curve, the derivation path and the address format; the networks inside a family share all three, except BTC,
 * whose address prefix and coin type depend on the network.
 */
import { Schema } from "effect"

export const ChainFamily = Schema.Literals(["EVM", "TRON", "BTC", "SOL"])
export type ChainFamily = typeof ChainFamily.Type

/**
 * BTC network kind: it selects the address prefix (`bc`/`tb`/`bcrt`, base58 version bytes) and the BIP-44 coin type
 * (0' on mainnet, 1' on every test network). Signet uses the testnet parameters, so it is `test` here.
 */
export const BtcNetwork = Schema.Literals(["main", "test", "regtest"])
export type BtcNetwork = typeof BtcNetwork.Type
