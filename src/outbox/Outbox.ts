/**
 * The event outbox: an event is written in the same database transaction as the state change it reports, so a
 * committed change always has its event and a rolled-back one never does. The webhook dispatcher (a later stage)
 * reads undispatched rows and fans them out to endpoints. `dedupeKey` makes a re-run handler harmless.
 *
 * A service over the application's SqlClient and Ids: a statement made with the client captured here still runs on
 * the caller's transaction connection (the client finds it in the calling fiber's context), so callers need not
 * provide anything by hand. A recorded event wakes the dispatcher once the caller's transaction commits
 * (OutboxSignal.ts says why not by a NOTIFY in that transaction).
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { decodeFirstRow, Text } from "../db/RowSchemas.ts"
import type { EventType } from "../webhooks/EventTypes.ts"
import { Ids } from "../domain/Ids.ts"
import { OutboxSignal } from "./OutboxSignal.ts"

export interface OutboxEvent {
  readonly tenantId: string
  readonly type: EventType
  readonly subjectId: string
  /** Distinguishes several events of one type about one subject (e.g. a status); the same key is stored once. */
  readonly dedupeKey: string
  readonly data: unknown
}

/**
 * An event as its `outbox_events` row, its id and time given: what a statement of fixed text inserts for many
 * events at once (`insertOutboxRows`; transfers/Movements.ts).
 */
export interface OutboxRow {
  readonly id: string
  readonly tenant_id: string
  readonly event_type: string
  readonly subject_id: string
  readonly dedupe_key: string
  readonly data: unknown
  readonly created_at: string
}

/**
 * The INSERT of `rows` (`Outbox.rowOf`) as a query for the caller's own statement: one JSON parameter, the same text
 * whatever their number, answering each new row's `id`; a dedupe key used before inserts nothing. With `subjectsIn`
 * (a query of subject ids, e.g. the ids a data-modifying `WITH` part changed), only the rows about those subjects.
 */
export const insertOutboxRows = (
  sql: SqlClient.SqlClient,
  rows: ReadonlyArray<OutboxRow>,
  subjectsIn?: Statement.Fragment
): Statement.Fragment =>
  sql`INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
    SELECT e.id, e.tenant_id, e.event_type, e.subject_id, e.dedupe_key, e.data, e.created_at
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      AS e(id uuid, tenant_id uuid, event_type text, subject_id text, dedupe_key text, data jsonb, created_at timestamptz)
    ${subjectsIn === undefined ? sql`` : sql`WHERE e.subject_id IN (${subjectsIn})`}
    ORDER BY e.id
    ON CONFLICT ON CONSTRAINT outbox_events_dedupe_key DO NOTHING
    RETURNING id`

// Compiled once (db/RowSchemas.ts): the inserted event's id, decoded at this edge.
const insertedEvent = decodeFirstRow(Schema.Struct({ id: Text }), "Outbox.recordReturningId")

