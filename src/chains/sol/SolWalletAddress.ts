/**
 * Spec 4.1: "For Solana withdrawals the recipient must be a wallet (owner) address, not a program or token account."
 * Estimate and withdrawal answer 422 `INVALID_ADDRESS` otherwise; the validate endpoint does not apply this.
 *
 * The rule has a part that needs no node and a part only a node can answer (docs/sol.md, "Withdrawal recipients"):
 *
 * - `isSolanaWalletAddress`, before any node is asked: the address must be on the ed25519 curve (an off-curve address
 *   is program-derived, e.g. an associated token account, and has no private key), and must not be a well-known
 *   program, loader, sysvar or native mint (`solWellKnownAccounts`) nor a mint or token program of the catalog.
 *   Those are mostly ordinary curve points (vanity strings such as `TokenkegQ…`, or 32 zero bytes for the System
 *   program), so the curve test alone passes them, and funds sent there are lost.
 * - `isWalletAccount`, on what a node holds at the address (WithdrawalChain `isWalletAddress`): an account that is
 *   executable, or that a program other than the System program owns (a token account, a mint, a program's data), is
 *   not a wallet. No account at all is a wallet nobody has used yet, which is the usual recipient.
 */
import {
  AddressLookupTableProgram,
  BPF_LOADER_DEPRECATED_PROGRAM_ID,
  BPF_LOADER_PROGRAM_ID,
  ComputeBudgetProgram,
  Ed25519Program,
  PublicKey,
  Secp256k1Program,
  STAKE_CONFIG_ID,
  StakeProgram,
  SystemProgram,
  SYSVAR_CLOCK_PUBKEY,
  SYSVAR_EPOCH_SCHEDULE_PUBKEY,
  SYSVAR_INSTRUCTIONS_PUBKEY,
  SYSVAR_RECENT_BLOCKHASHES_PUBKEY,
  SYSVAR_RENT_PUBKEY,
  SYSVAR_REWARDS_PUBKEY,
  SYSVAR_SLOT_HASHES_PUBKEY,
  SYSVAR_SLOT_HISTORY_PUBKEY,
  SYSVAR_STAKE_HISTORY_PUBKEY,
  VoteProgram
} from "@solana/web3.js"
import type { CatalogAsset, CatalogNetwork } from "../../catalog/Catalog.ts"
import { associatedTokenProgramId, tokenProgramId } from "../../signer/SolSigning.ts"
import { validateAddress } from "../AddressValidation.ts"

/**
 * Ids that @solana/web3.js 1.99 has no constant for, copied from where each program declares it:
 * - the runtime's (Solana SDK crate `solana-sdk-ids`, anza-xyz/solana-sdk `sdk-ids/src/lib.rs`): loaders, Config,
 *   Feature, the incinerator (lamports sent there are burned at the end of the block), the signature-verify and
 *   zero-knowledge proof programs, the owner of all sysvars and the sysvars added after web3.js 1.x;
 * - the SPL programs' (spl-token 0.4 `constants.ts`, spl-memo's `declare_id!`): Token-2022, the wrapped-SOL mints,
 *   both Memo programs. @solana/spl-token is a development dependency only (signer/SolSigning.ts says why), so its ids
 *   are typed here and test/chains/SolWalletAddress.test.ts holds them equal to the package's constants.
 * Left out: provisional ids (the Falcon-512 verify program's "may change").
 */
const typedIds = [
  "NativeLoader1111111111111111111111111111111",
  "BPFLoaderUpgradeab1e11111111111111111111111",
  "LoaderV411111111111111111111111111111111111",
  "Config1111111111111111111111111111111111111",
  "Feature111111111111111111111111111111111111",
  "1nc1nerator11111111111111111111111111111111",
  "Secp256r1SigVerify1111111111111111111111111",
  "ZkTokenProof1111111111111111111111111111111",
  "ZkE1Gama1Proof11111111111111111111111111111",
  "Sysvar1111111111111111111111111111111111111",
  "SysvarEpochRewards1111111111111111111111111",
  "SysvarFees111111111111111111111111111111111",
  "SysvarLastRestartS1ot1111111111111111111111",
  "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb",
  "So11111111111111111111111111111111111111112",
  "9pan9bMn5HatX4EJdBwg9VgCa7Uz5HL8N1m5D3NdXejP",
  "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
  "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo"
] as const

/** Programs, loaders, sysvars and native mints of every Solana cluster: never a withdrawal recipient. */
export const solWellKnownAccounts: ReadonlySet<string> = new Set([
  ...[
    SystemProgram.programId,
    BPF_LOADER_PROGRAM_ID,
    BPF_LOADER_DEPRECATED_PROGRAM_ID,
    AddressLookupTableProgram.programId,
    ComputeBudgetProgram.programId,
    Ed25519Program.programId,
    Secp256k1Program.programId,
    StakeProgram.programId,
    STAKE_CONFIG_ID,
    VoteProgram.programId,
    SYSVAR_CLOCK_PUBKEY,
    SYSVAR_EPOCH_SCHEDULE_PUBKEY,
    SYSVAR_INSTRUCTIONS_PUBKEY,
    SYSVAR_RECENT_BLOCKHASHES_PUBKEY,
    SYSVAR_RENT_PUBKEY,
    SYSVAR_REWARDS_PUBKEY,
    SYSVAR_SLOT_HASHES_PUBKEY,
    SYSVAR_SLOT_HISTORY_PUBKEY,
    SYSVAR_STAKE_HISTORY_PUBKEY,
    tokenProgramId,
    associatedTokenProgramId
  ].map((key) => key.toBase58()),
  ...typedIds
])

/**
 * What the service knows without a node is not a wallet: `solWellKnownAccounts` and, of every SOL network of the
 * catalog, the token mints (asset `contract`) and their token programs. Every SOL network's, not only the asset's:
 * a mint of another cluster is no wallet either, and the set stays one per catalog.
 */
export const solNonWalletAddresses = (catalog: {
  readonly networks: ReadonlyArray<CatalogNetwork>
  readonly assets: ReadonlyArray<CatalogAsset>
}): ReadonlySet<string> => {
  const solNetworks = new Set(
    catalog.networks.filter((network) => network.chainFamily === "SOL").map((network) => network.networkKey)
  )
  const catalogAccounts = catalog.assets.flatMap((asset) =>
    solNetworks.has(asset.networkKey) ? [asset.contract, asset.tokenProgram].filter((id) => id !== null) : []
  )
  return new Set([...solWellKnownAccounts, ...catalogAccounts])
}

/**
 * Whether a SOL address can be a withdrawal recipient as far as can be told without a node: a valid address on the
 * ed25519 curve that is none of `nonWallets` (`solNonWalletAddresses`).
 */
export const isSolanaWalletAddress = (address: string, nonWallets: ReadonlySet<string>): boolean =>
  validateAddress({ family: "SOL", address }).isValid && !nonWallets.has(address) &&
  PublicKey.isOnCurve(new PublicKey(address).toBytes())

/** An account as a node reports it (`getAccountInfo`), or null where the address holds none. */
export interface SolAccountKind {
  readonly executable: boolean
  /** The program that owns the account, base58. */
  readonly owner: string
}

const systemProgramId = SystemProgram.programId.toBase58()

/**
 * Whether what the node holds at an address is a wallet's: nothing yet (a key that never received anything), or a
 * System-owned account that is not executable. A System-owned account with data (a durable nonce account) passes:
 * its lamports are withdrawable by its nonce authority, so nothing is lost.
 */
export const isWalletAccount = (account: SolAccountKind | null): boolean =>
  account === null || (!account.executable && account.owner === systemProgramId)
