/**
 * When a wallet's address on a network may be shown (spec 2, wallet address item): only while the wallet is
 * `ACTIVE` and the network's watch status is `ACTIVE` or `DEGRADED`; otherwise it is null and must not reach users.
 * `GET /v1/wallets/{id}/addresses` and `POST /v1/users/{customerRefId}/deposit_address` both answer through here.
 */
import type { Watch } from "../catalog/Switches.ts"
import type { Wallet, WalletAddress } from "./WalletRepository.ts"

/** Whether a watch status lets its address be shown. */
export const isWatched = (watchStatus: WalletAddress["watchStatus"]): boolean =>
  watchStatus === "ACTIVE" || watchStatus === "DEGRADED"

/**
 * A registration as the wallet address item shows it: a network the operator froze (`watch: FROZEN`,
 * operator-interface.md "Switches") shows `FROZEN` whatever the stored registration says.
 */
export const withNetworkWatch = (entry: WalletAddress | undefined, watch: Watch): WalletAddress | undefined =>
  entry !== undefined && watch === "FROZEN" ? { ...entry, watchStatus: "FROZEN" } : entry

/** The address to show for this registration of this wallet, or null (spec 2, wallet address item). */
export const visibleAddress = (
  wallet: Pick<Wallet, "status">,
  entry: WalletAddress | undefined
): string | null => wallet.status === "ACTIVE" && entry !== undefined && isWatched(entry.watchStatus) ? entry.address : null
