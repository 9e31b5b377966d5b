/**
 * A read that another statement can carry: the columns it adds to a SELECT list and how its value is made from the
 * row. State that is read on every use and never cached (the operator's switches, the prices, the tenants' count for
 * the GAS wallets) is each one query; a request that needs several of them, with a row of its own, reads them all in
 * that row's statement instead (Transfers.ts, the payer's read of a withdrawal): one round trip instead of four, and
 * each value exactly what its own query would have read at that moment.
 *
 * Each part names its columns with its own prefix so that parts and the host's columns never collide, and decodes only
 * those columns (a Struct ignores the others).
 */
import { Effect } from "effect"
import type { SqlClient, Statement } from "effect/sql"

export interface ReadPart<A> {
  /** Comma-separated `expression AS name` items, each a scalar subquery or expression that needs no FROM of the host. */
  readonly columns: Statement.Fragment
  /** The part's value from a row that holds its columns; a row that does not match is a defect (db/RowSchemas.ts). */
  readonly decode: (row: unknown) => Effect.Effect<A>
}

/** The part read on its own: `SELECT <columns>`, one row. */
export const readAlone = <A>(sql: SqlClient.SqlClient, part: ReadPart<A>): Effect.Effect<A> =>
  sql`SELECT ${part.columns}`.pipe(Effect.orDie, Effect.flatMap((rows) => part.decode(rows[0])))

/** Values of parts, in order. */
export type PartValues<Parts extends ReadonlyArray<ReadPart<unknown>>> = {
  readonly [K in keyof Parts]: Parts[K] extends ReadPart<infer A> ? A : never
}

/** The parts' values from one row that holds all their columns. */
export const decodeParts = <const Parts extends ReadonlyArray<ReadPart<unknown>>>(
  parts: Parts,
  row: unknown
): Effect.Effect<PartValues<Parts>> =>
  Effect.forEach(parts, (part) => part.decode(row)) as unknown as Effect.Effect<PartValues<Parts>>

/** Several parts in one statement: `SELECT <a's columns>, <b's columns>, ...`. */
export const readTogether = <const Parts extends ReadonlyArray<ReadPart<unknown>>>(
  sql: SqlClient.SqlClient,
  ...parts: Parts
): Effect.Effect<PartValues<Parts>> =>
  sql`SELECT ${sql.csv(parts.map((part) => part.columns))}`.pipe(
    Effect.orDie,
    Effect.flatMap((rows) => decodeParts(parts, rows[0]))
  )
