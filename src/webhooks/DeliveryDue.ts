/**
 * When a PENDING delivery is due, in one place for every query that asks (the claim, the sweeper, the round's next
 * wake, the API's `nextAt`): once `next_at` has passed and no live lease of its own holds it. Claims no longer lease
 * single deliveries (the round holds its endpoint's lease, sql/0034_delivery_endpoint_leases.sql); `leased_until`
 * (sql/0024_delivery_lease_column.sql) is still honoured for rows an older build leased. `next_at` keeps the due time.
 */
import type { SqlClient, Statement } from "effect/sql"

/** The moment the delivery `alias` is due: the later of `next_at` and its lease's end (`GREATEST` skips a null). */
export const dueTime = (sql: SqlClient.SqlClient, alias: string): Statement.Fragment =>
  sql.literal(`GREATEST(${alias}.next_at, ${alias}.leased_until)`)

/**
 * The delivery `alias` is due at `now`. Written as two conditions, not `dueTime <= now`, so the `next_at` one can
 * use the due index (`webhook_deliveries_endpoint_due_idx`).
 */
export const isDue = (sql: SqlClient.SqlClient, alias: string, now: Date): Statement.Fragment =>
  sql`${sql.literal(alias)}.next_at <= ${now}
    AND (${sql.literal(alias)}.leased_until IS NULL OR ${sql.literal(alias)}.leased_until <= ${now})`
