/**
 * Withdrawals on a Solana node interface (docs/sol.md, docs/sending.md; decisions.md "Sending on real networks"): the
 * whole service with SOL_DEVNET on the JSON-RPC front over litesvm (test/support/SolanaRpcFront.ts; each transaction
 * lands in a block of its own, `finalized` is the head minus 31). The platform HOT address is funded on the node with
 * SOL and the catalog's USDC mint.
 *
 * Held here: SOL and SPL withdrawals reach COMPLETED once finalized, with the recipient paid and networkFeeRaw =
 * meta.fee; an SPL withdrawal to a wallet without a token account creates it (its rent leaves HOT beside the fee); a
 * transfer that fails on chain (HOT's tokens gone between signature and inclusion) is FAILED / REVERTED_ON_CHAIN with
 * the funds back and the burned fee booked; a transaction the leader never took is signed again (same payload, a
 * fresh blockhash) only once its blockhash expired for good (lastValidBlockHeight below the finalized height), and the
 * withdrawal keeps one record showing the included hash (decisions.md: TRON and SOL re-sign only after expiry);
 * identical withdrawals signed on one latest blockhash are still distinct transactions, each paid (docs/sol.md); a
 * reorganization that drops the withdrawal's block before finality gets the same bytes broadcast again.
 */
import { assert, layer } from "@effect/vitest"
import { Keypair } from "@solana/web3.js"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { Catalog } from "../../src/catalog/Catalog.ts"
import { auditLedger } from "../../src/ledger/LedgerAudit.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { freePortSync } from "../support/AnvilBinary.ts"
import { blockhashValidBlocks, finalityDepth, type SolanaRpcFront, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"
import { makeTestAppLayer, provisionTenant, type TestTenant } from "../support/TestApp.ts"
import { balance, entryCount, fund, getTransaction, hotAddress, tenantAccount, waitFor, walletOf, withdraw } from "./WithdrawalHelpers.ts"

const port = freePortSync()
let front: SolanaRpcFront
const sol = "SOL_DEVNET_SOL"
const usdc = "SOL_DEVNET_USDC"
let mint: string

beforeAll(async () => {
  front = await startSolanaRpcFront({ port })
})
afterAll(() => front.close())

/** Runs the confirmation check now rather than waiting for the background loop (both are safe together). */
const confirm = Effect.gen(function*() {
  const processor = yield* WithdrawalProcessor
  return yield* processor.confirm("SOL_DEVNET")
})

/** Makes the withdrawal's block final (31 blocks on it) and checks it. */
const finalize = (tenant: TestTenant, id: string, status = "COMPLETED", subStatus: string | null = null) =>
  Effect.gen(function*() {
    front.mine(finalityDepth + 1)
    yield* confirm
    return yield* waitFor(tenant, id, status, subStatus)
  })

const fundedWallet = (tenant: TestTenant, name: string, assetId: string, amount: bigint) =>
  Effect.gen(function*() {
    const wallet = yield* walletOf(tenant, name, "SOL_DEVNET")
    yield* fund(tenant, wallet.walletId, assetId, amount)
    return wallet
  })

const versions = (withdrawalId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ tx_hash: string; raw: string }>`
      SELECT v.tx_hash, v.raw FROM outgoing_versions v JOIN outgoing_sends s ON s.id = v.send_id
      WHERE s.owner_id = ${withdrawalId} ORDER BY v.version`
  })

const recipient = () => Keypair.generate().publicKey.toBase58()

