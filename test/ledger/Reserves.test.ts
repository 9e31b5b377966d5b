/**
 * The proof of reserves over the whole service on the simulated chain (docs/reserves.md): GET /ops/reserves gives per
 * asset the liabilities' root, recomputed here from the database's account rows; the holdings of the listed addresses
 * and their difference; every user's proof from GET .../liability_proof verifies (also with `npm run reserves:verify`,
 * offline) against the published root, and a changed balance fails.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { buildTree, leafNode, type LiabilityProofWire, verifyProof } from "../../src/ledger/ReserveTree.ts"
import { networkCalls } from "../support/NetworkCalls.ts"
import { makeTestAppLayer, opsClient, opsRequest, provisionTenant, type TestTenant } from "../support/TestApp.ts"

const networkKey = "ETH_SEPOLIA"
const eth = "ETH_SEPOLIA_ETH"
const calls = networkCalls(networkKey)

/** `npm run reserves:verify` as a user would run it: its exit status and output. */
const verifyCommand = (proof: unknown, args: ReadonlyArray<string> = []) =>
  Effect.promise(() => {
    const directory = mkdtempSync(join(tmpdir(), "coffer-proof-"))
    const file = join(directory, "proof.json")
    writeFileSync(file, JSON.stringify(proof))
    return new Promise<{ code: number; output: string }>((resolve) =>
      execFile(process.execPath, ["src/ledger/reserves-verify.ts", file, ...args], (error, stdout, stderr) => {
        rmSync(directory, { recursive: true, force: true })
        resolve({ code: error === null ? 0 : (error.code as number), output: stdout + stderr })
      })
    )
  })

/** The root of an asset recomputed from the account rows, by a query of its own (not Reserves.ts's). */
const rootFromDatabase = (assetId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ kind: string; tenant_id: string; ref: string; available: string; frozen: string; salt: string }>`
      SELECT 'USER' AS kind, u.tenant_id::text, u.customer_ref_id AS ref, sum(a.available)::text AS available,
        sum(a.frozen)::text AS frozen, s.salt
      FROM users u JOIN wallets w ON w.user_id = u.id JOIN ledger_accounts a ON a.wallet_id = w.id
      JOIN reserve_salts s ON s.owner_id = u.id
      WHERE a.asset_id = ${assetId} GROUP BY u.id, s.salt
      UNION ALL
      SELECT 'TENANT_FEES', a.tenant_id::text, '', sum(a.available)::text, '0', s.salt
      FROM ledger_accounts a JOIN reserve_salts s ON s.owner_id = a.tenant_id
      WHERE a.asset_id = ${assetId} AND a.kind IN ('FEES', 'NETWORK_FEES') GROUP BY a.tenant_id, s.salt`
    const nodes = rows.map((row) =>
      leafNode({
        salt: row.salt,
        ownerKind: row.kind as "USER" | "TENANT_FEES",
        tenantId: row.tenant_id,
        customerRefId: row.ref,
        assetId,
        available: BigInt(row.available) < 0n ? 0n : BigInt(row.available),
        frozen: BigInt(row.frozen)
      })
    ).toSorted((a, b) => a.hash < b.hash ? -1 : 1)
    const chain = yield* sql<{ total: string }>`
      SELECT COALESCE(sum(available), 0)::text AS total FROM ledger_accounts WHERE asset_id = ${assetId} AND kind = 'CHAIN'`
    return { root: buildTree(nodes).root, leaves: nodes.length, custody: -BigInt(chain[0]!.total) }
  })

const deposit = (tenant: TestTenant, user: string, amount: bigint) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    const { address } = yield* calls.depositAddress(tenant, user)
    yield* ops.devnet.transfer({ params: { networkKey }, payload: { to: address, assetId: eth, amountRaw: amount } })
      .pipe(Effect.orDie)
    return address
  })

const mine = (count: number) =>
  Effect.flatMap(opsClient, (ops) => ops.devnet.mine({ params: { networkKey }, payload: { count } }).pipe(Effect.orDie))

const report = Effect.map(opsRequest("GET", "/ops/reserves"), (response) => {
  assert.strictEqual(response.status, 200, response.text)
  return response.json as { takenAt: string; items: Array<any> }
})

const proofsOf = (tenant: TestTenant, user: string) =>
  Effect.map(opsRequest("GET", `/ops/tenants/${tenant.tenantId}/users/${user}/liability_proof`), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json as { takenAt: string; proofs: Array<LiabilityProofWire> }
  })

