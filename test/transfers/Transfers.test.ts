/**
 * Internal transfers through POST /v1/transactions (spec 4.4, decisions.md "Internal transfer"): settled in the
 * ledger in one transaction, replayed without a second debit, held for approval above the tenant's threshold, with
 * the destination forms, two-step verification, policy, limits and balance checks. On-chain recipients get a
 * withdrawal (test/withdrawals/Withdrawals.test.ts).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { getAddress } from "viem"
import { Secret, TOTP } from "otpauth"
import { uuidV7 } from "../../src/domain/Ids.ts"
import {
  addApiKey,
  makeTestAppLayer,
  opsClient,
  provisionTenant,
  rawRequest,
  type TestTenant
} from "../support/TestApp.ts"
import { expectError, fund, settings } from "../support/Funds.ts"

const call = (tenant: TestTenant, method: string, target: string, body?: unknown, headers: Record<string, string> = {}) =>
  rawRequest({
    baseUrl: tenant.baseUrl,
    method,
    target,
    tenant,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

const walletOf = (tenant: TestTenant, customerRefId: string, networkKey = "ETH_SEPOLIA") =>
  Effect.gen(function*() {
    const response = yield* call(tenant, "POST", `/v1/users/${customerRefId}/deposit_address`, { networkKey })
    assert.strictEqual(response.json.status, "READY", response.text)
    return { walletId: response.json.walletId as string, address: response.json.address as string, uid: response.json.uid as string }
  })

const balance = (tenant: TestTenant, walletId: string, assetId = "ETH_SEPOLIA_ETH") =>
  Effect.map(call(tenant, "GET", `/v1/wallets/${walletId}/assets`), (response) => {
    const item = (response.json as Array<any>).find((entry) => entry.assetId === assetId)
    return item === undefined ? { available: "0", frozen: "0" } : { available: item.available, frozen: item.frozen }
  })

const submit = (tenant: TestTenant, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  call(tenant, "POST", "/v1/transactions", body, headers)

const eth = "ETH_SEPOLIA_ETH"

/**
 * Two ETH_SEPOLIA wallets of the tenant, the payer funded with `amount` of ETH, and the fields of a transfer between
 * them (asset, source, destination) to spread into a request body.
 */
