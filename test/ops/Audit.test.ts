/**
 * The operator's audit trail (operator-interface.md, "Listing, audit and documents"; docs/operations.md "Audit
 * trail"): every operator request that changed something leaves exactly one entry with its X-Request-Id, stored in
 * the transaction of the change; a refused request leaves none; the table refuses UPDATE, DELETE and TRUNCATE; and
 * GET /ops/audit lists it newest first with its filters and cursor. Driven through the operator listener.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { execFile } from "node:child_process"
import { generateKeyPairSync } from "node:crypto"
import { userInfo } from "node:os"
import { fileURLToPath } from "node:url"
import { OpsAddress } from "../../src/App.ts"
import { rawPublicKeyHex } from "../../src/auth/Ed25519.ts"
import { expectError, fund, settings } from "../support/Funds.ts"
import {
  makeTestAppLayer,
  opsClient,
  opsRequest,
  provisionTenant,
  type RawResponse,
  type TestTenant,
  testOpsToken
} from "../support/TestApp.ts"
import { call, getTransaction, waitFor, walletOf } from "../withdrawals/WithdrawalHelpers.ts"

const btc = "BTC_TESTNET_BTC"
const btcTo = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx"

let requests = 0
/** A request id of its own for each operator request, so its entries can be counted. */
const nextRequestId = () => `audit-test-${++requests}`

/** An operator request under a fresh X-Request-Id: the response and that id. */
const opsWithId = (method: string, target: string, body?: unknown, headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const requestId = nextRequestId()
    const response = yield* opsRequest(method, target, body, { "x-request-id": requestId, ...headers })
    return { response, requestId }
  })

interface EntryRow {
  readonly action: string
  readonly target_type: string
  readonly target_id: string | null
  readonly tenant_id: string | null
  readonly change: any
  readonly operator: string
}

const entriesOf = (requestId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<EntryRow>`
      SELECT action, target_type, target_id, tenant_id, change, operator FROM operator_audit
      WHERE request_id = ${requestId}`.pipe(Effect.orDie)
  })

/** The request succeeded with `status` and left exactly one entry, which is returned. */
const oneEntry = (sent: { response: RawResponse; requestId: string }, status = 200) =>
  Effect.gen(function*() {
    assert.strictEqual(sent.response.status, status, sent.response.text)
    const entries = yield* entriesOf(sent.requestId)
    assert.lengthOf(entries, 1, `entries of ${sent.requestId}`)
    return entries[0]!
  })

/** The request failed with `status` and `code` and left no entry. */
const noEntry = (sent: { response: RawResponse; requestId: string }, status: number, code: string) =>
  Effect.gen(function*() {
    expectError(sent.response, status, code)
    assert.lengthOf(yield* entriesOf(sent.requestId), 0, `entries of ${sent.requestId}`)
  })

/** The messages of an error and its causes and reasons, as one text (the database's own is a few levels down). */
const errorMessages = (error: unknown, depth = 0): string => {
  if (typeof error !== "object" || error === null || depth > 6) return ""
  const { message, cause, reason } = error as { message?: unknown; cause?: unknown; reason?: unknown }
  return [String(message ?? ""), errorMessages(cause, depth + 1), errorMessages(reason, depth + 1)].join(" | ")
}

const publicKeyHex = () => rawPublicKeyHex(generateKeyPairSync("ed25519").publicKey)

const transfer = (tenant: TestTenant, from: string, to: string, externalTxId: string) =>
  call(tenant, "POST", "/v1/transactions", {
    assetId: btc,
    source: { type: "WALLET", id: from },
    destination: { type: "WALLET", id: to },
    amountRaw: "5000",
    externalTxId
  })

const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url))

/**
 * `npm run call -- --ops-url <this service> ops <args>` as a child process (asynchronous: the service it calls runs
 * in this process). COFFER_OPERATOR is what `env` says, never the caller's own.
 */
