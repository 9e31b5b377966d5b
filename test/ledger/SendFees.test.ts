/**
 * Every unit that leaves one of our addresses is a journal entry (issue 35; docs/ledger.md "Costs paid on chain"):
 * the network fee of every send the chain books take from an address is booked once, when the send is recorded
 * final (`OutgoingSends.markFinal`): a withdrawal's payload as its NETWORK_FEE (unchanged), every other inclusion as
 * SEND_NETWORK_FEE on the send, charged to the tenant whose vault paid it. Held here over sends written directly on
 * a catalog network (the simulated chain does not sweep; the real-node flows are in test/sweeps/EvmSweeps.test.ts
 * and test/withdrawals/EvmFaults.test.ts): a native sweep paying its own fee, a GAS top-up, a token sweep paying
 * from the topped-up coin, a sweep included but reverted, a sweep whose second version (re-signed) was the one
 * included, and a withdrawal refused for good whose nonce fill was included. After each, the ledger audit passes
 * (its `sendFeesBooked` check finds each fee once), and the journal's fees equal what the chain books take.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { readChainBooks } from "../../src/ledger/ChainBooks.ts"
import { auditLedger, type LedgerAuditReport } from "../../src/ledger/LedgerAudit.ts"
import { type FinalInclusion, OutgoingSends, type SendPurpose } from "../../src/sending/OutgoingSends.ts"
import { makeTestAppLayer, opsClient, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { devnet, hotAddress, mine, tenantAccount, waitFor, walletOf, withdraw } from "../withdrawals/WithdrawalHelpers.ts"

const networkKey = "ETH_SEPOLIA"
const eth = "ETH_SEPOLIA_ETH"
const usdt = "ETH_SEPOLIA_USDT"
const gas = "0x00000000000000000000000000000000000000a3"
const milli = 10n ** 15n

const assertClean = (report: LedgerAuditReport) =>
  assert.deepStrictEqual(report.checks.flatMap((check) => check.discrepancies.map((found) => found.message)), [])

const hash = (n: number) => `0x${n.toString(16).padStart(64, "0")}`

/** The height every send here is included at: the watcher's cursor (the books' block), so the books count it. */
const booksBlock = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ height: string }>`SELECT height::text AS height FROM chain_cursors WHERE network_key = ${networkKey}`
  return BigInt(row?.height ?? "0")
}).pipe(Effect.orDie)

/** A `sweeps` row (the owner of a SWEEP or TOP_UP send) of `tenant`, already past its checks. */
const insertSweep = (tenant: TestTenant, row: {
  readonly kind: "SWEEP" | "TOP_UP"
  readonly walletId?: string
  readonly forSweepId?: string
  readonly from: string
  readonly to: string
  readonly assetId: string
  readonly amount: bigint
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* uuidV7
    yield* sql`
      INSERT INTO sweeps (id, tenant_id, network_key, asset_id, kind, for_sweep_id, from_address, to_address, amount,
        status, wallet_id, created_at, updated_at)
      VALUES (${id}, ${tenant.tenantId}, ${networkKey}, ${row.assetId}, ${row.kind}, ${row.forSweepId ?? null},
        ${row.from}, ${row.to}, ${row.amount.toString()}, 'COMPLETED', ${row.walletId ?? null}, ${new Date(0)}, ${new Date(0)})`
    return id
  }).pipe(Effect.orDie)

/** The owner's send, PENDING, with one version per fee maximum (a later one re-signed the same payload). */
const insertSend = (purpose: SendPurpose, ownerId: string, row: {
  readonly from: string
  readonly to: string
  readonly assetId: string
  readonly amount: bigint
  readonly key: unknown
  readonly versions: ReadonlyArray<{ readonly txHash: string; readonly feeMax: bigint }>
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* uuidV7
    yield* sql`
      INSERT INTO outgoing_sends (id, network_key, purpose, owner_id, from_address, to_address, asset_id, amount,
        signing_key, state, created_at)
      VALUES (${id}, ${networkKey}, ${purpose}, ${ownerId}, ${row.from}, ${row.to}, ${row.assetId},
        ${row.amount.toString()}, ${JSON.stringify(row.key)}::jsonb, 'PENDING', ${new Date(0)})`
    let version = 0
    for (const signed of row.versions) {
      yield* sql`
        INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, network_fee_max, signed_at)
        VALUES (${id}, ${++version}, 'PAYLOAD', ${networkKey}, ${signed.txHash}, '0x00', ${signed.feeMax.toString()}, ${new Date(0)})`
    }
  }).pipe(Effect.orDie)

