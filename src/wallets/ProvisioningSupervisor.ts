/**
 * Asks wallets' entities again (entities/WalletEntity.ts):
 *
 * - at start, every wallet still PROVISIONING, however recent: a request's run (ProvisioningRuns.ts) or a message in
 *   memory (`ProvisionNow`) is lost with the process that held it, and the wallet's row is what survives;
 * - every `provisioningSweepIntervalMillis` from then on, wallets stuck in PROVISIONING (their request was lost with
 *   another process, or the entity gave up on a defect);
 * - both times, provisioned wallets without an address on a network added to the catalog since.
 *
 * A re-request carries a new attempt key (per start, per sweep window), so it is not answered from the stored reply of
 * an earlier one.
 */
import { Clock, Effect, Layer, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { forEachIdPage } from "../db/IdPages.ts"
import { decodeRows, Text } from "../db/RowSchemas.ts"
import { requestProvisioning } from "../entities/WalletEntity.ts"
import { pollingLoop } from "../domain/Polling.ts"

export const provisioningSweepIntervalMillis = 60_000
/** Younger wallets are left to their first request. */
export const provisioningStuckAfterMillis = 60_000
export const provisioningSweepBatchMax = 500

const walletRows = decodeRows(Schema.Struct({ id: Text }), "ProvisioningSupervisor (wallets)")

const ask = (wallets: ReadonlyArray<{ id: string }>, attempt: string) =>
  Effect.forEach(wallets, ({ id }) => requestProvisioning(id, attempt), { discard: true })

/** Provisioned wallets without an address on an enabled network of their family (the catalog gained it since). */
const unregisteredWallets = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const catalog = yield* Catalog
  const familyNetworks = catalog.networks
    .filter((network) => network.enabled)
    .map((network) => ({ chain_family: network.chainFamily, network_key: network.networkKey }))
  return yield* sql`
    SELECT DISTINCT w.id FROM wallets w
      JOIN jsonb_to_recordset(${JSON.stringify(familyNetworks)}::jsonb) AS n (chain_family text, network_key text)
        ON n.chain_family = w.chain_family
    WHERE w.status IN ('ACTIVE', 'HIDDEN', 'FROZEN')
      AND NOT EXISTS (SELECT 1 FROM wallet_addresses a WHERE a.wallet_id = w.id AND a.network_key = n.network_key)
    LIMIT ${provisioningSweepBatchMax}`.pipe(Effect.flatMap(walletRows))
})

/** The periodic sweep: stuck PROVISIONING wallets and unregistered networks; returns how many were asked. */
export const sweepStuckWallets = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const now = yield* Clock.currentTimeMillis
  const stuck = yield* sql`
    SELECT id FROM wallets WHERE status = 'PROVISIONING' AND created_at < ${new Date(now - provisioningStuckAfterMillis)}
    ORDER BY created_at LIMIT ${provisioningSweepBatchMax}`.pipe(Effect.flatMap(walletRows))
  const unregistered = yield* unregisteredWallets
  yield* ask([...stuck, ...unregistered], `supervisor:${Math.floor(now / provisioningSweepIntervalMillis)}`)
  return stuck.length + unregistered.length
})

/**
 * The start's ask: every PROVISIONING wallet, however recent, in pages of `provisioningSweepBatchMax` (keyset by id,
 * so each is asked once), and the unregistered networks. Returns how many were asked.
 */
export const askAtStart = Effect.suspend(() => askProvisioningWhere(() => true, "start"))

/**
 * As `askAtStart`, only the wallets `keep` selects (entities/ClusterDuties.ts: those of the shards this process just
 * took over); the attempt key starts with `reason`.
 */
export const askProvisioningWhere = (keep: (id: string) => boolean, reason: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    const attempt = `${reason}:${now}`
    let asked = 0
    yield* forEachIdPage(
      provisioningSweepBatchMax,
      (afterCursor) =>
        sql`
          SELECT id FROM wallets WHERE status = 'PROVISIONING' ${afterCursor}
          ORDER BY id LIMIT ${provisioningSweepBatchMax}`.pipe(Effect.flatMap(walletRows)),
      (page) => {
        const kept = page.filter(({ id }) => keep(id))
        asked += kept.length
        return ask(kept, attempt)
      }
    )
    const unregistered = (yield* unregisteredWallets).filter(({ id }) => keep(id))
    yield* ask(unregistered, attempt)
    return asked + unregistered.length
  })

export const ProvisioningSupervisor = Layer.effectDiscard(
  askAtStart.pipe(
    Effect.catchCause((cause) => Effect.logWarning("asking the provisioning wallets at start failed; the sweep will", cause)),
    Effect.andThen(Effect.sleep(provisioningSweepIntervalMillis)),
    Effect.andThen(
      sweepStuckWallets.pipe(
        Effect.catchCause((cause) => Effect.logWarning("provisioning sweep failed", cause).pipe(Effect.as(0))),
        Effect.repeat(Schedule.spaced(provisioningSweepIntervalMillis))
      )
    ),
    pollingLoop,
    Effect.forkScoped
  )
)