layer(
  makeTestAppLayer({ chainRpcUrls: { SOL_DEVNET: Redacted.make(`http://127.0.0.1:${port}`) } }),
  { excludeTestServices: true, timeout: 120_000 }
)("withdrawals on a Solana node interface (litesvm behind a JSON-RPC front)", (it) => {
  it.effect("setup: HOT funded with SOL and the catalog's USDC on the node", () =>
    Effect.gen(function*() {
      const hot = yield* hotAddress("SOL_DEVNET")
      mint = (yield* Catalog).asset(usdc)!.contract!
      front.createMint(mint, 6)
      front.paySol(hot, 100_000_000_000n)
      front.payToken(hot, mint, 10n ** 12n)
      assert.strictEqual(front.tokenAmount(hot, mint), 10n ** 12n)
    }))

  it.effect("SOL: COMPLETED when finalized, the recipient paid, HOT debited by amount + meta.fee, networkFeeRaw = meta.fee", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("SOL_DEVNET")
      const wallet = yield* fundedWallet(tenant, "sol-payer", sol, 2_000_000_000n)
      const to = recipient()
      const amount = 250_000_000n
      const hotBefore = front.lamports(hot)
      const created = yield* withdraw(tenant, wallet.walletId, sol, to, amount, "sol-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      const landed = front.blockOf(confirming.txHash)
      assert.isDefined(landed, "the front's chain holds the transaction")
      assert.isNull(landed!.err)
      const done = yield* finalize(tenant, created.json.withdrawalId)
      assert.strictEqual(done.txHash, confirming.txHash)
      assert.strictEqual(done.networkFeeRaw, "5000")
      assert.strictEqual(done.networkFeeAssetId, sol)
      assert.strictEqual(front.lamports(to), amount)
      assert.strictEqual(hotBefore - front.lamports(hot), amount + 5_000n)
      const payer = yield* balance(tenant, wallet.walletId, sol)
      assert.strictEqual(payer.frozen, "0")
      assert.strictEqual(BigInt(payer.available), 2_000_000_000n - amount - BigInt(done.feeRaw))
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "NETWORK_FEE"), 1)
    }))

  it.effect("SPL to a wallet without a token account: the withdrawal creates it; COMPLETED with networkFeeRaw = meta.fee, the rent paid by HOT", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("SOL_DEVNET")
      const wallet = yield* fundedWallet(tenant, "usdc-payer", usdc, 500_000_000n)
      const to = recipient()
      const amount = 120_000_000n
      const [hotLamports, hotTokens] = [front.lamports(hot), front.tokenAmount(hot, mint)]
      const created = yield* withdraw(tenant, wallet.walletId, usdc, to, amount, "usdc-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      const done = yield* finalize(tenant, created.json.withdrawalId)
      assert.strictEqual(done.txHash, confirming.txHash)
      assert.strictEqual(done.networkFeeRaw, "5000")
      assert.strictEqual(front.tokenAmount(to, mint), amount)
      assert.strictEqual(hotTokens - front.tokenAmount(hot, mint), amount)
      // The new token account's rent-exempt minimum (165 bytes: 2,039,280 lamports) left HOT beside the fee: a cost
      // the chain does not report as a fee (docs/sol.md, "Traps").
      assert.strictEqual(hotLamports - front.lamports(hot), 5_000n + 2_039_280n)
      // Both in the journal (docs/ledger.md "Costs paid on chain"): the fee as the withdrawal's NETWORK_FEE, the rent
      // on its send (SEND_NETWORK_FEE), both to the tenant's NETWORK_FEES; the send records what it created.
      const sql = yield* SqlClient.SqlClient
      const [send] = yield* sql<{ account_cost: string; booked: string }>`
        SELECT s.account_cost::text AS account_cost, (SELECT p.amount::text FROM ledger_entries e
          JOIN ledger_postings p ON p.entry_id = e.id JOIN ledger_accounts a ON a.id = p.account_id
          WHERE e.kind = 'SEND_NETWORK_FEE' AND e.reference_id = s.id AND a.kind = 'NETWORK_FEES') AS booked
        FROM outgoing_sends s WHERE s.owner_id = ${created.json.withdrawalId}`
      assert.deepStrictEqual([send!.account_cost, send!.booked], ["2039280", "-2039280"])
      assert.strictEqual(yield* tenantAccount(tenant, "NETWORK_FEES", sol), (-(5_000n + 2_039_280n)).toString())
      assert.deepStrictEqual((yield* auditLedger).checks.find((check) => check.check === "sendFeesBooked")!.discrepancies, [])

      // A second withdrawal to the same wallet: its token account exists, HOT pays the fee only.
      const again = yield* withdraw(tenant, wallet.walletId, usdc, to, amount, "usdc-2")
      assert.strictEqual(again.status, 202, again.text)
      const lamportsBefore = front.lamports(hot)
      yield* waitFor(tenant, again.json.withdrawalId, "CONFIRMING")
      yield* finalize(tenant, again.json.withdrawalId)
      assert.strictEqual(front.tokenAmount(to, mint), 2n * amount)
      assert.strictEqual(lamportsBefore - front.lamports(hot), 5_000n)
    }))

  it.effect("HOT's tokens gone between signature and inclusion: included with meta.err, FAILED / REVERTED_ON_CHAIN, funds back, the burned fee booked", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const hot = yield* hotAddress("SOL_DEVNET")
      const wallet = yield* fundedWallet(tenant, "failing", usdc, 300_000_000n)
      // The leader drops what it gets: the signed transaction waits, unincluded, while HOT is emptied.
      front.setDropping(true)
      const created = yield* withdraw(tenant, wallet.walletId, usdc, recipient(), 100_000_000n, "failing-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      assert.isUndefined(front.blockOf(confirming.txHash))
      const tokens = front.tokenAmount(hot, mint)
      front.setTokenAmount(hot, mint, 0n)
      front.setDropping(false)
      // The check finds the transaction unknown and broadcasts the same bytes again: they land and fail. The
      // background loop may hold the broadcast claim when this check runs (it then leaves the send to that loop), so
      // the check runs until the bytes have landed.
      for (let round = 0; front.blockOf(confirming.txHash) === undefined && round < 50; round++) {
        yield* confirm
        if (front.blockOf(confirming.txHash) === undefined) {
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
        }
      }
      const landed = front.blockOf(confirming.txHash)
      assert.isDefined(landed, "the same bytes were broadcast again and included")
      assert.deepStrictEqual(landed!.err, { InstructionError: [1, { Custom: 1 }] }, "spl-token InsufficientFunds in TransferChecked")
      const failed = yield* finalize(tenant, created.json.withdrawalId, "FAILED", "REVERTED_ON_CHAIN")
      front.setTokenAmount(hot, mint, tokens)
      assert.strictEqual(failed.txHash, confirming.txHash)
      assert.strictEqual(failed.networkFeeRaw, "5000")
      assert.deepStrictEqual(yield* balance(tenant, wallet.walletId, usdc), { available: "300000000", frozen: "0" })
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "WITHDRAWAL_RELEASE"), 1)
      assert.strictEqual(yield* entryCount(created.json.withdrawalId, "NETWORK_FEE"), 1)
    }))

  it.effect("never taken by a leader: not signed again while its blockhash may still land; once expired, the same payload on a fresh blockhash, one record", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "expiring", sol, 1_000_000_000n)
      const to = recipient()
      const amount = 100_000_000n
      front.setDropping(true)
      const created = yield* withdraw(tenant, wallet.walletId, sol, to, amount, "expiring-1")
      assert.strictEqual(created.status, 202, created.text)
      const first = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      // 150 blocks on: the blockhash is still valid in the head's bank (lastValidBlockHeight not passed).
      front.mine(blockhashValidBlocks)
      yield* confirm
      assert.strictEqual((yield* versions(created.json.withdrawalId)).length, 1, "not signed again before expiry")
      // Past lastValidBlockHeight in the finalized bank too: no block can take the first bytes any more.
      front.mine(finalityDepth + 1)
      front.setDropping(false)
      yield* confirm
      const signed = yield* versions(created.json.withdrawalId)
      assert.strictEqual(signed.length, 2, "signed again once expired")
      assert.strictEqual(signed[0]!.tx_hash, first.txHash)
      const second = signed[1]!.tx_hash
      assert.isUndefined(front.blockOf(first.txHash))
      assert.isDefined(front.blockOf(second), "the new version was broadcast and included")
      const done = yield* finalize(tenant, created.json.withdrawalId)
      assert.strictEqual(done.txHash, second)
      assert.strictEqual(done.networkFeeRaw, "5000")
      assert.strictEqual(front.lamports(to), amount, "paid once")
      assert.strictEqual((yield* getTransaction(tenant, created.json.withdrawalId)).txHash, second)
    }))

  it.effect("identical withdrawals at once (same amount, same recipient, from HOT): distinct transactions, each paid", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "twins", sol, 2_000_000_000n)
      const to = recipient()
      const amount = 60_000_000n
      // No block in between (the leader takes nothing meanwhile): all four are signed on the same latest blockhash.
      front.setDropping(true)
      const created = yield* Effect.forEach(
        [1, 2, 3, 4],
        (index) => withdraw(tenant, wallet.walletId, sol, to, amount, `twin-${index}`),
        { concurrency: 4 }
      )
      const ids = created.map((response) => {
        assert.strictEqual(response.status, 202, response.text)
        return response.json.withdrawalId as string
      })
      const confirming = yield* Effect.forEach(ids, (id) => waitFor(tenant, id, "CONFIRMING"), { concurrency: 4 })
      assert.strictEqual(new Set(confirming.map((entry) => entry.txHash)).size, 4, "four signatures")
      front.setDropping(false)
      yield* confirm
      front.mine(finalityDepth + 1)
      yield* confirm
      yield* Effect.forEach(ids, (id) => waitFor(tenant, id, "COMPLETED"), { concurrency: 4 })
      assert.strictEqual(front.lamports(to), 4n * amount)
    }))

  it.effect("a reorganization drops the withdrawal's block before it is final: the same bytes are broadcast again and included; one version, paid once", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const wallet = yield* fundedWallet(tenant, "reorg", sol, 1_000_000_000n)
      const to = recipient()
      const amount = 200_000_000n
      const created = yield* withdraw(tenant, wallet.walletId, sol, to, amount, "reorg-1")
      assert.strictEqual(created.status, 202, created.text)
      const confirming = yield* waitFor(tenant, created.json.withdrawalId, "CONFIRMING")
      const landed = front.blockOf(confirming.txHash)!
      front.mine(3)
      // Every block from the withdrawal's one is replaced by empty ones: its transaction is in no block now.
      front.reorg(front.headHeight() - landed.height + 1)
      assert.isUndefined(front.blockOf(confirming.txHash))
      assert.strictEqual(front.lamports(to), 0n)
      // The check finds it unknown (its blockhash still valid) and gives the node the same bytes again.
      yield* confirm
      assert.isDefined(front.blockOf(confirming.txHash), "the same signature is in a block of the new chain")
      const done = yield* finalize(tenant, created.json.withdrawalId)
      assert.strictEqual(done.txHash, confirming.txHash)
      assert.strictEqual((yield* versions(created.json.withdrawalId)).length, 1)
      assert.strictEqual(front.lamports(to), amount, "paid once")
    }))
})