const fundedPair = (tenant: TestTenant, payerRef: string, payeeRef: string, amount: bigint) =>
  Effect.gen(function*() {
    const payer = yield* walletOf(tenant, payerRef)
    const payee = yield* walletOf(tenant, payeeRef)
    yield* fund(tenant, payer.walletId, eth, amount)
    const between = {
      assetId: eth,
      source: { type: "WALLET", id: payer.walletId },
      destination: { type: "WALLET", id: payee.walletId }
    }
    return { payer, payee, between }
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("internal transfers (spec 4.4)", (it) => {
  describe("settlement", () => {
    it.effect("to a wallet of another user: COMPLETED at once, payer debited amount + fee, recipient the amount, once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { internalTransferFees: { [eth]: "7" } })
        const { payer: alice, payee: bob, between } = yield* fundedPair(tenant, "alice", "bob", 1_000n)
        const body = {
          ...between,
          amountRaw: "100",
          externalTxId: "order-1",
          note: "rent"
        }
        const response = yield* submit(tenant, body)
        assert.strictEqual(response.status, 202, response.text)
        assert.deepStrictEqual(response.json, {
          settlement: "OFF_CHAIN",
          transferId: response.json.transactionId,
          transactionId: response.json.transactionId,
          status: "COMPLETED",
          fromWalletId: alice.walletId,
          toWalletId: bob.walletId,
          assetId: eth,
          amount: "100",
          fee: "7"
        })
        assert.deepStrictEqual(yield* balance(tenant, alice.walletId), { available: "893", frozen: "0" })
        assert.deepStrictEqual(yield* balance(tenant, bob.walletId), { available: "100", frozen: "0" })

        const transaction = (yield* call(tenant, "GET", `/v1/transactions/${response.json.transactionId}`)).json
        assert.deepStrictEqual(
          [transaction.kind, transaction.settlement, transaction.status, transaction.amountRaw, transaction.feeRaw],
          ["INTERNAL_TRANSFER", "OFF_CHAIN", "COMPLETED", "100", "7"]
        )
        assert.isNull(transaction.txHash)
        assert.deepStrictEqual([transaction.externalTxId, transaction.note], ["order-1", "rent"])
        assert.deepStrictEqual(
          [transaction.source.walletId, transaction.source.customerRefId, transaction.destination.walletId, transaction.destination.customerRefId],
          [alice.walletId, "alice", bob.walletId, "bob"]
        )
        const events = yield* sql<{ event_type: string; data: any }>`
          SELECT event_type, data FROM outbox_events WHERE subject_id = ${response.json.transactionId}`
        assert.deepStrictEqual(events.map((event) => [event.event_type, event.data.status]), [["TRANSACTION_CREATED", "COMPLETED"]])
        // The event carries the transaction object exactly as a read of it answers (built with the statement that
        // writes the row, NewTransaction.ts transactionAsInserted).
        assert.deepStrictEqual(events[0]!.data, transaction)

        // Rule 3 and 8: the same body replays byte for byte without a second debit; a different body conflicts, as
        // does the same externalTxId from another API key.
        const replay = yield* submit(tenant, body)
        assert.strictEqual(replay.status, 202)
        assert.strictEqual(replay.text, response.text)
        assert.deepStrictEqual(yield* balance(tenant, alice.walletId), { available: "893", frozen: "0" })
        expectError(yield* submit(tenant, { ...body, amountRaw: "101" }), 409, "IDEMPOTENCY_CONFLICT")
        const otherKey = yield* addApiKey(tenant)
        expectError(yield* submit(otherKey, body), 409, "IDEMPOTENCY_CONFLICT")
        const byExternal = yield* call(tenant, "GET", "/v1/transactions/external_tx_id/order-1")
        assert.strictEqual(byExternal.json.id, response.json.transactionId)

        // The record is written by the transfer's own statement, with no claim before the checks (issue 34): a replay
        // the checks would now refuse (the payer frozen since) still answers the first bytes, and a different body
        // still conflicts, before the refusal.
        assert.strictEqual((yield* call(tenant, "PATCH", "/v1/users/alice", { status: "FROZEN" })).status, 200)
        const frozenReplay = yield* submit(tenant, body)
        assert.strictEqual(frozenReplay.status, 202, frozenReplay.text)
        assert.strictEqual(frozenReplay.text, response.text)
        expectError(yield* submit(tenant, { ...body, amountRaw: "101" }), 409, "IDEMPOTENCY_CONFLICT")
        const [record] = yield* sql<{ state: string; claim_id: string | null; withTransfer: number }>`
          SELECT state, claim_id, (xmin = (SELECT xmin FROM transactions WHERE id = ${response.json.transactionId}))::int AS "withTransfer"
          FROM idempotency_records WHERE tenant_id = ${tenant.tenantId} AND idempotency_key LIKE '%order-1%'`
        assert.deepStrictEqual([record!.state, record!.claim_id, record!.withTransfer], ["COMPLETED", null, 1],
          "the record committed with the transfer")
        yield* call(tenant, "PATCH", "/v1/users/alice", { status: "ACTIVE" })
      }))

    it.effect("END_USER by customerRefId or uid lands in the recipient's default wallet of the family; between one user's wallets it is free", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { internalTransferFees: { TRON_NILE_TRX: "1000" } })
        const carol = yield* walletOf(tenant, "carol", "TRON_NILE")
        const dave = yield* walletOf(tenant, "dave", "TRON_NILE")
        yield* fund(tenant, carol.walletId, "TRON_NILE_TRX", 1_000_000n)
        const base = { assetId: "TRON_NILE_TRX", source: { type: "WALLET", id: carol.walletId }, amountRaw: "5000" }
        const byRef = yield* submit(tenant, { ...base, destination: { type: "END_USER", customerRefId: "dave" } }, {
          "idempotency-key": "by-ref"
        })
        assert.strictEqual(byRef.status, 202, byRef.text)
        assert.deepStrictEqual([byRef.json.toWalletId, byRef.json.fee], [dave.walletId, "1000"])
        const byUid = yield* submit(tenant, { ...base, destination: { type: "END_USER", uid: dave.uid } }, {
          "idempotency-key": "by-uid"
        })
        assert.strictEqual(byUid.json.toWalletId, dave.walletId)
        assert.deepStrictEqual(yield* balance(tenant, dave.walletId, "TRON_NILE_TRX"), { available: "10000", frozen: "0" })

        // ONE_TIME_ADDRESS naming a deposit address of the tenant settles off-chain too.
        const byAddress = yield* submit(tenant, { ...base, destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: dave.address } } }, {
          "idempotency-key": "by-address"
        })
        assert.deepStrictEqual([byAddress.status, byAddress.json.settlement, byAddress.json.toWalletId], [202, "OFF_CHAIN", dave.walletId])
        assert.deepStrictEqual(yield* balance(tenant, carol.walletId, "TRON_NILE_TRX"), {
          available: (1_000_000n - 3n * 6000n).toString(),
          frozen: "0"
        })
      }))

    it.effect("a one-time address is looked up as the quote normalizes it, in this tenant only: own wallet in EIP-55 form OFF_CHAIN, another tenant's ON_CHAIN, a platform address 422", () =>
      Effect.gen(function*() {
        // What the quote reads about a one-time address is read with the payer (transfers/PayerRead.ts, byAddress).
        const tenant = yield* provisionTenant()
        const other = yield* provisionTenant()
        const { payer } = yield* fundedPair(tenant, "olga", "olaf", 10n ** 18n)
        const own = yield* walletOf(tenant, "oscar")
        const foreign = yield* walletOf(other, "otto")
        // Given in its EIP-55 form, which is not how the service stores it.
        const checksummed = getAddress(own.address)
        assert.notStrictEqual(checksummed, own.address)
        const base = { assetId: eth, source: { type: "WALLET", id: payer.walletId }, amountRaw: (10n ** 16n).toString() }
        const toAddress = (address: string, key: string) =>
          submit(tenant, { ...base, destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address } } }, {
            "idempotency-key": key
          })

        const checksumForm = yield* toAddress(checksummed, "own-checksummed")
        assert.deepStrictEqual([checksumForm.status, checksumForm.json.settlement, checksumForm.json.toWalletId], [202, "OFF_CHAIN", own.walletId], checksumForm.text)
        assert.deepStrictEqual(yield* balance(tenant, own.walletId), { available: (10n ** 16n).toString(), frozen: "0" })

        const across = yield* toAddress(foreign.address, "foreign")
        assert.deepStrictEqual([across.status, across.json.settlement, across.json.status], [202, "ON_CHAIN", "SUBMITTED"], across.text)
        assert.deepStrictEqual(yield* balance(other, foreign.walletId), { available: "0", frozen: "0" })

        const platform = yield* (yield* opsClient).platform.addresses()
        const hot = platform.find((entry) => entry.networkKey === "ETH_SEPOLIA" && entry.role === "HOT")!.address
        expectError(yield* toAddress(getAddress(hot), "platform"), 422, "INTERNAL_DESTINATION_NOT_ALLOWED")
      }))

    it.effect("an external recipient settles on chain: 202 ON_CHAIN receipt, SUBMITTED, amount + fee frozen (test/withdrawals)", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const erin = yield* walletOf(tenant, "erin")
        yield* fund(tenant, erin.walletId, eth, 10n ** 18n)
        const response = yield* submit(tenant, {
          assetId: eth,
          source: { type: "WALLET", id: erin.walletId },
          destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" } },
          amountRaw: (10n ** 16n).toString(),
          externalTxId: "w-1"
        })
        assert.strictEqual(response.status, 202, response.text)
        assert.deepStrictEqual([response.json.settlement, response.json.status, response.json.feeRaw], ["ON_CHAIN", "SUBMITTED", (10n ** 15n).toString()])
        const { frozen } = yield* balance(tenant, erin.walletId)
        assert.strictEqual(frozen, (10n ** 16n + 10n ** 15n).toString())
      }))

    it.effect("above transferApprovalAbove: PENDING_AUTHORIZATION with amount + fee frozen; the operator approves or rejects", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { transferApprovalAbove: { [eth]: "500" }, internalTransferFees: { [eth]: "10" } })
        const { payer: frank, payee: gina, between } = yield* fundedPair(tenant, "frank", "gina", 2_000n)
        const send = (externalTxId: string, amountRaw: string) =>
          submit(tenant, {
            ...between,
            amountRaw,
            externalTxId
          })
        const small = yield* send("small", "500")
        assert.strictEqual(small.json.status, "COMPLETED", "at the threshold no approval is needed")
        const large = yield* send("large", "600")
        assert.strictEqual(large.json.status, "PENDING_AUTHORIZATION")
        assert.deepStrictEqual(yield* balance(tenant, frank.walletId), { available: "880", frozen: "610" })
        assert.deepStrictEqual(yield* balance(tenant, gina.walletId), { available: "500", frozen: "0" })
        const approved = yield* ops.manual.approve({ params: { tenantId: tenant.tenantId, id: large.json.transactionId } })
          .pipe(Effect.orDie)
        assert.deepStrictEqual([approved.status, approved.subStatus], ["COMPLETED", null])
        assert.deepStrictEqual(yield* balance(tenant, frank.walletId), { available: "880", frozen: "0" })
        assert.deepStrictEqual(yield* balance(tenant, gina.walletId), { available: "1100", frozen: "0" })
        const twice = yield* Effect.flip(ops.manual.approve({ params: { tenantId: tenant.tenantId, id: large.json.transactionId } }))
        assert.strictEqual(twice._tag, "InvalidState")

        const another = yield* send("another", "700")
        assert.strictEqual(another.json.status, "PENDING_AUTHORIZATION")
        const rejected = yield* ops.manual.reject({ params: { tenantId: tenant.tenantId, id: another.json.transactionId } })
          .pipe(Effect.orDie)
        assert.deepStrictEqual([rejected.status, rejected.subStatus], ["REJECTED", "REJECTED_BY_OPERATOR"])
        assert.deepStrictEqual(yield* balance(tenant, frank.walletId), { available: "880", frozen: "0" })
        // An internal transfer can never be cancelled.
        expectError(
          yield* call(tenant, "POST", `/v1/transactions/${small.json.transactionId}/cancel`),
          409,
          "INVALID_STATE",
          "only withdrawals can be cancelled"
        )
        expectError(yield* call(tenant, "POST", `/v1/transactions/${yield* uuidV7}/cancel`), 404, "NOT_FOUND")
      }))

    it.effect("an Idempotency-Key and an externalTxId with the same text are two keys: each request executes once and replays its own answer", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { between: base, payer } = yield* fundedPair(tenant, "same-text-payer", "same-text-payee", 1_000n)
        // Rule 8 keys an externalTxId across the tenant, rule 2 an Idempotency-Key per API key: one text, two scopes.
        const byHeader = yield* submit(tenant, { ...base, amountRaw: "10" }, { "idempotency-key": "same-text" })
        assert.strictEqual(byHeader.status, 202, byHeader.text)
        const byExternalId = yield* submit(tenant, { ...base, amountRaw: "20", externalTxId: "same-text" })
        assert.strictEqual(byExternalId.status, 202, byExternalId.text)
        assert.notStrictEqual(byExternalId.json.transactionId, byHeader.json.transactionId)
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId), { available: "970", frozen: "0" })
        const again = yield* submit(tenant, { ...base, amountRaw: "10" }, { "idempotency-key": "same-text" })
        assert.strictEqual(again.text, byHeader.text)
        const againByExternalId = yield* submit(tenant, { ...base, amountRaw: "20", externalTxId: "same-text" })
        assert.strictEqual(againByExternalId.text, byExternalId.text)
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId), { available: "970", frozen: "0" })
      }))

    it.effect("20 concurrent transfers of 10 from a balance of 100: exactly 10 pass, never overdrawn", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const { payer: hank, payee: ivy, between } = yield* fundedPair(tenant, "hank", "ivy", 100n)
        const responses = yield* Effect.all(
          Array.from({ length: 20 }, (_, index) =>
            submit(tenant, {
              ...between,
              amountRaw: "10",
              externalTxId: `race-${index}`
            })),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(responses.filter((response) => response.status === 202).length, 10)
        assert.isTrue(responses.filter((response) => response.status !== 202).every((response) =>
          response.status === 422 && response.json.error.code === "INSUFFICIENT_BALANCE"
        ))
        assert.deepStrictEqual(yield* balance(tenant, hank.walletId), { available: "0", frozen: "0" })
        assert.deepStrictEqual(yield* balance(tenant, ivy.walletId), { available: "100", frozen: "0" })
      }))
  })

  describe("refusals", () => {
    it.effect("request shape, recipient, policy, limit and balance errors, each with its code and nothing moved", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const jack = yield* walletOf(tenant, "jack")
        const kate = yield* walletOf(tenant, "kate")
        yield* walletOf(tenant, "lone", "TRON_NILE")
        yield* fund(tenant, jack.walletId, eth, 1_000n)
        const base = {
          assetId: eth,
          source: { type: "WALLET", id: jack.walletId },
          destination: { type: "WALLET", id: kate.walletId },
          amountRaw: "10"
        }
        const key = { "idempotency-key": "k" }
        let n = 0
        const fresh = () => ({ "idempotency-key": `k-${n++}` })
        expectError(yield* submit(tenant, { ...base, source: { type: "ADDRESS", id: jack.walletId } }, key), 422, "BAD_REQUEST", "source.type must be WALLET")
        expectError(yield* submit(tenant, { ...base, externalTxId: "" }), 422, "BAD_REQUEST", "externalTxId must be 1-128 chars")
        expectError(yield* submit(tenant, base), 422, "BAD_REQUEST", "Idempotency-Key header is required")
        expectError(
          yield* submit(tenant, { ...base, destination: { type: "END_USER", uid: "1", customerRefId: "kate" } }, key),
          422,
          "BAD_REQUEST",
          "END_USER needs exactly one of uid / customerRefId"
        )
        expectError(yield* submit(tenant, { ...base, amountRaw: "0" }, key), 422, "BAD_REQUEST", "amount must be positive")
        expectError(yield* submit(tenant, { ...base, amountRaw: 10 }, key), 422, "BAD_REQUEST")
        expectError(yield* submit(tenant, { ...base, source: { type: "WALLET", id: "nope" } }, fresh()), 404, "NOT_FOUND")
        const other = yield* provisionTenant()
        expectError(yield* submit(other, base, fresh()), 404, "NOT_FOUND")
        expectError(yield* submit(tenant, { ...base, destination: { type: "WALLET", id: yield* uuidV7 } }, fresh()), 404, "NOT_FOUND")
        // Another tenant's wallet is as missing as one that does not exist (read with the payer, Transfers.ts).
        const foreign = yield* walletOf(other, "olga")
        expectError(
          yield* submit(tenant, { ...base, destination: { type: "WALLET", id: foreign.walletId } }, fresh()),
          404,
          "NOT_FOUND",
          "recipient wallet not found"
        )
        expectError(yield* submit(tenant, { ...base, destination: { type: "END_USER", customerRefId: "nobody" } }, fresh()), 404, "RECIPIENT_NOT_FOUND")
        expectError(yield* submit(tenant, { ...base, destination: { type: "END_USER", customerRefId: "jack" } }, fresh()), 422, "SAME_USER_USE_WALLET_TRANSFER")
        expectError(yield* submit(tenant, { ...base, destination: { type: "END_USER", customerRefId: "lone" } }, fresh()), 422, "RECIPIENT_NO_WALLET")
        expectError(yield* submit(tenant, { ...base, destination: { type: "WALLET", id: jack.walletId } }, fresh()), 422, "SAME_WALLET_TRANSFER")
        expectError(yield* submit(tenant, { ...base, assetId: "TRON_NILE_TRX" }, fresh()), 422, "ASSET_MISMATCH")
        expectError(yield* submit(tenant, { ...base, assetId: "NOPE" }, fresh()), 422, "ASSET_NOT_SUPPORTED")
        expectError(yield* submit(tenant, { ...base, amountRaw: "1001" }, fresh()), 422, "INSUFFICIENT_BALANCE")
        yield* settings(tenant, { blockedAddresses: [kate.address] })
        expectError(yield* submit(tenant, base, fresh()), 403, "BLOCKED_BY_POLICY")
        yield* settings(tenant, { blockedAddresses: [], limits: { [eth]: { single: "5", daily: null } } })
        expectError(yield* submit(tenant, base, fresh()), 422, "LIMIT_EXCEEDED")
        yield* settings(tenant, { limits: null })
        const frozen = yield* call(tenant, "PATCH", "/v1/users/jack", { status: "FROZEN" })
        assert.strictEqual(frozen.status, 200, frozen.text)
        // Spec section 2, "Frozen user effects": the message is the spec's.
        expectError(yield* submit(tenant, base, fresh()), 403, "FORBIDDEN", "user is frozen")
        yield* call(tenant, "PATCH", "/v1/users/jack", { status: "ACTIVE" })
        yield* call(tenant, "PATCH", "/v1/users/kate", { status: "FROZEN" })
        expectError(yield* submit(tenant, { ...base, destination: { type: "END_USER", customerRefId: "kate" } }, fresh()), 404, "RECIPIENT_NOT_FOUND")
        assert.deepStrictEqual(yield* balance(tenant, jack.walletId), { available: "1000", frozen: "0" })
      }))

    it.effect("two-step verification: bind first, code required, each code once, cooldown, 10 checks per 15 minutes", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        const { payer: luke, between } = yield* fundedPair(tenant, "luke", "mia", 1_000n)
        let n = 0
        const send = (headers: Record<string, string> = {}) =>
          submit(tenant, {
            ...between,
            amountRaw: "1",
            externalTxId: `2fa-${n++}`
          }, headers)

        // A cooldown blocks whether or not 2FA is required.
        yield* ops.users.update({
          params: { tenantId: tenant.tenantId, customerRefId: "luke" },
          payload: { cooldownUntil: new Date(Date.now() + 3_600_000).toISOString() }
        }).pipe(Effect.orDie)
        expectError(yield* send(), 403, "COOLDOWN_ACTIVE")
        yield* ops.users.update({ params: { tenantId: tenant.tenantId, customerRefId: "luke" }, payload: { cooldownUntil: null } })
          .pipe(Effect.orDie)

        yield* settings(tenant, { apiRequireUser2fa: true })
        expectError(yield* send(), 403, "TWO_FACTOR_REQUIRED", "bind TOTP before moving funds")
        const { secret } = yield* ops.users.bindTotp({ params: { tenantId: tenant.tenantId, customerRefId: "luke" } })
          .pipe(Effect.orDie)
        expectError(yield* send(), 403, "TWO_FACTOR_REQUIRED", "TOTP code required")
        const totp = new TOTP({ secret: Secret.fromBase32(secret) })
        const code = totp.generate()
        const wrong = code === "000000" ? "111111" : "000000"
        expectError(yield* send({ "x-user-2fa-code": wrong }), 403, "TWO_FACTOR_INVALID")
        const accepted = yield* send({ "x-user-2fa-code": code })
        assert.strictEqual(accepted.status, 202, accepted.text)
        expectError(yield* send({ "x-user-2fa-code": code }), 403, "TWO_FACTOR_INVALID", "TOTP code already used")
        // Three checks so far (a missing code is not a check); seven more reach the limit of ten, and the eleventh
        // is refused without being checked.
        for (let index = 0; index < 7; index++) expectError(yield* send({ "x-user-2fa-code": wrong }), 403, "TWO_FACTOR_INVALID")
        expectError(yield* send({ "x-user-2fa-code": wrong }), 429, "RATE_LIMITED")
        assert.deepStrictEqual(yield* balance(tenant, luke.walletId), { available: "999", frozen: "0" })
      }))

    it.effect("40 concurrent wrong codes for one user: exactly 10 are checked, 30 refused unchecked (issue 36)", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        const { payer, between } = yield* fundedPair(tenant, "nora", "otto", 1_000n)
        yield* settings(tenant, { apiRequireUser2fa: true })
        const { secret } = yield* ops.users.bindTotp({ params: { tenantId: tenant.tenantId, customerRefId: "nora" } })
          .pipe(Effect.orDie)
        const wrong = new TOTP({ secret: Secret.fromBase32(secret) }).generate() === "000000" ? "111111" : "000000"
        const answers = yield* Effect.forEach(
          Array.from({ length: 40 }, (_, index) => index),
          (index) => submit(tenant, { ...between, amountRaw: "1", externalTxId: `burst-${index}` }, { "x-user-2fa-code": wrong }),
          { concurrency: "unbounded" }
        )
        const checked = answers.filter((response) => response.status === 403)
        const refused = answers.filter((response) => response.status === 429)
        for (const response of checked) expectError(response, 403, "TWO_FACTOR_INVALID")
        for (const response of refused) expectError(response, 429, "RATE_LIMITED")
        assert.strictEqual(checked.length, 10, "the spec's 10 checks per 15 minutes, however the requests interleave")
        assert.strictEqual(refused.length, 30)
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId), { available: "1000", frozen: "0" })
      }))
  })
})
