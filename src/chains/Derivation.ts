/**
 * Where each wallet's key lives in the HD tree, and how a public key becomes an address. Pure and synchronous.
 *
 * Scheme (chains.md section 2): a wallet is (tenantIndex T, userIndex U, walletIndex W), three integers allocated by
 * the database, each in [0, 2^31-1]. The path is an injective function of (family, network kind, T, U, W), so no
 * two wallets share a key. T and U are hardened, so a leaked leaf key plus an xpub exposes at most one user's
 * wallets; W is non-hardened on secp256k1 chains so a user node's xpub could derive that user's addresses without
 * the seed. SLIP-0010 ed25519 (SOL) has hardened steps only.
 *
 *   EVM   m/44'/60'/T'/U'/W         TRON  m/44'/195'/T'/U'/W
 *   BTC   m/84'/0'/T'/U'/W (main)   m/84'/1'/T'/U'/W (test, regtest), P2WPKH
 *   SOL   m/44'/501'/T'/U'/W'
 *
 * Platform operating addresses live under T = 0, which no tenant gets (tenant indexes start at 1): HOT is U = 0,
 * SWEEP U = 1, each with W = 0; GAS is per tenant (decisions.md "Operating wallets"): U = 2, W = the tenant's index
 * (>= 1, so W = 0 under U = 2 is never used). Further platform roles take the next free U.
 *
 * Addresses are returned in the `normalized` form of AddressValidation (EVM lowercase, TRON base58, BTC bech32
 * lowercase, SOL base58) so that a derived address and a validated user input compare equal as strings.
 *
 * `deriveKey` hands out private keys: only src/signer may call it, and the Signer service never returns them.
 */
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { HDKey as Secp256k1HdKey } from "@scure/bip32"
import { PublicKey } from "@solana/web3.js"
import * as bitcoin from "bitcoinjs-lib"
import { HDKey as Ed25519HdKey } from "micro-key-producer/slip10.js"
import { publicKeyToAddress } from "viem/accounts"
import { bitcoinNetworks, requireBtcNetwork } from "./BitcoinNetwork.ts"
import { tronAddressFromHex } from "./TronAddress.ts"
import type { BtcNetwork, ChainFamily } from "./ChainFamily.ts"

/** BIP-32 child indexes are 31-bit; the hardened flag takes the top bit. */
export const derivationIndexMax = 2 ** 31 - 1

export interface WalletIndices {
  readonly tenantIndex: number
  readonly userIndex: number
  readonly walletIndex: number
}

export interface KeyTarget {
  readonly family: ChainFamily
  /** Required when `family` is BTC; ignored otherwise. */
  readonly btcNetwork?: BtcNetwork | undefined
}

export interface DerivationRequest extends KeyTarget, WalletIndices {}

export const isDerivationIndex = (value: number): boolean =>
  Number.isSafeInteger(value) && value >= 0 && value <= derivationIndexMax

const checkIndex = (name: keyof WalletIndices, value: number): number => {
  // The HD libraries throw an unhelpful "Invalid index" for 2^31 and silently accept "1.5"-like path text; an
  // index outside the range is a caller bug (they come from database sequences), so fail loudly with its name.
  if (!isDerivationIndex(value)) throw new RangeError(`${name} must be an integer in [0, ${derivationIndexMax}], got ${value}`)
  return value
}

/** The fixed prefix `m/purpose'/coin'` of a family (and BTC network kind). */
const coinPath = (target: KeyTarget): string => {
  switch (target.family) {
    case "EVM":
      return "m/44'/60'"
    case "TRON":
      return "m/44'/195'"
    case "BTC":
      return requireBtcNetwork(target.btcNetwork) === "main" ? "m/84'/0'" : "m/84'/1'"
    case "SOL":
      return "m/44'/501'"
  }
}

/** The path below `coinPath`: `T'/U'/W`, with W hardened on SOL because SLIP-0010 ed25519 has no other kind. */
const walletSubpath = (request: DerivationRequest): string => {
  const tenant = checkIndex("tenantIndex", request.tenantIndex)
  const user = checkIndex("userIndex", request.userIndex)
  const wallet = checkIndex("walletIndex", request.walletIndex)
  return `${tenant}'/${user}'/${wallet}${request.family === "SOL" ? "'" : ""}`
}

export const derivationPath = (request: DerivationRequest): string => `${coinPath(request)}/${walletSubpath(request)}`

export const PlatformRole = ["HOT", "SWEEP", "GAS"] as const
export type PlatformRole = (typeof PlatformRole)[number]

/** Reserved for the platform: tenant indexes start at 1, so no tenant wallet can share a key with these. */
export const platformTenantIndex = 0

const platformUserIndex: Readonly<Record<PlatformRole, number>> = { HOT: 0, SWEEP: 1, GAS: 2 }

/**
 * The indexes of an operating address. `tenantIndex` names the tenant whose GAS wallet it is and is required for GAS
 * only (HOT and SWEEP are the platform's, one per network): a GAS key without a tenant would be a shared wallet the
 * decisions do not have, so asking for one is a caller bug.
 */
