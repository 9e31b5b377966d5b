/**
 * Rows decoded at the repository edge (src/db/RowSchemas.ts, architecture.md "Rows decoded at the repository
 * edge"): the column kinds match what the driver really returns, amounts come out as bigint, and a row that does not
 * match its schema is a defect naming the query (STYLE.md: decoding failures are defects at the repository edge).
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/db/Database.ts"
import {
  decodeFirstRow,
  decodeRows,
  decodeSingleRow,
  Int4,
  Int8,
  Nullable,
  Numeric,
  RowDecodeError,
  Text,
  Timestamp
} from "../../src/db/RowSchemas.ts"
import { rawAmountMax } from "../../src/domain/RawAmount.ts"

const Row = Schema.Struct({ id: Int8, amount: Numeric, fee: Nullable(Numeric), at: Timestamp, n: Int4, name: Text })
const rows = decodeRows(Row, "Test.rows")

/** The defect of a failed decode, which must be a RowDecodeError whose message names the query. */
const defectOf = <A>(effect: Effect.Effect<A>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(effect)
    assert.isTrue(Exit.isFailure(exit))
    if (!Exit.isFailure(exit)) throw new Error("unreachable")
    const defect = Cause.squash(exit.cause)
    assert.instanceOf(defect, RowDecodeError)
    return (defect as RowDecodeError).message
  })

describe("RowSchemas", () => {
  it.effect("Numeric decodes integer numeric text, signed, up to 2^256-1; fractions and junk are defects", () =>
    Effect.gen(function*() {
      const decode = decodeRows(Schema.Struct({ v: Numeric }), "Test.numeric")
      const decoded = yield* decode([{ v: "0" }, { v: "-7" }, { v: rawAmountMax.toString() }])
      assert.deepStrictEqual(decoded.map((row) => row.v), [0n, -7n, rawAmountMax])
      for (const bad of ["1.5", "NaN", "", "1e3", 12, null]) {
        assert.include(yield* defectOf(decode([{ v: bad }])), "Test.numeric", String(bad))
      }
    }))

  it.effect("a missing or mistyped column is a defect naming the query, never a cast", () =>
    Effect.gen(function*() {
      const good = { id: 1n, amount: "5", fee: null, at: new Date(0), n: 3, name: "x" }
      assert.deepStrictEqual(yield* rows([good]), [{ ...good, amount: 5n }])
      const { amount: _amount, ...missing } = good
      assert.include(yield* defectOf(rows([missing])), "rows of Test.rows do not match their schema")
      assert.include(yield* defectOf(rows([{ ...good, id: "1" }])), "Test.rows")
      assert.include(yield* defectOf(rows([{ ...good, at: new Date(Number.NaN) }])), "Test.rows")
    }))

  it.effect("first row: undefined when none; single row: a defect when none", () =>
    Effect.gen(function*() {
      assert.isUndefined(yield* decodeFirstRow(Row, "Test.first")([]))
      assert.include(yield* defectOf(decodeSingleRow(Row, "Test.single")([])), "Test.single returned no row")
    }))
})

layer(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!)).pipe(Layer.orDie))("RowSchemas on PostgreSQL", (it) => {
  it.effect("the column kinds match what @effect/sql-pg returns for bigint, numeric, timestamptz, integer, uuid", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const decoded = yield* sql`
        SELECT 9007199254740993::bigint AS id, ${rawAmountMax.toString()}::numeric(78, 0) AS amount,
          NULL::numeric AS fee, '2026-01-02T03:04:05.678Z'::timestamptz AS at, 7::integer AS n,
          '0190a0b0-0000-7000-8000-000000000001'::uuid AS name`.pipe(Effect.orDie, Effect.flatMap(rows))
      assert.deepStrictEqual(decoded, [{
        id: 9007199254740993n,
        amount: rawAmountMax,
        fee: null,
        at: new Date("2026-01-02T03:04:05.678Z"),
        n: 7,
        name: "0190a0b0-0000-7000-8000-000000000001"
      }])
    }))
})
