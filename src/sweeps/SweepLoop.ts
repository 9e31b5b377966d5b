/**
 * The background side of sweeps (Sweeps.ts): each sweeping network on a fiber of its own (a hung node stalls only
 * its own sweeps), a pass every few seconds so a credited deposit is swept within about a minute, and the GAS
 * wallets checked every minute (VAULT_GAS_LOW itself is at most once per 6 hours per tenant and network).
 */
import { Effect, Layer, Schedule } from "effect"
import { AppConfig } from "../Config.ts"
import { GasWallets } from "./GasWallets.ts"
import { Sweeps } from "./Sweeps.ts"
import { pollingLoop } from "../domain/Polling.ts"

export const sweepPassIntervalMillis = 5_000
export const gasCheckIntervalMillis = 60_000

export const SweepLoop = Layer.effectDiscard(Effect.gen(function*() {
  if (!(yield* AppConfig).autoSweeps) {
    yield* Effect.logInfo("AUTO_SWEEPS=false: no sweeps; credited deposits stay on their addresses")
    return
  }
  const sweeps = yield* Sweeps
  const gasWallets = yield* GasWallets
  yield* Effect.forEach(sweeps.networkKeys, (networkKey) =>
    sweeps.pass(networkKey).pipe(
      Effect.catchCause((cause) => Effect.logWarning(`sweep pass of ${networkKey} failed`, cause)),
      Effect.repeat(Schedule.spaced(sweepPassIntervalMillis)),
      pollingLoop,
      Effect.forkScoped
    ), { discard: true })
  // The sweeping networks and the simulated chain's (no sweeps there, but the GAS figures and VAULT_GAS_LOW are
  // shown in development as they would be on a real network).
  yield* Effect.forEach(gasWallets.networkKeys, (networkKey) =>
    gasWallets.checkGas(networkKey).pipe(
      Effect.catchCause((cause) => Effect.logWarning(`gas check of ${networkKey} failed`, cause)),
      Effect.repeat(Schedule.spaced(gasCheckIntervalMillis)),
      pollingLoop,
      Effect.forkScoped
    ), { discard: true })
}))
