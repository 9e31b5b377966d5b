/**
 * Keyset paging by id: each row of a condition visited once, in pages, however many there are (a row that leaves
 * the condition meanwhile is skipped, one that enters behind the cursor waits for the next pass). The supervisors'
 * asks at start use it.
 */
import { Effect } from "effect"
import { SqlClient, type Statement } from "effect/sql"

/**
 * Runs `page` with the cursor to add to its condition (nothing for the first page, then `AND id > <last id>`) until
 * it answers fewer than `pageSize` rows, handing each page to `each`; answers how many rows there were. `page` must
 * order by id and take at most `pageSize`.
 */
export const forEachIdPage = <E, R>(
  pageSize: number,
  page: (afterCursor: Statement.Fragment) => Effect.Effect<ReadonlyArray<{ readonly id: string }>, E, R>,
  each: (rows: ReadonlyArray<{ readonly id: string }>) => Effect.Effect<void, E, R>
): Effect.Effect<number, E, R | SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    let after: string | undefined
    let total = 0
    for (;;) {
      const rows = yield* page(after === undefined ? sql`` : sql`AND id > ${after}`)
      yield* each(rows)
      total += rows.length
      if (rows.length < pageSize) return total
      after = rows[rows.length - 1]!.id
    }
  })