/** Records the send of `ownerId` final, as its owner does: in one database transaction. */
const markFinal = (purpose: SendPurpose, ownerId: string, final: FinalInclusion) =>
  Effect.gen(function*() {
    const sends = yield* OutgoingSends
    const sql = yield* SqlClient.SqlClient
    const send = yield* sends.forOwner(purpose, ownerId)
    assert.isDefined(send, `no ${purpose} send of ${ownerId}`)
    yield* sql.withTransaction(sends.markFinal(send!, final)).pipe(Effect.orDie)
  })

const sendFeeEntries = (tenant: TestTenant) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ reference_id: string; amount: string }>`
      SELECT e.reference_id, p.amount::text AS amount FROM ledger_entries e
      JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
      WHERE e.kind = 'SEND_NETWORK_FEE' AND e.tenant_id = ${tenant.tenantId} AND a.kind = 'NETWORK_FEES'
      ORDER BY e.reference_id`
  }).pipe(Effect.orDie)

const sendIdOf = (purpose: SendPurpose, ownerId: string) =>
  Effect.gen(function*() {
    const sends = yield* OutgoingSends
    const send = yield* sends.forOwner(purpose, ownerId)
    return send!.id
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("every network fee a send paid is in the journal", (it) => {
  it.effect("sweeps (native, token after its GAS top-up, reverted on chain, re-signed) book their fees to the tenant's NETWORK_FEES; the audit passes; the journal's fees equal what the chain books take from the addresses", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const alice = yield* walletOf(tenant, "alice", networkKey)
      const hot = yield* hotAddress(networkKey)
      const height = yield* booksBlock
      const walletKey = { _tag: "Wallet", tenantIndex: 1, userIndex: 1, walletIndex: 0 }
      const final = (txHash: string, networkFee: bigint, succeeded = true): FinalInclusion => ({
        _tag: "Final",
        succeeded,
        txHash,
        height,
        networkFee,
        accountCost: 0n,
        kind: "PAYLOAD"
      })

      // A native sweep to HOT paying its own fee (21,000 × 2 gwei).
      const nativeSweep = yield* insertSweep(tenant, { kind: "SWEEP", walletId: alice.walletId, from: alice.address, to: hot, assetId: eth, amount: 1_000n * milli })
      yield* insertSend("SWEEP", nativeSweep, { from: alice.address, to: hot, assetId: eth, amount: 1_000n * milli, key: walletKey, versions: [{ txHash: hash(1), feeMax: 42_000n * 10n ** 9n }] })
      // A token sweep: the GAS wallet's exact top-up first, then the sweep burns it.
      const tokenSweep = yield* insertSweep(tenant, { kind: "SWEEP", walletId: alice.walletId, from: alice.address, to: hot, assetId: usdt, amount: 500_000_000n })
      const topUp = yield* insertSweep(tenant, { kind: "TOP_UP", forSweepId: tokenSweep, from: gas, to: alice.address, assetId: eth, amount: 130_000n * 10n ** 9n })
      yield* insertSend("TOP_UP", topUp, { from: gas, to: alice.address, assetId: eth, amount: 130_000n * 10n ** 9n, key: { _tag: "Gas", tenantIndex: 1 }, versions: [{ txHash: hash(2), feeMax: 42_000n * 10n ** 9n }] })
      yield* insertSend("SWEEP", tokenSweep, { from: alice.address, to: hot, assetId: usdt, amount: 500_000_000n, key: walletKey, versions: [{ txHash: hash(3), feeMax: 130_000n * 10n ** 9n }] })
      // Included but reverted: the amount stays, the fee is burned all the same.
      const revertedSweep = yield* insertSweep(tenant, { kind: "SWEEP", walletId: alice.walletId, from: alice.address, to: hot, assetId: eth, amount: 7n * milli })
      yield* insertSend("SWEEP", revertedSweep, { from: alice.address, to: hot, assetId: eth, amount: 7n * milli, key: walletKey, versions: [{ txHash: hash(4), feeMax: 50_000n }] })
      // Signed twice (the first expired unincluded, as TRON and SOL re-sign): the second, included, is what it cost.
      const resigned = yield* insertSweep(tenant, { kind: "SWEEP", walletId: alice.walletId, from: alice.address, to: hot, assetId: eth, amount: 3n * milli })
      yield* insertSend("SWEEP", resigned, { from: alice.address, to: hot, assetId: eth, amount: 3n * milli, key: walletKey, versions: [{ txHash: hash(5), feeMax: 9_000n }, { txHash: hash(6), feeMax: 11_000n }] })

      const fees = { native: 21_000n * 2n * 10n ** 9n, topUp: 21_000n * 10n ** 9n, token: 51_000n * 10n ** 9n, reverted: 23_000n, resigned: 10_500n }
      yield* markFinal("SWEEP", nativeSweep, final(hash(1), fees.native))
      yield* markFinal("TOP_UP", topUp, final(hash(2), fees.topUp))
      yield* markFinal("SWEEP", tokenSweep, final(hash(3), fees.token))
      yield* markFinal("SWEEP", revertedSweep, final(hash(4), fees.reverted, false))
      yield* markFinal("SWEEP", resigned, final(hash(6), fees.resigned))
      // Marked again (a second process, a retried pass): nothing more is booked.
      yield* markFinal("SWEEP", nativeSweep, final(hash(1), fees.native))

      const total = fees.native + fees.topUp + fees.token + fees.reverted + fees.resigned
      const expectedEntries = yield* Effect.forEach([
        ["SWEEP", nativeSweep, fees.native],
        ["TOP_UP", topUp, fees.topUp],
        ["SWEEP", tokenSweep, fees.token],
        ["SWEEP", revertedSweep, fees.reverted],
        ["SWEEP", resigned, fees.resigned]
      ] as const, ([purpose, owner, fee]) => Effect.map(sendIdOf(purpose, owner), (id) => ({ reference_id: id, amount: (-fee).toString() })))
      assert.deepStrictEqual(
        (yield* sendFeeEntries(tenant)).map((row) => ({ reference_id: row.reference_id, amount: row.amount })),
        expectedEntries.toSorted((a, b) => a.reference_id.localeCompare(b.reference_id))
      )
      assert.strictEqual(yield* tenantAccount(tenant, "NETWORK_FEES", eth), (-total).toString())
      const report = yield* auditLedger
      assertClean(report)
      assert.isAtLeast(report.checks.find((check) => check.check === "sendFeesBooked")!.examined, 5)

      // The chain books take the same fees from the addresses: HOT +amounts swept; the deposit address −amounts,
      // −fees, +the top-up; GAS −top-up −its fee. In the native coin the lines sum to minus the fees, which is
      // what the journal's NETWORK_FEES holds.
      const books = yield* readChainBooks([networkKey])
      const lineOf = (address: string, assetId: string) =>
        books.lines.find((line) => line.address === address && line.assetId === assetId)?.expected ?? 0n
      assert.strictEqual(lineOf(gas, eth), -(130_000n * 10n ** 9n + fees.topUp))
      assert.strictEqual(
        lineOf(alice.address, eth),
        -(1_000n * milli + 3n * milli) + 130_000n * 10n ** 9n - fees.native - fees.token - fees.reverted - fees.resigned
      )
      assert.strictEqual(lineOf(gas, eth) + lineOf(alice.address, eth) + (1_000n * milli + 3n * milli), -total)
      assert.strictEqual((lineOf(gas, eth) + lineOf(alice.address, eth) + 1_003n * milli).toString(), yield* tenantAccount(tenant, "NETWORK_FEES", eth))
    }))

  it.effect("a withdrawal refused for good whose EVM nonce a 0-value fill took: the fill's fee (paid by HOT) is booked on the send; the withdrawal books none", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const bob = yield* walletOf(tenant, "bob", networkKey)
      const ops = yield* opsClient
      yield* ops.devnet.transfer({ params: { networkKey }, payload: { to: bob.address, assetId: eth, amountRaw: 100n * milli } }).pipe(Effect.orDie)
      yield* mine(networkKey, 12)
      yield* devnet(networkKey, { broadcastFails: true })
      const refused = yield* withdraw(tenant, bob.walletId, eth, "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", 10n * milli, "refused")
      assert.strictEqual(refused.status, 202, refused.text)
      yield* waitFor(tenant, refused.json.transactionId, "FAILED", "BROADCAST_FAILED")
      yield* devnet(networkKey, { broadcastFails: false })

      // The simulated chain keeps no nonce gaps, so it never fills: the fill a real EVM node's refusal leads to
      // (sending/OutgoingSends.ts `fill`, test/withdrawals/EvmFaults.test.ts) is written as that code writes it.
      // One transaction, so the background confirmation never sees the made-up fill unsettled.
      const sql = yield* SqlClient.SqlClient
      const sendId = yield* sendIdOf("WITHDRAWAL", refused.json.transactionId)
      const fillFee = 21_000n * 10n ** 9n
      const height = yield* booksBlock
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`UPDATE outgoing_sends SET state = 'FILLING' WHERE id = ${sendId}`
        yield* sql`
          INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, network_fee_max, signed_at)
          VALUES (${sendId}, 2, 'FILL', ${networkKey}, ${hash(99)}, '0x00', ${(42_000n * 10n ** 9n).toString()}, ${new Date(0)})`
        yield* markFinal("WITHDRAWAL", refused.json.transactionId, {
          _tag: "Final",
          succeeded: true,
          txHash: hash(99),
          height,
          networkFee: fillFee,
          accountCost: 0n,
          kind: "FILL"
        })
      })).pipe(Effect.orDie)

      const [send] = yield* sql<{ state: string; network_fee: string }>`
        SELECT state, network_fee::text AS network_fee FROM outgoing_sends WHERE id = ${sendId}`.pipe(Effect.orDie)
      assert.deepStrictEqual([send!.state, send!.network_fee], ["REJECTED", fillFee.toString()])
      assert.deepStrictEqual((yield* sendFeeEntries(tenant)).map((row) => [row.reference_id, row.amount]), [[sendId, (-fillFee).toString()]])
      assert.strictEqual(yield* tenantAccount(tenant, "NETWORK_FEES", eth), (-fillFee).toString())
      assertClean(yield* auditLedger)
    }), { timeout: 60_000 })

  it.effect("a fee a send paid that the journal lacks is found by the audit (sendFeesBooked)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // A sweep's send recorded final without its entry, as before this check existed.
      const tenant = yield* provisionTenant()
      const carol = yield* walletOf(tenant, "carol", networkKey)
      const hot = yield* hotAddress(networkKey)
      const owner = yield* insertSweep(tenant, { kind: "SWEEP", walletId: carol.walletId, from: carol.address, to: hot, assetId: eth, amount: milli })
      yield* insertSend("SWEEP", owner, { from: carol.address, to: hot, assetId: eth, amount: milli, key: {}, versions: [{ txHash: hash(50), feeMax: 1_000n }] })
      const sendId = yield* sendIdOf("SWEEP", owner)
      yield* sql`UPDATE outgoing_sends SET state = 'CONFIRMED', included_tx_hash = ${hash(50)},
        included_height = 0, network_fee = 777 WHERE id = ${sendId}`.pipe(Effect.orDie)
      const report = yield* auditLedger
      const found = report.checks.find((check) => check.check === "sendFeesBooked")!.discrepancies.map((entry) => entry.message)
      assert.deepStrictEqual(found, [
        `sweep send ${sendId} (CONFIRMED) paid a network fee of 777 ${eth} (accounts created: 0) that the journal lacks ` +
        `(SEND_NETWORK_FEE: CHAIN ${eth} AVAILABLE 777, NETWORK_FEES ${eth} AVAILABLE -777)`
      ])
      assert.isFalse(report.ok)
    }))
})