const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const opsUrl = yield* OpsAddress
    const { COFFER_OPERATOR: _, ...inherited } = process.env
    return yield* Effect.callback<{ code: number; stdout: string; stderr: string }>((resume) => {
      execFile(process.execPath, ["src/ops/cli.ts", "--ops-url", opsUrl, "ops", ...args], {
        cwd: repositoryRoot,
        env: { ...inherited, OPS_TOKEN: testOpsToken, ...env },
        timeout: 60_000
      }, (error, stdout, stderr) => {
        resume(Effect.succeed({ code: typeof error?.code === "number" ? error.code : error ? 1 : 0, stdout, stderr }))
      })
    })
  })

/** The operator of the newest audit entry of a tenant. */
const newestOperator = (tenantId: string) =>
  Effect.map(opsRequest("GET", `/ops/audit?tenantId=${tenantId}&limit=1`), (response) => {
    assert.strictEqual(response.status, 200, response.text)
    return response.json.items[0].operator as string
  })

layer(makeTestAppLayer(), { excludeTestServices: true, timeout: 120_000 })("operator audit trail", (it) => {
  it.effect("tenants and keys: create, PATCH, key creation and revocation each leave one entry with the request id; the change says what changed", () =>
    Effect.gen(function*() {
      const created = yield* opsWithId("POST", "/ops/tenants", { name: "audited", networks: ["BTC_TESTNET"] }, {
        "x-operator": "alice"
      })
      const createdEntry = yield* oneEntry(created, 201)
      const tenantId = created.response.json.id as string
      assert.deepStrictEqual(createdEntry, {
        action: "TENANT_CREATED",
        target_type: "TENANT",
        target_id: tenantId,
        tenant_id: tenantId,
        change: { name: "audited", networks: ["BTC_TESTNET"] },
        operator: "alice"
      })

      const patched = yield* opsWithId("PATCH", `/ops/tenants/${tenantId}`, {
        status: "SUSPENDED",
        settings: { walletsPerFamily: 3 }
      })
      const patchedEntry = yield* oneEntry(patched)
      assert.strictEqual(patchedEntry.action, "TENANT_UPDATED")
      assert.strictEqual(patchedEntry.operator, "ops-token")
      assert.deepStrictEqual(patchedEntry.change, {
        status: { from: "ACTIVE", to: "SUSPENDED" },
        settings: { from: {}, to: { walletsPerFamily: 3 } }
      })

      const key = yield* opsWithId("POST", `/ops/tenants/${tenantId}/api-keys`, { name: "k", publicKey: publicKeyHex() })
      const keyEntry = yield* oneEntry(key, 201)
      const keyId = key.response.json.keyId as string
      assert.deepStrictEqual([keyEntry.action, keyEntry.target_type, keyEntry.target_id, keyEntry.tenant_id], [
        "API_KEY_CREATED",
        "API_KEY",
        keyId,
        tenantId
      ])
      const revoked = yield* opsWithId("DELETE", `/ops/tenants/${tenantId}/api-keys/${keyId}`)
      const revokedEntry = yield* oneEntry(revoked, 204)
      assert.deepStrictEqual([revokedEntry.action, revokedEntry.target_id], ["API_KEY_REVOKED", keyId])
    }))

  it.effect("refused requests leave no entry: unknown tenant, invalid settings, bad key, unknown key, bad prices", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const unknown = "00000000-0000-7000-8000-000000000000"
      yield* noEntry(yield* opsWithId("PATCH", `/ops/tenants/${unknown}`, { status: "SUSPENDED" }), 404, "NOT_FOUND")
      yield* noEntry(
        yield* opsWithId("PATCH", `/ops/tenants/${tenant.tenantId}`, { settings: { walletsPerFamily: 99 } }),
        422,
        "BAD_REQUEST"
      )
      yield* noEntry(
        yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/api-keys`, { name: "k", publicKey: "nothex" }),
        422,
        "BAD_REQUEST"
      )
      yield* noEntry(yield* opsWithId("DELETE", `/ops/tenants/${tenant.tenantId}/api-keys/ak_missing`), 404, "NOT_FOUND")
      yield* noEntry(yield* opsWithId("PUT", "/ops/prices", { NO_SUCH_ASSET: "1" }), 422, "ASSET_NOT_SUPPORTED")
      yield* noEntry(yield* opsWithId("PATCH", "/ops/networks/NO_SUCH_NETWORK", { withdrawEnabled: false }), 404, "NOT_FOUND")
    }))

  it.effect("the entry is written in the change's transaction: when it cannot be stored, the change is not made either", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant({ name: "before" })
      const sql = yield* SqlClient.SqlClient
      // A test-only trigger refuses this one request's entry, as a full disk or a lost connection would at commit.
      yield* sql`CREATE FUNCTION audit_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'refused by the test'; END $$`.pipe(Effect.orDie)
      yield* sql`CREATE TRIGGER audit_test_refuse BEFORE INSERT ON operator_audit FOR EACH ROW
        WHEN (NEW.request_id = 'audit-refused') EXECUTE FUNCTION audit_test_refuse()`.pipe(Effect.orDie)
      const refused = yield* opsRequest("PATCH", `/ops/tenants/${tenant.tenantId}`, { status: "SUSPENDED" }, {
        "x-request-id": "audit-refused"
      })
      yield* sql`DROP TRIGGER audit_test_refuse ON operator_audit`.pipe(Effect.orDie)
      expectError(refused, 500, "INTERNAL")
      const after = yield* opsRequest("GET", `/ops/tenants/${tenant.tenantId}`)
      assert.strictEqual(after.json.status, "ACTIVE", "the tenant stayed as it was")
      assert.lengthOf(yield* entriesOf("audit-refused"), 0)
    }))

  it.effect("users: TOTP bind and unbind record totpEnabled, never the secret; PATCH records what it set; a refused PATCH leaves none", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const created = yield* call(tenant, "POST", "/v1/users", { customerRefId: "ursula" })
      assert.strictEqual(created.status, 200, created.text)
      const bound = yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/users/ursula/totp`)
      const boundEntry = yield* oneEntry(bound)
      assert.deepStrictEqual([boundEntry.action, boundEntry.target_type, boundEntry.target_id, boundEntry.change], [
        "USER_TOTP_BOUND",
        "USER",
        "ursula",
        { totpEnabled: true }
      ])
      assert.notInclude(JSON.stringify(boundEntry), bound.response.json.secret as string)
      const unbound = yield* opsWithId("DELETE", `/ops/tenants/${tenant.tenantId}/users/ursula/totp`)
      assert.strictEqual((yield* oneEntry(unbound, 204)).action, "USER_TOTP_UNBOUND")

      const frozen = yield* opsWithId("PATCH", `/ops/tenants/${tenant.tenantId}/users/ursula`, { status: "CLOSED" })
      assert.deepStrictEqual((yield* oneEntry(frozen)).change, { status: "CLOSED" })
      yield* noEntry(
        yield* opsWithId("PATCH", `/ops/tenants/${tenant.tenantId}/users/ursula`, { status: "ACTIVE" }),
        409,
        "INVALID_STATE"
      )
      yield* noEntry(yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/users/nobody/totp`), 404, "NOT_FOUND")
    }))

  it.effect("switches and prices: network, asset and wallet switches and PUT /ops/prices each leave one entry", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const { walletId } = yield* walletOf(tenant, "sam", "BTC_TESTNET")
      const network = yield* opsWithId("PATCH", "/ops/networks/BTC_TESTNET", { withdrawEnabled: false })
      const networkEntry = yield* oneEntry(network)
      yield* Effect.orDie(opsRequest("PATCH", "/ops/networks/BTC_TESTNET", { withdrawEnabled: true }))
      assert.deepStrictEqual([networkEntry.action, networkEntry.target_id, networkEntry.tenant_id, networkEntry.change], [
        "NETWORK_SWITCHED",
        "BTC_TESTNET",
        null,
        { withdrawEnabled: false }
      ])
      const asset = yield* opsWithId("PATCH", `/ops/assets/${btc}`, { withdrawEnabled: false })
      const assetEntry = yield* oneEntry(asset)
      yield* Effect.orDie(opsRequest("PATCH", `/ops/assets/${btc}`, { withdrawEnabled: true }))
      assert.deepStrictEqual([assetEntry.action, assetEntry.target_id], ["ASSET_SWITCHED", btc])

      const wallet = yield* opsWithId("PATCH", `/ops/tenants/${tenant.tenantId}/wallets/${walletId}`, { status: "FROZEN" })
      const walletEntry = yield* oneEntry(wallet)
      assert.deepStrictEqual([walletEntry.action, walletEntry.target_id, walletEntry.tenant_id, walletEntry.change], [
        "WALLET_SWITCHED",
        walletId,
        tenant.tenantId,
        { status: "FROZEN" }
      ])
      yield* noEntry(
        yield* opsWithId("PATCH", `/ops/tenants/${tenant.tenantId}/wallets/${walletId}`, { status: "CLOSED" }),
        422,
        "BAD_REQUEST"
      )

      const prices = yield* opsWithId("PUT", "/ops/prices", { [btc]: "50000.5" }, { "x-operator": "bob" })
      const pricesEntry = yield* oneEntry(prices)
      assert.deepStrictEqual([pricesEntry.action, pricesEntry.target_id, pricesEntry.operator, pricesEntry.change], [
        "PRICES_SET",
        null,
        "bob",
        { [btc]: "50000.5" }
      ])
      assert.strictEqual(prices.response.json[btc].setBy, "bob")
      yield* Effect.orDie(opsRequest("PUT", "/ops/prices", { [btc]: null }))
    }))

  it.effect("approvals and credits: approving or rejecting a pending transfer, approving a pending withdrawal (which then goes on) and crediting a held deposit each leave one entry; a refused decision leaves none", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      const payer = yield* walletOf(tenant, "pam", "BTC_TESTNET")
      const payee = yield* walletOf(tenant, "pat", "BTC_TESTNET")
      yield* fund(tenant, payer.walletId, btc, 10_000_000n)
      yield* settings(tenant, { transferApprovalAbove: { [btc]: "1" }, withdrawalApprovalAbove: { [btc]: "1" } })

      const first = (yield* transfer(tenant, payer.walletId, payee.walletId, "audit-t1")).json.transactionId as string
      const second = (yield* transfer(tenant, payer.walletId, payee.walletId, "audit-t2")).json.transactionId as string
      const approved = yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/transactions/${first}/approve`)
      assert.deepStrictEqual((yield* oneEntry(approved)).change, {
        kind: "INTERNAL_TRANSFER",
        status: { from: "PENDING_AUTHORIZATION", to: "COMPLETED" },
        subStatus: null
      })
      // Decided already: refused, and no second entry.
      yield* noEntry(
        yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/transactions/${first}/approve`),
        409,
        "INVALID_STATE"
      )
      const rejected = yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/transactions/${second}/reject`)
      const rejectedEntry = yield* oneEntry(rejected)
      assert.deepStrictEqual([rejectedEntry.action, rejectedEntry.target_type, rejectedEntry.target_id], [
        "TRANSACTION_REJECTED",
        "TRANSACTION",
        second
      ])

      const withdrawal = yield* call(tenant, "POST", "/v1/transactions", {
        assetId: btc,
        source: { type: "WALLET", id: payer.walletId },
        destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: btcTo } },
        amountRaw: "60000",
        externalTxId: "audit-w1"
      })
      assert.strictEqual(withdrawal.status, 202, withdrawal.text)
      const withdrawalId = withdrawal.json.transactionId as string
      yield* waitFor(tenant, withdrawalId, "PENDING_AUTHORIZATION")
      const approvedWithdrawal = yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/transactions/${withdrawalId}/approve`)
      const withdrawalEntry = yield* oneEntry(approvedWithdrawal)
      assert.deepStrictEqual([withdrawalEntry.action, withdrawalEntry.change.kind, withdrawalEntry.change.status.from], [
        "TRANSACTION_APPROVED",
        "WITHDRAWAL",
        "PENDING_AUTHORIZATION"
      ])
      // Asked to go on after the commit (Withdrawals.decided): it is signed and broadcast, not left waiting.
      yield* waitFor(tenant, withdrawalId, "CONFIRMING")

      // A deposit to a FROZEN wallet is held for manual handling; the operator's credit is audited.
      yield* Effect.orDie(opsRequest("PATCH", `/ops/tenants/${tenant.tenantId}/wallets/${payee.walletId}`, { status: "FROZEN" }))
      const client = yield* opsClient
      yield* client.devnet.transfer({ params: { networkKey: "BTC_TESTNET" }, payload: { to: payee.address, assetId: btc, amountRaw: 70_000n } })
        .pipe(Effect.orDie)
      yield* client.devnet.mine({ params: { networkKey: "BTC_TESTNET" }, payload: { count: 2 } }).pipe(Effect.orDie)
      const held = (yield* call(tenant, "GET", "/v1/transactions?kind=DEPOSIT")).json.items[0]
      assert.deepStrictEqual([held.status, held.subStatus], ["COMPLETED", "MANUAL_REVIEW"])
      const credited = yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/deposits/${held.id}/credit`)
      const creditEntry = yield* oneEntry(credited)
      assert.deepStrictEqual([creditEntry.action, creditEntry.target_id, creditEntry.change.amountRaw], [
        "DEPOSIT_CREDITED",
        held.id,
        "70000"
      ])
      yield* noEntry(
        yield* opsWithId("POST", `/ops/tenants/${tenant.tenantId}/deposits/${held.id}/credit`),
        409,
        "INVALID_STATE"
      )
      assert.strictEqual((yield* getTransaction(tenant, held.id)).subStatus, null)
    }))

  it.effect("the database refuses UPDATE, DELETE and TRUNCATE of the audit table", () =>
    Effect.gen(function*() {
      yield* opsWithId("POST", "/ops/tenants", { name: "immutable" })
      const sql = yield* SqlClient.SqlClient
      const [before] = yield* sql<{ count: string }>`SELECT count(*)::text AS count FROM operator_audit`.pipe(Effect.orDie)
      for (const statement of [
        sql`UPDATE operator_audit SET action = 'PRICES_SET'`,
        sql`UPDATE operator_audit SET change = '{}'::jsonb WHERE action = 'TENANT_CREATED'`,
        sql`DELETE FROM operator_audit`,
        sql`TRUNCATE operator_audit`
      ]) {
        const outcome = yield* Effect.result(statement)
        assert.isTrue(outcome._tag === "Failure", "the statement was refused")
        assert.include(errorMessages(outcome._tag === "Failure" ? outcome.failure : undefined), "operator_audit is append-only")
      }
      const [after] = yield* sql<{ count: string }>`SELECT count(*)::text AS count FROM operator_audit`.pipe(Effect.orDie)
      assert.strictEqual(after!.count, before!.count)
      assert.notStrictEqual(before!.count, "0")
    }))

  it.effect("GET /ops/audit: newest first, each entry with its request id; filters by action, tenantId, from/to; limit and cursor page through; bad values refused", () =>
    Effect.gen(function*() {
      const created = yield* opsWithId("POST", "/ops/tenants", { name: "listed" })
      const tenantId = created.response.json.id as string
      const renames: Array<string> = []
      for (const name of ["one", "two", "three"]) {
        const renamed = yield* opsWithId("PATCH", `/ops/tenants/${tenantId}`, { settings: { walletCreationsPer24h: name.length } })
        assert.strictEqual(renamed.response.status, 200, renamed.response.text)
        renames.push(renamed.requestId)
      }
      const ofTenant = yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}`)
      assert.strictEqual(ofTenant.status, 200, ofTenant.text)
      assert.deepStrictEqual(
        ofTenant.json.items.map((entry: any) => entry.requestId),
        [...renames].reverse().concat(created.requestId)
      )
      const [newest] = ofTenant.json.items
      assert.deepStrictEqual(Object.keys(newest).sort(), ["action", "at", "change", "id", "operator", "requestId", "target", "tenantId"])
      assert.deepStrictEqual(newest.target, { type: "TENANT", id: tenantId })
      assert.match(newest.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)

      // Paging: two, then the other two, then an empty page (nextCursor is set whenever a page is full).
      const page1 = (yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}&limit=2`)).json
      assert.lengthOf(page1.items, 2)
      assert.strictEqual(page1.nextCursor, page1.items[1].id)
      const page2 = (yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}&limit=2&cursor=${page1.nextCursor}`)).json
      assert.deepStrictEqual(page2.items.map((entry: any) => entry.requestId), [renames[0], created.requestId])
      const page3 = (yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}&limit=2&cursor=${page2.nextCursor}`)).json
      assert.deepStrictEqual([page3.items, page3.nextCursor], [[], null])

      const creations = (yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}&action=TENANT_CREATED`)).json
      assert.deepStrictEqual(creations.items.map((entry: any) => entry.requestId), [created.requestId])

      // from inclusive, to exclusive, on `at`.
      const at = newest.at as string
      const fromNewest = (yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}&from=${at}`)).json
      assert.include(fromNewest.items.map((entry: any) => entry.id), newest.id)
      const toNewest = (yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}&to=${at}`)).json
      assert.notInclude(toNewest.items.map((entry: any) => entry.id), newest.id)
      const future = (yield* opsRequest("GET", "/ops/audit?from=2999-01-01T00:00:00Z")).json
      assert.deepStrictEqual(future.items, [])

      expectError(yield* opsRequest("GET", "/ops/audit?from=yesterday"), 422, "BAD_REQUEST", "from/to must be RFC 3339")
      expectError(yield* opsRequest("GET", "/ops/audit?action=NOPE"), 400, "BAD_REQUEST")
      expectError(yield* opsRequest("GET", "/ops/audit?limit=0"), 400, "BAD_REQUEST")
      expectError(yield* opsRequest("GET", "/ops/audit?limit=201"), 400, "BAD_REQUEST")
      expectError(yield* opsRequest("GET", "/ops/audit?tenantId=x"), 400, "BAD_REQUEST")
      expectError(yield* opsRequest("GET", "/ops/audit", undefined, { authorization: "Bearer wrong" }), 401, "UNAUTHORIZED")
      // Reading the trail is no change: no entry for it.
      const read = yield* opsWithId("GET", "/ops/audit?limit=1")
      assert.strictEqual(read.response.status, 200)
      assert.lengthOf(yield* entriesOf(read.requestId), 0)
    }))

  it.effect("npm run call -- ops: the change is recorded under --operator, else COFFER_OPERATOR, else the OS user (never ops-token)", () =>
    Effect.gen(function*() {
      // The typed client (ops tenant create) with the flag.
      const created = yield* cli(["--operator", "cli-alice", "tenant", "create", "cli-audited", "--networks", "BTC_TESTNET"])
      assert.strictEqual(created.code, 0, created.stderr)
      const tenantId = JSON.parse(created.stdout).id as string
      const first = (yield* opsRequest("GET", `/ops/audit?tenantId=${tenantId}`)).json.items
      assert.deepStrictEqual(first.map((entry: any) => [entry.action, entry.operator]), [["TENANT_CREATED", "cli-alice"]])

      // Any operator route (ops PATCH ...) with the environment, the flag after the path, and neither.
      const patch = (status: string) => ["PATCH", `/ops/tenants/${tenantId}`, JSON.stringify({ status })]
      const byEnv = yield* cli(patch("SUSPENDED"), { COFFER_OPERATOR: "cli-bob" })
      assert.strictEqual(byEnv.code, 0, byEnv.stderr)
      assert.strictEqual(yield* newestOperator(tenantId), "cli-bob")
      const flagWins = yield* cli([...patch("ACTIVE"), "--operator", "cli-carol"], { COFFER_OPERATOR: "cli-bob" })
      assert.strictEqual(flagWins.code, 0, flagWins.stderr)
      assert.strictEqual(yield* newestOperator(tenantId), "cli-carol")
      const byOsUser = yield* cli(patch("SUSPENDED"))
      assert.strictEqual(byOsUser.code, 0, byOsUser.stderr)
      assert.strictEqual(yield* newestOperator(tenantId), userInfo().username)

      // A name a header cannot carry stops the call before anything is sent: no change, no entry.
      const refused = yield* cli(patch("ACTIVE"), { COFFER_OPERATOR: "caf\u00e9" })
      assert.strictEqual(refused.code, 1)
      assert.include(refused.stderr, "COFFER_OPERATOR must be printable ASCII text; nothing was sent")
      const tenant = yield* opsRequest("GET", `/ops/tenants/${tenantId}`)
      assert.strictEqual(tenant.json.status, "SUSPENDED")
      assert.strictEqual(yield* newestOperator(tenantId), userInfo().username)
    }), 180_000)
})
