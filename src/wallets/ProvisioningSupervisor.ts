/**
 * Finds wallets stuck in PROVISIONING (their Provision message was never stored because the process died between
 * the wallet's commit and the send, or the entity gave up on a defect), and provisioned wallets without an address
 * on a network added to the catalog since, and asks their entity again. A re-request carries a new attempt key per
 * sweep window, so it is not answered from the stored reply of an earlier one.
 */
import { Clock, Effect, Layer, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { decodeRows, Text } from "../db/RowSchemas.ts"
import { WalletEntity } from "../entities/WalletEntity.ts"

export const provisioningSweepIntervalMillis = 60_000
/** Younger wallets are left to their first request. */
export const provisioningStuckAfterMillis = 60_000
export const provisioningSweepBatchMax = 500

const stuckRows = decodeRows(Schema.Struct({ id: Text }), "ProvisioningSupervisor (stuck wallets)")
const unregisteredRows = decodeRows(Schema.Struct({ id: Text }), "ProvisioningSupervisor (unregistered networks)")

export const sweepStuckWallets = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const catalog = yield* Catalog
  const clientFor = yield* WalletEntity.client
  const now = yield* Clock.currentTimeMillis
  const stuck = yield* sql`
    SELECT id FROM wallets WHERE status = 'PROVISIONING' AND created_at < ${new Date(now - provisioningStuckAfterMillis)}
    ORDER BY created_at LIMIT ${provisioningSweepBatchMax}`.pipe(Effect.flatMap(stuckRows))
  const familyNetworks = catalog.networks
    .filter((network) => network.enabled)
    .map((network) => ({ chain_family: network.chainFamily, network_key: network.networkKey }))
  const unregistered = yield* sql`
    SELECT DISTINCT w.id FROM wallets w
      JOIN jsonb_to_recordset(${JSON.stringify(familyNetworks)}::jsonb) AS n (chain_family text, network_key text)
        ON n.chain_family = w.chain_family
    WHERE w.status IN ('ACTIVE', 'HIDDEN', 'FROZEN')
      AND NOT EXISTS (SELECT 1 FROM wallet_addresses a WHERE a.wallet_id = w.id AND a.network_key = n.network_key)
    LIMIT ${provisioningSweepBatchMax}`.pipe(Effect.flatMap(unregisteredRows))
  const attempt = `supervisor:${Math.floor(now / provisioningSweepIntervalMillis)}`
  for (const { id } of [...stuck, ...unregistered]) {
    yield* clientFor(id).Provision({ attempt }, { discard: true })
  }
  return stuck.length + unregistered.length
})

export const ProvisioningSupervisor = Layer.effectDiscard(
  sweepStuckWallets.pipe(
    Effect.catchCause((cause) => Effect.logWarning("provisioning sweep failed", cause).pipe(Effect.as(0))),
    Effect.repeat(Schedule.spaced(provisioningSweepIntervalMillis)),
    Effect.forkScoped
  )
)
