/**
 * The data a `TRANSACTION_*` delivery carries (src/transactions/TransactionEventData.ts): the transaction as it is
 * when the attempt renders it, read for the attempts that start together in one query, with each event answered
 * from its own row; another tenant's transaction, or none, falls back to the stored data; other events carry their
 * stored data without a read.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import type { Transaction } from "../../src/transactions/Transaction.ts"
import { latestTransactionEventData } from "../../src/transactions/TransactionEventData.ts"
import { TransactionRepository } from "../../src/transactions/TransactionRepository.ts"
import { EventDataRenderer, type StoredEvent } from "../../src/webhooks/EventData.ts"

const at = new Date("2026-11-26T12:00:00.000Z")
const transactionOf = (id: string, tenantId: string, status: Transaction["status"]): Transaction => ({
  id,
  tenantId,
  kind: "INTERNAL_TRANSFER",
  settlement: "OFF_CHAIN",
  status,
  subStatus: null,
  assetId: "ETH_SEPOLIA_ETH",
  networkKey: "ETH_SEPOLIA",
  amount: 5n,
  fee: 0n,
  networkFee: null,
  networkFeeAssetId: null,
  source: { walletId: null, address: null, customerRefId: null, uid: null },
  destination: { walletId: null, address: null, customerRefId: null, uid: null },
  txHash: null,
  outputIndex: null,
  blockHeight: null,
  blockHash: null,
  externalTxId: null,
  note: null,
  createdAt: at,
  updatedAt: at
})

const tenantA = "00000000-0000-7000-8000-00000000000a"
const tenantB = "00000000-0000-7000-8000-00000000000b"
const stored = [
  transactionOf("00000000-0000-7000-8000-000000000001", tenantA, "COMPLETED"),
  transactionOf("00000000-0000-7000-8000-000000000002", tenantB, "PENDING_AUTHORIZATION")
]

/** A repository that answers from `stored` and records every `findMany` it is asked. */
const recordingRepository = (queries: Array<ReadonlyArray<string>>) =>
  Layer.succeed(TransactionRepository)({
    find: () => Effect.die(new Error("renders read through findMany")),
    findMany: (ids) =>
      Effect.sync(() => {
        queries.push([...ids].sort())
        return stored.filter((transaction) => ids.includes(transaction.id))
      }),
    findByExternalTxId: () => Effect.die(new Error("not used")),
    list: () => Effect.die(new Error("not used"))
  })

const eventOf = (type: string, tenantId: string, subjectId: string): StoredEvent => ({
  id: `event-${type}-${subjectId}`,
  tenantId,
  type,
  subjectId,
  data: { stored: true },
  createdAt: at
})

describe("TRANSACTION_* event data", () => {
  it.effect("attempts starting together read once; each gets its own tenant's transaction, else the stored data", () =>
    Effect.gen(function*() {
      const queries: Array<ReadonlyArray<string>> = []
      const layer = latestTransactionEventData.pipe(
        Layer.provide(recordingRepository(queries)),
        Layer.provide(Catalog.layer),
        Layer.provide(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!))),
        Layer.provide(AppConfig.layerTest({ serviceEnv: "preproduction" })),
        Layer.orDie
      )
      const renderer = yield* Effect.provide(Effect.service(EventDataRenderer), layer)
      const [one, two] = stored
      const events = [
        // One event fanned out to three endpoints, a status update of the same transaction, another tenant's
        // transaction asked for under tenant A, a transaction that does not exist, and an event of another type.
        ...Array.from({ length: 3 }, () => eventOf("TRANSACTION_CREATED", tenantA, one!.id)),
        eventOf("TRANSACTION_STATUS_UPDATED", tenantA, one!.id),
        eventOf("TRANSACTION_STATUS_UPDATED", tenantA, two!.id),
        eventOf("TRANSACTION_CREATED", tenantA, "00000000-0000-7000-8000-000000000009"),
        eventOf("WALLET_CREATED", tenantA, "wallet-1")
      ]
      const rendered = yield* Effect.forEach(events, (event) => renderer.render(event), { concurrency: "unbounded" })
      assert.deepStrictEqual(queries, [[one!.id, two!.id, "00000000-0000-7000-8000-000000000009"].sort()])
      for (const data of rendered.slice(0, 4)) {
        assert.strictEqual((data as { readonly status: string }).status, "COMPLETED")
        assert.strictEqual((data as { readonly id: string }).id, one!.id)
      }
      assert.deepStrictEqual(rendered.slice(4), [{ stored: true }, { stored: true }, { stored: true }])

      // One at a time, each attempt reads for itself: nothing is kept between attempts.
      yield* renderer.render(events[0]!)
      yield* renderer.render(events[0]!)
      assert.lengthOf(queries, 3)
    }))
})
