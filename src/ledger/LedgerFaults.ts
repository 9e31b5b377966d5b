/**
 * Bugs a test plants in the ledger on purpose, to see the testers' checks find them (src/testing/Workload.ts, the
 * planted-bug test): the entries of the kinds named in `dropEntryKinds` are answered as posted by `Ledger.post` and
 * `Ledger.postMany` and never written, as a release or a credit forgotten in code would be.
 *
 * A `Context.Reference` whose default plants nothing. No configuration, environment variable or request reaches it,
 * and nothing in the service provides it: only a program that builds the service with
 * `Layer.succeed(LedgerFaults)(...)` around it (src/testing/Workload.ts `withPlantedFaults`) does.
 */
import { Context } from "effect"

export interface LedgerFaultsShape {
  /** Entry kinds (ledger/Ledger.ts `EntryKind`) that `Ledger.post` and `Ledger.postMany` drop. */
  readonly dropEntryKinds: ReadonlyArray<string>
}

export const LedgerFaults = Context.Reference<LedgerFaultsShape>("coffer/testing/LedgerFaults", {
  defaultValue: () => ({ dropEntryKinds: [] })
})
