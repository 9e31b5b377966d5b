/**
 * Rows decoded at the repository edge: each query's rows go through a Schema of the columns it selects, so amounts
 * arrive as `bigint`, timestamps as `Date`, and a column that changes type or goes missing fails here, once, naming
 * the query, instead of as a `BigInt(undefined)` three modules away.
 *
 * What @effect/sql-pg 4.0.5 hands back (binary protocol, checked against PostgreSQL 18): `numeric` as a decimal
 * string (also `sum(...)` of numerics, and anything cast `::text`), `bigint`/`count(*)` as a JS `bigint`, `integer`
 * as a number, `timestamptz` as a `Date`, `uuid` as a string, `jsonb` parsed.
 *
 * A row that does not match is a defect (the schema and the code disagree), never a request error: the decoders
 * below die with the query's name and the schema's own description of what was wrong. Decoders are compiled once,
 * where the query is defined (module level or layer construction), never per call: requests that read rows on the
 * hot path (transfers, signed requests) pay for the check, not for building it.
 */
import { Effect, Result, Schema } from "effect"

/**
 * An integer `numeric` column (raw amounts, balances, fees; also an int8 selected `::text`). Signed: a balance can be
 * negative after a deposit reversal (decisions.md, Deposits). Accepts exactly `-?[0-9]+` (test/db/RowSchemas.test.ts).
 */
export const Numeric = Schema.BigIntFromString.annotate({ description: "integer numeric column (text) as bigint" })

/** A `bigint` (int8) column, which the driver already gives as a JS bigint: identity ids, heights, counts. */
export const Int8 = Schema.BigInt

/** An `integer` (int4) column. */
export const Int4 = Schema.Int

/** A `timestamptz` column; the driver gives a `Date`, and an invalid one (infinity) fails. */
export const Timestamp = Schema.Date

/** A `uuid` or `text` column. */
export const Text = Schema.String

/** A nullable column of the given kind. */
export const Nullable = Schema.NullOr

/** Thrown (as a defect) when a row does not match its schema. */
export class RowDecodeError extends Error {
  override readonly name = "RowDecodeError"
}

const decoded = <A>(query: string, result: Result.Result<A, Schema.SchemaError>): Effect.Effect<A> =>
  Result.isSuccess(result)
    ? Effect.succeed(result.success)
    : Effect.die(new RowDecodeError(`rows of ${query} do not match their schema: ${result.failure.message}`, {
      cause: result.failure
    }))

/**
 * `(rows) => Effect<decoded rows>` for one query, compiled once: `sql<...>` results piped through it arrive typed.
 * `query` names the query in the defect ("Ledger.walletBalances").
 */
export const decodeRows = <S extends Schema.ConstraintDecoder<unknown>>(row: S, query: string) => {
  const decode = Schema.decodeUnknownResult(Schema.Array(row))
  return (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>> => decoded(query, decode(rows))
}

/** As `decodeRows`, for a query whose first row (if any) is all that is wanted: `undefined` when there is none. */
export const decodeFirstRow = <S extends Schema.ConstraintDecoder<unknown>>(row: S, query: string) => {
  const decode = Schema.decodeUnknownResult(row)
  return (rows: ReadonlyArray<unknown>): Effect.Effect<S["Type"] | undefined> =>
    rows.length === 0 ? Effect.succeed(undefined) : decoded(query, decode(rows[0]))
}

/** One row already taken from its result (db/ReadPart.ts: a part's columns in a host's row); undefined is a defect. */
export const decodeRow = <S extends Schema.ConstraintDecoder<unknown>>(row: S, query: string) => {
  const decode = Schema.decodeUnknownResult(row)
  return (value: unknown): Effect.Effect<S["Type"]> =>
    value === undefined ? Effect.die(new RowDecodeError(`${query} returned no row`)) : decoded(query, decode(value))
}

/** As `decodeFirstRow`, for a query that must return a row (an INSERT … RETURNING, a row known to exist). */
export const decodeSingleRow = <S extends Schema.ConstraintDecoder<unknown>>(row: S, query: string) => {
  const decodeOne = decodeRow(row, query)
  return (rows: ReadonlyArray<unknown>): Effect.Effect<S["Type"]> => decodeOne(rows[0])
}