export class Outbox extends Context.Service<Outbox, {
  /** Call inside the transaction of the change; returns whether the event is new. */
  readonly record: (event: OutboxEvent) => Effect.Effect<boolean>
  /**
   * `record` for many events in one statement (a block's deposits); answers how many were new. Call inside the
   * transaction of the changes.
   */
  readonly recordMany: (events: ReadonlyArray<OutboxEvent>) => Effect.Effect<number>
  /**
   * `record` for a caller that answers with the event's id (`POST /v1/webhooks/{id}/test`); undefined when the
   * dedupe key was used before. Call inside the transaction of the change.
   */
  readonly recordReturningId: (event: OutboxEvent) => Effect.Effect<string | undefined>
  /**
   * `record` as a statement to put in the caller's own (a data-modifying `WITH`), inserting only `when` it holds:
   * a change and its event in one statement, one round trip with no transaction around it. Answers the event's id
   * when it inserted it. The caller runs `committed` once its statement has run: building the fragment cannot
   * know when that is.
   */
  readonly recordWhen: (event: OutboxEvent, when: Statement.Fragment) => Effect.Effect<Statement.Fragment>
  /**
   * The event as its row, with a new id and the time now, for `insertOutboxRows` in the caller's own statement; the
   * caller runs `committed` once its statement has run.
   */
  readonly rowOf: (event: OutboxEvent) => Effect.Effect<OutboxRow>
  /**
   * Wakes the dispatcher when the caller's transaction commits (at once outside one): what `recordWhen`'s caller runs
   * after its statement. The other methods do it themselves.
   */
  readonly committed: Effect.Effect<void>
}>()("coffer/Outbox") {
  /** The outbox with its signal (provided too: the dispatcher built above it waits on the same one). */
  static readonly layer = Layer.effect(
    Outbox,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const ids = yield* Ids
      const signal = yield* OutboxSignal
      const committed = sql.afterCommit(signal.committed)

      const recordReturningId = (event: OutboxEvent): Effect.Effect<string | undefined> =>
        Effect.gen(function*() {
          const id = yield* ids.uuidV7For("outbox-event")
          const now = new Date(yield* Clock.currentTimeMillis)
          const row = yield* sql`
            INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
            VALUES (${id}, ${event.tenantId}, ${event.type}, ${event.subjectId}, ${event.dedupeKey},
              ${JSON.stringify(event.data)}::jsonb, ${now})
            ON CONFLICT ON CONSTRAINT outbox_events_dedupe_key DO NOTHING
            RETURNING id`.pipe(Effect.orDie, Effect.flatMap(insertedEvent))
          if (row !== undefined) yield* committed
          return row?.id
        })

      const recordWhen = (event: OutboxEvent, when: Statement.Fragment): Effect.Effect<Statement.Fragment> =>
        Effect.gen(function*() {
          const id = yield* ids.uuidV7For("outbox-event")
          const now = new Date(yield* Clock.currentTimeMillis)
          return sql`
            INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
            SELECT ${id}, ${event.tenantId}, ${event.type}, ${event.subjectId}, ${event.dedupeKey},
              ${JSON.stringify(event.data)}::jsonb, ${now}
            WHERE ${when}
            ON CONFLICT ON CONSTRAINT outbox_events_dedupe_key DO NOTHING
            RETURNING id`
        })

      const rowOf = (event: OutboxEvent): Effect.Effect<OutboxRow> =>
        Effect.gen(function*() {
          return {
            id: yield* ids.uuidV7For("outbox-event"),
            tenant_id: event.tenantId,
            event_type: event.type,
            subject_id: event.subjectId,
            dedupe_key: event.dedupeKey,
            data: event.data,
            created_at: new Date(yield* Clock.currentTimeMillis).toISOString()
          }
        })

      const record = (event: OutboxEvent): Effect.Effect<boolean> =>
        Effect.map(recordReturningId(event), (id) => id !== undefined)

      const recordMany = (events: ReadonlyArray<OutboxEvent>): Effect.Effect<number> =>
        Effect.gen(function*() {
          if (events.length === 0) return 0
          const now = new Date(yield* Clock.currentTimeMillis)
          const rows: Array<Record<string, unknown>> = []
          for (const event of events) {
            rows.push({
              id: yield* ids.uuidV7For("outbox-event"),
              tenant_id: event.tenantId,
              event_type: event.type,
              subject_id: event.subjectId,
              dedupe_key: event.dedupeKey,
              data: event.data
            })
          }
          // One JSON parameter whatever the number of events; ids are time-ordered, so the list keeps the events' order.
          const inserted = yield* sql`
            INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
            SELECT e.id, e.tenant_id, e.event_type, e.subject_id, e.dedupe_key, e.data, ${now}
            FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
              AS e(id uuid, tenant_id uuid, event_type text, subject_id text, dedupe_key text, data jsonb)
            ON CONFLICT ON CONSTRAINT outbox_events_dedupe_key DO NOTHING
            RETURNING id`.pipe(Effect.orDie)
          if (inserted.length > 0) yield* committed
          return inserted.length
        })

      return Outbox.of({ record, recordMany, recordReturningId, recordWhen, rowOf, committed })
    })
  ).pipe(Layer.provideMerge(OutboxSignal.layer))
}

/** `Outbox.record` for code that has the service in its context (tests). */
export const recordEvent = (event: OutboxEvent): Effect.Effect<boolean, never, Outbox> =>
  Outbox.use((outbox) => outbox.record(event))
