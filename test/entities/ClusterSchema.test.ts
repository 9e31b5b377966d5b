/**
 * The retention job (src/entities/Cluster.ts, purgeProcessedMessages) deletes rows from effect/cluster's own tables,
 * for which the library has no API. This pins the columns it relies on to the tables the cluster layer actually
 * creates, so an upgrade of effect that changes them fails here rather than in production.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/db/Database.ts"
import { ClusterLayer } from "../../src/entities/Cluster.ts"
import { AppConfig } from "../../src/Config.ts"

/** What purgeProcessedMessages reads and deletes by: table -> column -> information_schema data_type. */
const columnsUsed: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  cluster_messages: { id: "bigint", processed: "boolean", request_id: "bigint" },
  cluster_replies: { request_id: "bigint" }
}

describe("cluster tables", () => {
  it.live("the tables effect/cluster creates have the columns and types the retention job's statements use", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ table_name: string; column_name: string; data_type: string }>`
        SELECT table_name, column_name, data_type FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name IN ('cluster_messages', 'cluster_replies')`
      const found = new Map(rows.map((row) => [`${row.table_name}.${row.column_name}`, row.data_type]))
      for (const [table, columns] of Object.entries(columnsUsed)) {
        for (const [column, type] of Object.entries(columns)) {
          assert.strictEqual(found.get(`${table}.${column}`), type, `${table}.${column}`)
        }
      }
    }).pipe(
      // The cluster layer runs SqlMessageStorage's migrations when it starts: the tables are the library's, not ours.
      Effect.provide(ClusterLayer.pipe(Layer.provide(AppConfig.layerTest()), Layer.provideMerge(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))))),
      Effect.orDie
    ))
})
