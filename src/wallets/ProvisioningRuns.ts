/**
 * Provisioning a wallet that a request of this process has just committed: a fiber of this process's own, one per
 * wallet at a time, instead of a message to the wallet's entity (docs/wallets.md, "Provisioning and resident
 * entities", issue 39).
 *
 * Why not the entity: every entity a message activates stays resident until it has been idle for a minute (and the
 * reaper only looks every 30 s), and a runner holds at most `maxResidentEntities` (10,000 by default) of all types
 * together. A burst of new wallets faster than that filled the runner: the in-memory send was refused (MailboxFull),
 * the persisted message that replaced it waited in storage until idle wallets were reaped, up to 90 s, and every
 * other entity type (withdrawals) waited with it. Provisioning needs no entity: it is idempotent and guarded by the
 * database (WalletProvisioner.ts), and the committed PROVISIONING row, which the supervisor asks about at start and
 * when stuck, is what survives a crash; a run here dies with its process exactly as the in-memory message did.
 *
 * One run per wallet at a time: concurrent requests for one new user (ten parallel deposit_address calls) share it,
 * rather than derive the same addresses ten times and race on the same rows.
 */
import { Effect, Scope } from "effect"
import type { WalletProvisioner } from "./WalletProvisioner.ts"

export interface ProvisioningRuns {
  /** Starts provisioning `walletId` in the background unless a run for it is under way; returns at once. */
  readonly start: (walletId: string) => Effect.Effect<void>
  /** Wallets being provisioned by this process now. */
  readonly running: () => number
}

/** Runs live in `scope` (the service's): they end with the process, never with the request that started them. */
export const makeProvisioningRuns = (
  provisioner: WalletProvisioner["Service"],
  scope: Scope.Scope
): ProvisioningRuns => {
  const running = new Set<string>()
  const start = (walletId: string) =>
    Effect.suspend(() => {
      if (running.has(walletId)) return Effect.void
      running.add(walletId)
      return provisioner.provision(walletId).pipe(
        // A defect leaves the wallet PROVISIONING: the supervisor's sweep asks again after a minute.
        Effect.catchCause((cause) =>
          Effect.logWarning(`provisioning wallet ${walletId} failed; the supervisor will ask again`, cause)
        ),
        Effect.ensuring(Effect.sync(() => running.delete(walletId))),
        Effect.forkIn(scope),
        Effect.asVoid
      )
    })
  return { start, running: () => running.size }
}