layer(makeTestAppLayer({ autoSweeps: false }), { excludeTestServices: true })("proof of reserves", (it) => {
  it.effect("the root is the database's; holdings are the listed addresses' on chain; every user's proof verifies (offline too) and a changed balance fails", () =>
    Effect.gen(function*() {
      const ops = yield* opsClient
      const alpha = yield* provisionTenant({ name: "alpha" })
      const beta = yield* provisionTenant({ name: "beta" })
      yield* ops.tenants.update({
        params: { tenantId: alpha.tenantId },
        payload: { settings: { depositFees: { [eth]: "1000000000000000" } } }
      }).pipe(Effect.orDie)
      // Nothing on the simulated hot wallet (its balance is a setting, 10^27 by default), so holdings are the deposits.
      yield* ops.devnet.configure({ params: { networkKey }, payload: { hotWalletBalance: { [eth]: 0n } } }).pipe(Effect.orDie)

      const users: ReadonlyArray<readonly [TestTenant, string, bigint]> = [
        [alpha, "alice", 10n ** 18n],
        [alpha, "bob", 5n * 10n ** 17n],
        [alpha, "cleo", 3n * 10n ** 16n],
        [beta, "dan", 2n * 10n ** 17n],
        [beta, "alice", 7n * 10n ** 16n]
      ]
      const addresses: Array<string> = []
      for (const [tenant, user, amount] of users) addresses.push(yield* deposit(tenant, user, amount))
      yield* mine(13)
      const total = users.reduce((sum, [, , amount]) => sum + amount, 0n)

      const first = yield* report
      assert.deepStrictEqual(
        first.items.map((item) => item.networkKey).filter((key, index, all) => all.indexOf(key) === index),
        ["ETH_SEPOLIA", "BSC_TESTNET", "TRON_NILE", "BTC_TESTNET", "SOL_DEVNET"]
      )
      const item = first.items.find((entry) => entry.assetId === eth)
      const fromDatabase = yield* rootFromDatabase(eth)
      // Five users and alpha's fee account (beta charged no fee: its FEES account got no posting).
      assert.strictEqual(item.liabilities.leafCount, fromDatabase.leaves)
      assert.isAtLeast(fromDatabase.leaves, 6)
      assert.deepStrictEqual(item.liabilities.root, { hash: fromDatabase.root.hash, sumRaw: fromDatabase.root.sum.toString() })
      // Every unit owed (net deposits and alpha's fees) is what CHAIN gave out, and what the deposit addresses hold.
      assert.strictEqual(item.liabilities.root.sumRaw, total.toString())
      assert.strictEqual(fromDatabase.custody, total)
      assert.strictEqual(item.holdings.at, "HEAD")
      assert.strictEqual(item.holdings.totalRaw, total.toString())
      assert.strictEqual(item.differenceRaw, "0")
      for (const address of addresses) {
        assert.isTrue(item.holdings.addresses.some((entry: any) => entry.address === address && entry.role === "DEPOSIT"), address)
      }
      assert.isTrue(item.holdings.addresses.some((entry: any) => entry.role === "HOT" && entry.balanceRaw === "0"))
      // An asset nobody holds: the empty tree, nothing on chain.
      const usdt = first.items.find((entry) => entry.assetId === "ETH_SEPOLIA_USDT")
      assert.strictEqual(usdt.liabilities.leafCount, 0)
      assert.strictEqual(usdt.liabilities.root.sumRaw, "0")

      // Every user's proof: the leaf's balances are what /v1 shows, and its path leads to the published root.
      for (const [tenant, user] of users) {
        const { proofs } = yield* proofsOf(tenant, user)
        assert.deepStrictEqual(proofs.map((proof) => proof.assetId), [eth])
        const proof = proofs[0]!
        assert.deepStrictEqual(verifyProof(proof), [], `${user} of ${tenant.tenantId}`)
        assert.deepStrictEqual(proof.root, item.liabilities.root)
        assert.deepInclude(proof.leaf, { ownerKind: "USER", tenantId: tenant.tenantId, customerRefId: user, frozenRaw: "0" })
        const view = yield* calls.balances(tenant, (yield* calls.depositAddress(tenant, user)).walletId)
        assert.deepStrictEqual(view, [[eth, proof.leaf.availableRaw]])
      }

      // Offline, as a user would: the published command, against the published root.
      const alice = yield* proofsOf(alpha, "alice")
      const ok = yield* verifyCommand(alice, ["--root", item.liabilities.root.hash])
      assert.strictEqual(ok.code, 0, ok.output)
      assert.match(ok.output, /^proof ok: ETH_SEPOLIA_ETH of alice/)
      // A changed balance fails, in the proof and on the command line.
      const raised = {
        ...alice,
        proofs: alice.proofs.map((proof) => ({
          ...proof,
          leaf: { ...proof.leaf, availableRaw: (BigInt(proof.leaf.availableRaw) + 1n).toString() }
        }))
      }
      assert.isNotEmpty(verifyProof(raised.proofs[0]!))
      const refused = yield* verifyCommand(raised)
      assert.strictEqual(refused.code, 1, refused.output)
      assert.match(refused.output, /proof FAILS/)
      const unreadable = yield* verifyCommand("not a proof")
      assert.strictEqual(unreadable.code, 1, unreadable.output)

      // A balance that changed in the books: the new root differs, and the old proof no longer leads to it.
      yield* deposit(alpha, "bob", 10n ** 16n)
      yield* mine(13)
      const second = (yield* report).items.find((entry) => entry.assetId === eth)
      assert.notStrictEqual(second.liabilities.root.hash, item.liabilities.root.hash)
      assert.strictEqual(second.liabilities.root.sumRaw, (total + 10n ** 16n).toString())
      assert.deepStrictEqual(second.liabilities.root, {
        hash: (yield* rootFromDatabase(eth)).root.hash,
        sumRaw: (total + 10n ** 16n).toString()
      })
      const stale = yield* verifyCommand(alice, ["--root", second.liabilities.root.hash])
      assert.strictEqual(stale.code, 1, stale.output)
      const fresh = yield* proofsOf(alpha, "alice")
      assert.deepStrictEqual(fresh.proofs[0]!.root, second.liabilities.root)
      assert.deepStrictEqual(verifyProof(fresh.proofs[0]!), [])
      assert.strictEqual(fresh.proofs[0]!.leaf.salt, alice.proofs[0]!.leaf.salt, "a user's salt is kept")

      // Another tenant's user, or an unknown one: 404.
      const missing = yield* opsRequest("GET", `/ops/tenants/${beta.tenantId}/users/bob/liability_proof`)
      assert.strictEqual(missing.status, 404, missing.text)
      assert.strictEqual(missing.json.error.code, "NOT_FOUND")
    }), { timeout: 180_000 })
})