export const platformIndices = (role: PlatformRole, tenantIndex?: number): WalletIndices => {
  if (role !== "GAS") {
    if (tenantIndex !== undefined) throw new RangeError(`${role} is the platform's: no tenantIndex`)
    return { tenantIndex: platformTenantIndex, userIndex: platformUserIndex[role], walletIndex: 0 }
  }
  if (tenantIndex === undefined || tenantIndex === platformTenantIndex) {
    throw new RangeError("a GAS wallet belongs to a tenant: tenantIndex >= 1 is required")
  }
  return {
    tenantIndex: platformTenantIndex,
    userIndex: platformUserIndex.GAS,
    walletIndex: checkIndex("tenantIndex", tenantIndex)
  }
}

/**
 * The webhook signing key (Ed25519, key id `v1`), SLIP-0010 from the same seed. Purpose 1668244070' is 0x636f6666,
 * "coff" in ASCII: not a BIP-43 purpose any wallet uses, so no chain key can ever coincide with it. The next level
 * names the application (0' = webhook signing), the last is the key version (1' = `v1`; a rotation takes 2').
 */
export const webhookSigningKeyPath = "m/1668244070'/0'/1'"

/**
 * The address of a public key: secp256k1 compressed (33 bytes) for EVM, TRON and BTC, raw ed25519 (32 bytes) for
 * SOL. TRON addresses are the EVM address bytes behind a 0x41 version byte, in base58check.
 */
export const addressFromPublicKey = (target: KeyTarget, publicKey: Uint8Array): string => {
  switch (target.family) {
    case "EVM":
      return evmAddress(publicKey)
    case "TRON":
      return tronAddressFromHex(`41${evmAddress(publicKey).slice(2)}`)
    case "BTC": {
      const network = bitcoinNetworks[requireBtcNetwork(target.btcNetwork)]
      const address = bitcoin.payments.p2wpkh({ pubkey: publicKey, network }).address
      if (address === undefined) throw new Error("bitcoinjs returned no P2WPKH address for a public key")
      return address
    }
    case "SOL":
      return new PublicKey(publicKey).toBase58()
  }
}

const evmAddress = (compressedPublicKey: Uint8Array): string => {
  const uncompressed = secp256k1.Point.fromBytes(compressedPublicKey).toBytes(false)
  return publicKeyToAddress(`0x${bytesToHex(uncompressed)}`).toLowerCase()
}

/**
 * The master nodes of one seed for both curves. Nodes down to `m/purpose'/coin'` are memoised on first use (at most
 * one per family and BTC network kind, so the memo is bounded by construction): each hardened step costs an
 * HMAC-SHA512 and a point multiplication, and those two steps are shared by every wallet.
 */
export interface HdRoot {
  readonly secp256k1: Secp256k1HdKey
  readonly ed25519: Ed25519HdKey
  readonly coinNodes: Map<string, Secp256k1HdKey | Ed25519HdKey>
}

export const hdRootFromSeed = (seed: Uint8Array): HdRoot => {
  // BIP-32 allows 16..64 byte seeds; BIP-39 always gives 64. Anything else means the caller passed the wrong bytes.
  if (seed.length < 16 || seed.length > 64) throw new RangeError(`seed must be 16..64 bytes, got ${seed.length}`)
  return {
    secp256k1: Secp256k1HdKey.fromMasterSeed(seed),
    ed25519: Ed25519HdKey.fromMasterSeed(seed),
    coinNodes: new Map()
  }
}

const coinNode = (root: HdRoot, target: KeyTarget): Secp256k1HdKey | Ed25519HdKey => {
  const path = coinPath(target)
  let node = root.coinNodes.get(path)
  if (node === undefined) {
    node = target.family === "SOL" ? root.ed25519.derive(path) : root.secp256k1.derive(path)
    root.coinNodes.set(path, node)
  }
  return node
}

export interface DerivedAddress {
  readonly address: string
  readonly path: string
}

/** Secret: the private key of a wallet. Never log it, never return it from a service. */
export interface DerivedKey extends DerivedAddress {
  readonly publicKey: Uint8Array
  /** secp256k1 scalar (32 bytes) or the ed25519 seed (32 bytes, as `Keypair.fromSeed` takes it). */
  readonly privateKey: Uint8Array
}

/** Signer-internal: returns private key material. Everything else uses `deriveAddress`. */
export const deriveKey = (root: HdRoot, request: DerivationRequest): DerivedKey => {
  const subpath = walletSubpath(request)
  const node = coinNode(root, request).derive(`m/${subpath}`)
  const publicKey = node instanceof Ed25519HdKey ? node.publicKeyRaw : node.publicKey
  const privateKey = node.privateKey
  // Both libraries always hold a private key on nodes derived from a seed; their absence would be a library bug.
  if (publicKey === null || privateKey === null) throw new Error("derived HD node has no key")
  return {
    path: `${coinPath(request)}/${subpath}`,
    address: addressFromPublicKey(request, publicKey),
    publicKey,
    privateKey
  }
}

export const deriveAddress = (root: HdRoot, request: DerivationRequest): DerivedAddress => {
  const { address, path } = deriveKey(root, request)
  return { address, path }
}

/** Signer-internal: the webhook Ed25519 key pair (32-byte seed and 32-byte raw public key). */
export const deriveWebhookSigningKey = (root: HdRoot): { readonly publicKey: Uint8Array; readonly privateKey: Uint8Array } => {
  const node = root.ed25519.derive(webhookSigningKeyPath)
  return { publicKey: node.publicKeyRaw, privateKey: node.privateKey }
}
