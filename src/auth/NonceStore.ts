/**
 * Durable JWT nonces (spec section 5, check 10): a nonce is accepted once per key, across restarts and processes,
 * because the primary key of `auth_nonces` decides. Concurrent requests share one INSERT (group commit): each
 * request still waits for its own nonce to be committed before it proceeds, so a crash can never reopen a replay,
 * but the database sees one statement per flush instead of one per request (GroupCommit.ts).
 *
 * The same statement counts each fresh nonce in its key's one-second window (`auth_rate_windows`, sql/0028): the
 * per-key cap of check 11 is then one count for the key across every process (issue 32), at no round trip of its
 * own. Only fresh nonces count: a replay stops at check 10 and never reaches check 11 (spec section 5's order).
 */
import { Clock, Context, Effect, Layer, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { makeGroupCommit } from "../db/GroupCommit.ts"
import { decodeRows, Int4, Nullable, Text, Timestamp } from "../db/RowSchemas.ts"
import { pollingLoop } from "../domain/Polling.ts"

/** Nonces per INSERT at most. */
export const nonceBatchSizeMax = 1_000
/** Expired nonces are purged this often; a nonce can never matter after its JWT's `exp`. */
export const noncePurgeIntervalMillis = 60_000
/** Nonces are kept this long past their JWT's `exp` by the database's clock (clock skew between processes). */
export const noncePurgeMarginSeconds = 300

interface Pending {
  readonly keyId: string
  readonly nonce: string
  readonly expiresAt: Date
  /** The Unix second (this process's Clock) whose rate window the request counts in. */
  readonly second: number
}

// Compiled once (db/RowSchemas.ts): the nonces a batch inserted, with their keys' standing, decoded at this edge.
const insertedNonces = decodeRows(
  Schema.Struct({
    key_id: Text,
    nonce: Text,
    window_position: Int4,
    key_status: Nullable(Text),
    tenant_status: Nullable(Text),
    subscription_expires_at: Nullable(Timestamp)
  }),
  "NonceStore.insertBatch"
)

/**
 * A key and its tenant as the statement that recorded the nonce saw them: what had committed at that instant, in
 * every process. ApiKeys' cache is cleared in other processes only when a notification arrives (milliseconds
 * later); reading the standing here, in the statement the nonce needs anyway, makes a revocation or a suspension
 * hold from its commit (spec 5: "A revoked key is rejected at once"; operator-interface.md) at no extra round trip.
 */
export interface KeyStanding {
  readonly keyActive: boolean
  readonly tenantActive: boolean
  readonly subscriptionExpiresAtMillis: number | undefined
}

export type NonceRecord =
  | { readonly fresh: false }
  /**
   * `standing` undefined: the key has no row (only in tests of the store alone). `windowPosition`: this request's
   * place (1, 2, ...) among its key's fresh requests in the current one-second window, counted over every process:
   * check 11 refuses it when that is above the key's cap.
   */
  | { readonly fresh: true; readonly standing: KeyStanding | undefined; readonly windowPosition: number }

export class NonceStore extends Context.Service<NonceStore, {
  /**
   * Fresh when the nonce is now recorded, with the key's standing as committed then and the request's place in its
   * key's rate window (at this process's Clock second); not when this key used it.
   */
  readonly record: (keyId: string, nonce: string, expiresAtSeconds: number) => Effect.Effect<NonceRecord>
}>()("coffer/NonceStore") {
  static readonly layer = Layer.effect(
    NonceStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The rows of `auth_rate_windows` are locked in key order (ORDER BY key_id), so two processes' batches that
      // share keys wait for each other instead of deadlocking. A request's place in its window: the window's count
      // after this statement, less this batch's fresh requests of the key, plus its own place among them.
      const insertBatch = (batch: ReadonlyArray<Pending>) =>
        sql`
          WITH batch AS (
            SELECT * FROM jsonb_to_recordset(${
          JSON.stringify(batch.map((p, ordinal) => ({
            key_id: p.keyId,
            nonce: p.nonce,
            expires_at: p.expiresAt.toISOString(),
            second: p.second,
            ordinal
          })))
        }::jsonb) AS batch (key_id text, nonce text, expires_at timestamptz, second bigint, ordinal integer)
          ), inserted AS (
            INSERT INTO auth_nonces (key_id, nonce, expires_at)
            SELECT key_id, nonce, expires_at FROM batch
            ON CONFLICT (key_id, nonce) DO NOTHING
            RETURNING key_id, nonce
          ), fresh AS (
            SELECT b.key_id, b.nonce, b.second,
              row_number() OVER (PARTITION BY b.key_id ORDER BY b.ordinal) AS place,
              count(*) OVER (PARTITION BY b.key_id) AS taken
            FROM batch b JOIN inserted i ON i.key_id = b.key_id AND i.nonce = b.nonce
          ), counted AS (
            INSERT INTO auth_rate_windows (key_id, window_second, requests)
            SELECT key_id, max(second), count(*) FROM fresh GROUP BY key_id ORDER BY key_id
            ON CONFLICT (key_id) DO UPDATE SET
              window_second = GREATEST(auth_rate_windows.window_second, EXCLUDED.window_second),
              requests = CASE WHEN EXCLUDED.window_second > auth_rate_windows.window_second THEN EXCLUDED.requests
                ELSE auth_rate_windows.requests + EXCLUDED.requests END
            RETURNING key_id, requests
          )
          SELECT f.key_id, f.nonce, (c.requests - f.taken + f.place)::int AS window_position,
            k.status AS key_status, t.status AS tenant_status, t.subscription_expires_at
          FROM fresh f JOIN counted c ON c.key_id = f.key_id
            LEFT JOIN api_keys k ON k.key_id = f.key_id LEFT JOIN tenants t ON t.id = k.tenant_id`.pipe(
          Effect.flatMap(insertedNonces)
        )

      const idOf = (item: Pending) => `${item.keyId}\u0000${item.nonce}`
      const recordOne = yield* makeGroupCommit<Pending, NonceRecord>({
        batchMax: nonceBatchSizeMax,
        write: (batch) =>
          Effect.gen(function*() {
            // Two requests with one nonce in the same batch: only the first may win.
            const firsts = new Map<string, Pending>()
            for (const item of batch) if (!firsts.has(idOf(item))) firsts.set(idOf(item), item)
            const inserted = yield* insertBatch([...firsts.values()])
            const fresh = new Map<string, (typeof inserted)[number]>(inserted.map((row) => [`${row.key_id}\u0000${row.nonce}`, row] as const))
            return batch.map((item): NonceRecord => {
              const row = fresh.get(idOf(item))
              if (firsts.get(idOf(item)) !== item || row === undefined) return { fresh: false }
              return {
                fresh: true,
                windowPosition: row.window_position,
                standing: row.key_status === null ? undefined : {
                  keyActive: row.key_status === "ACTIVE",
                  tenantActive: row.tenant_status === "ACTIVE",
                  subscriptionExpiresAtMillis: row.subscription_expires_at?.getTime()
                }
              }
            })
          }).pipe(Effect.orDie)
      })

      // On the path of every signed request: no span of its own.
      const record = (keyId: string, nonce: string, expiresAtSeconds: number) =>
        Effect.flatMap(Clock.currentTimeMillis, (nowMillis) =>
          recordOne({ keyId, nonce, expiresAt: new Date(expiresAtSeconds * 1000), second: Math.floor(nowMillis / 1000) }))

      return NonceStore.of({ record })
    })
  )
}

/**
 * Deletes expired nonces every `noncePurgeIntervalMillis`: a duty of the cluster, run by one process
 * (App.ts, entities/ClusterDuties.ts), not by every one.
 *
 * By the database's clock, with a margin, not this process's: with several processes whose clocks differ, a process
 * running ahead purged nonces that another, behind it, still accepts tokens for, and a token could be replayed within
 * the skew (issue 36). The margin covers skew between the processes that check tokens and the database; a row kept
 * longer costs nothing but its space.
 */
export const NoncePurge = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM auth_nonces WHERE expires_at < now() - ${`${noncePurgeMarginSeconds} seconds`}::interval`.pipe(
    Effect.catchCause((cause) => Effect.logWarning("nonce purge failed", cause)),
    Effect.repeat(Schedule.spaced(noncePurgeIntervalMillis)),
    pollingLoop,
    Effect.forkScoped
  )
}))
