/**
 * When a wallet's address on a network may be shown (spec 2, wallet address item): only while the wallet is
 * `ACTIVE` and the network's watch status is `ACTIVE` or `DEGRADED`; otherwise it is null and must not reach users.
 * `GET /v1/wallets/{id}/addresses` and `POST /v1/users/{customerRefId}/deposit_address` both answer through
 * `addressItem`, so an address is handed out by one rule (docs/wallets.md, "Deposit addresses").
 *
 * The watch status shown is the stored registration's, overlaid with what holds for the network now: the operator's
 * `FROZEN` watch (operator-interface.md, "Switches"), no watcher at all, or a watcher past its lag budget
 * (decisions.md, "Sending on real networks"; deposits/WatchHealth.ts).
 */
import type { Watch } from "../catalog/Switches.ts"
import type { NetworkWatchHealth } from "../deposits/WatchHealth.ts"
import type { Wallet, WalletAddress } from "./WalletRepository.ts"

/** A network now: whether it takes deposits (catalog, client and switch), its watch switch, its watcher's health. */
export interface NetworkWatchState {
  readonly depositEnabled: boolean
  readonly watch: Watch
  readonly health: NetworkWatchHealth
}

/** Whether a watch status lets its address be shown. */
export const isWatched = (watchStatus: WalletAddress["watchStatus"]): boolean =>
  watchStatus === "ACTIVE" || watchStatus === "DEGRADED"

/**
 * The watch status a registration shows now. A registration not yet `ACTIVE` shows what it is; an `ACTIVE` one is
 * `FROZEN` on a network the operator froze, `ALLOCATED` on a network nobody watches (the address is derived, but no
 * watcher has it: decisions.md, not `ACTIVE`), `DEGRADED` while the watcher lags past its budget. Null when the
 * wallet has no registration on the network (spec 2: "null if not registered").
 */
export const shownWatchStatus = (
  entry: WalletAddress | undefined,
  network: Pick<NetworkWatchState, "watch" | "health">
): WalletAddress["watchStatus"] | null => {
  if (entry === undefined) return null
  if (network.watch === "FROZEN") return "FROZEN"
  if (entry.watchStatus !== "ACTIVE") return entry.watchStatus
  if (network.health === "UNWATCHED") return "ALLOCATED"
  return network.health
}

/**
 * A wallet's address item on a network as shown now: its watch status, and its address only when the wallet is
 * `ACTIVE`, that watch status `ACTIVE` or `DEGRADED`, and the network takes deposits (an address of a network that
 * does not is never handed out; the address items list such a network not at all, spec 2).
 */
export const addressItem = (
  wallet: Pick<Wallet, "status">,
  entry: WalletAddress | undefined,
  network: NetworkWatchState
): { readonly watchStatus: WalletAddress["watchStatus"] | null; readonly address: string | null } => {
  const watchStatus = shownWatchStatus(entry, network)
  const shown = entry !== undefined && watchStatus !== null && wallet.status === "ACTIVE" && isWatched(watchStatus) &&
    network.depositEnabled
  return { watchStatus, address: shown ? entry.address : null }
}
