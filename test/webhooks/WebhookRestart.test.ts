/**
 * PostgreSQL is the source of truth of delivery (spec 6, "at least once"): a process killed with -9 in the middle
 * of an attempt loses nothing. Its claim on the delivery expires, and the next process's sweeper finds the
 * delivery due again and sends it; the receiver sees it twice and de-duplicates by event id.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as Database from "../../src/db/Database.ts"
import { Entropy } from "../../src/domain/Entropy.ts"
import { Ids, uuidV7 } from "../../src/domain/Ids.ts"
import { Outbox, recordEvent } from "../../src/outbox/Outbox.ts"
import { eventually, makeReceiver } from "./fixtures/Receiver.ts"
import { serviceStack } from "./fixtures/ServiceStack.ts"

const deliveryOf = (endpointId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ status: string; attempt: number; next_at: Date | null }>`
      SELECT status, attempt, next_at FROM webhook_deliveries WHERE endpoint_id = ${endpointId}`.pipe(Effect.orDie)
    return row
  })

describe("webhook delivery across a kill -9", () => {
  it.live("an attempt in flight when the process dies is sent again by the next process, once delivered", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver((_, index) => index === 0 ? "hang" : 200)
      const sql = yield* SqlClient.SqlClient
      const now = new Date(yield* Clock.currentTimeMillis)
      const tenantId = yield* uuidV7
      const endpointId = yield* uuidV7
      yield* sql`INSERT INTO tenants (id, name, networks, created_at) VALUES (${tenantId}, 'restart', '{}', ${now})`
      yield* sql`INSERT INTO webhook_endpoints (id, tenant_id, url, status, active_since, created_at, updated_at)
        VALUES (${endpointId}, ${tenantId}, ${receiver.url}, 'ACTIVE', ${now}, ${now}, ${now})`
      yield* recordEvent({ tenantId, type: "WALLET_CREATED", subjectId: "w", dedupeKey: "created", data: { walletId: "w" } })

      const script = fileURLToPath(new URL("./fixtures/deliver-and-hang.ts", import.meta.url))
      const child = spawn(process.execPath, [script], { env: { ...process.env }, stdio: ["ignore", "pipe", "inherit"] })
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      yield* receiver.waitForRequests(1, 30_000)
      child.kill("SIGKILL")
      yield* Effect.promise(() => exited)

      const lost = yield* deliveryOf(endpointId)
      assert.strictEqual(lost!.status, "PENDING")
      assert.strictEqual(lost!.attempt, 0, "the attempt that died is not counted")

      // The next process.
      const delivered = yield* eventually(
        "redelivery by the next process",
        Effect.map(deliveryOf(endpointId), (row) => row?.status === "DELIVERED" ? row : undefined),
        45_000
      ).pipe(Effect.provide(serviceStack))
      assert.strictEqual(delivered.attempt, 1)
      assert.strictEqual(receiver.requests.length, 2)
      assert.strictEqual(receiver.requests[0]!.headers["x-coffer-event-id"], receiver.requests[1]!.headers["x-coffer-event-id"])
    }).pipe(
      Effect.provide(Outbox.layer.pipe(Layer.provideMerge(Ids.layer), Layer.provideMerge(Entropy.layer))),
      Effect.provide(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
      Effect.orDie
    ), 90_000)
})
