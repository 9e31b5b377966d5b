/**
 * The one transaction-record insert (src/transactions/NewTransaction.ts) that every kind is created by: each field
 * lands in its column and reads back as the transaction object (spec section 2, "Transaction object"); a deposit
 * seen again is the same record moved to its new block unless it failed (decisions.md, Deposits: "seeing it again
 * never creates a second record"); any other duplicate is refused by the database, not merged.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { insertTransactions, type NewTransaction, transactionAsInserted } from "../../src/transactions/NewTransaction.ts"
import { TransactionRepository } from "../../src/transactions/TransactionRepository.ts"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import { walletOf } from "../withdrawals/WithdrawalHelpers.ts"

const eth = "ETH_SEPOLIA_ETH"

layer(makeTestAppLayer(), { excludeTestServices: true })("one transaction-record insert", (it) => {
  it.effect("every field reads back, as transactionAsInserted says; a deposit seen again moves, a failed one stays; a duplicate transfer is refused", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repository = yield* TransactionRepository
      const tenant = yield* provisionTenant()
      const payer = yield* walletOf(tenant, "payer", "ETH_SEPOLIA")
      const payee = yield* walletOf(tenant, "payee", "ETH_SEPOLIA")
      const users = new Map((yield* sql<{ id: string; user_id: string }>`
        SELECT id, user_id FROM wallets WHERE id IN (${payer.walletId}, ${payee.walletId})`).map((row) => [row.id, row.user_id]))
      const at = new Date("2026-01-02T03:04:05.678Z")

      const transfer: NewTransaction = {
        id: yield* uuidV7,
        tenantId: tenant.tenantId,
        kind: "INTERNAL_TRANSFER",
        settlement: "OFF_CHAIN",
        status: "PENDING_AUTHORIZATION",
        assetId: eth,
        networkKey: "ETH_SEPOLIA",
        amount: 2n ** 200n,
        fee: 7n,
        source: { walletId: payer.walletId, address: payer.address, userId: users.get(payer.walletId)! },
        destination: { walletId: payee.walletId, address: payee.address, userId: users.get(payee.walletId)! },
        externalTxId: "ext-1",
        note: "rent",
        at
      }
      const deposit: NewTransaction = {
        id: yield* uuidV7,
        tenantId: tenant.tenantId,
        kind: "DEPOSIT",
        settlement: "ON_CHAIN",
        status: "CONFIRMING",
        assetId: eth,
        networkKey: "ETH_SEPOLIA",
        amount: 5n,
        source: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" },
        destination: { walletId: payee.walletId, address: payee.address, userId: users.get(payee.walletId)! },
        txHash: "0xabc",
        outputIndex: 3,
        blockHeight: 41n,
        blockHash: "0xb41",
        at
      }
      const inserted = yield* insertTransactions([transfer, deposit], { onConflict: "depositSeenAgain" })
      assert.deepStrictEqual([...inserted].sort((a, b) => a.id.localeCompare(b.id)), [
        { id: transfer.id, inserted: true },
        { id: deposit.id, inserted: true }
      ])

      const read = (yield* repository.find(tenant.tenantId, transfer.id))!
      assert.deepStrictEqual(
        [read.kind, read.settlement, read.status, read.subStatus, read.assetId, read.networkKey, read.amount, read.fee],
        ["INTERNAL_TRANSFER", "OFF_CHAIN", "PENDING_AUTHORIZATION", null, eth, "ETH_SEPOLIA", 2n ** 200n, 7n]
      )
      assert.deepStrictEqual([read.source.walletId, read.source.address, read.source.customerRefId], [payer.walletId, payer.address, "payer"])
      assert.deepStrictEqual(
        [read.destination.walletId, read.destination.address, read.destination.customerRefId],
        [payee.walletId, payee.address, "payee"]
      )
      assert.deepStrictEqual([read.externalTxId, read.note, read.txHash, read.outputIndex, read.blockHeight], ["ext-1", "rent", null, null, null])
      assert.deepStrictEqual([read.createdAt.getTime(), read.updatedAt.getTime()], [at.getTime(), at.getTime()])
      // What a creation in one statement reports before the row exists (its TRANSACTION_CREATED event) is the row read.
      const partyUsers = new Map((yield* sql<{ id: string; customer_ref_id: string; uid: string }>`
        SELECT id, customer_ref_id, uid FROM users WHERE tenant_id = ${tenant.tenantId}`).map((row) =>
          [row.id, { customerRefId: row.customer_ref_id, uid: row.uid }]
        ))
      assert.deepStrictEqual(
        transactionAsInserted(transfer, {
          source: partyUsers.get(transfer.source.userId!),
          destination: partyUsers.get(transfer.destination.userId!)
        }),
        read
      )
      assert.throws(() => transactionAsInserted(transfer, { source: partyUsers.get(transfer.source.userId!) }))

      const seen = (yield* repository.find(tenant.tenantId, deposit.id))!
      assert.deepStrictEqual(
        [seen.kind, seen.status, seen.fee, seen.source.address, seen.destination.walletId, seen.txHash, seen.outputIndex, seen.blockHeight, seen.blockHash],
        ["DEPOSIT", "CONFIRMING", null, deposit.source.address, payee.walletId, "0xabc", 3, 41n, "0xb41"]
      )

      // Seen again in another block (a reorganization re-mined it): the same record, now in block 42.
      const later = new Date(at.getTime() + 60_000)
      const again = { ...deposit, id: yield* uuidV7, blockHeight: 42n, blockHash: "0xb42", at: later }
      assert.deepStrictEqual(yield* insertTransactions([again], { onConflict: "depositSeenAgain" }), [{ id: deposit.id, inserted: false }])
      const moved = (yield* repository.find(tenant.tenantId, deposit.id))!
      assert.deepStrictEqual([moved.blockHeight, moved.blockHash, moved.updatedAt.getTime(), moved.createdAt.getTime()], [42n, "0xb42", later.getTime(), at.getTime()])
      assert.isUndefined(yield* repository.find(tenant.tenantId, again.id))

      // A failed (dropped) deposit is not revived by seeing it again.
      yield* sql`UPDATE transactions SET status = 'FAILED', sub_status = 'DROPPED' WHERE id = ${deposit.id}`
      assert.deepStrictEqual(yield* insertTransactions([{ ...again, blockHeight: 43n, blockHash: "0xb43" }], { onConflict: "depositSeenAgain" }), [])
      assert.strictEqual((yield* repository.find(tenant.tenantId, deposit.id))!.blockHeight, 42n)

      // Any other duplicate (here the tenant's externalTxId) is the database's refusal, never a merge.
      const duplicate = yield* Effect.flip(insertTransactions([{ ...transfer, id: yield* uuidV7 }]))
      assert.strictEqual(duplicate._tag, "SqlError")
      const [count] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM transactions WHERE tenant_id = ${tenant.tenantId}`
      assert.strictEqual(count!.n, 2)
    }))
})
