/**
 * The testers' kit (`coffer/testing`): deterministic scenarios of the whole service on a virtual clock, with seeded
 * ids and randomness. docs/scenarios.md is its manual.
 */
export {
  type ChainControls,
  type RawResponse,
  Scenario,
  scenarioLayer,
  scenarioMnemonic,
  scenarioOpsToken,
  type ScenarioOptions,
  type ScenarioShape,
  scenarioStartMillis,
  type ScenarioTenant
} from "./Scenario.ts"
export { type Balance, type EventInvariantReport, ScenarioCheckFailed, terminalStatuses } from "./Checks.ts"
export { cloneDatabase, embeddedServer, prepareTemplate, type ScenarioServer } from "./ScenarioDatabase.ts"
export type { AdvanceOptions, VirtualClock } from "./VirtualClock.ts"
export type { ReceivedDelivery, WebhookReceiver } from "./WebhookReceiver.ts"
