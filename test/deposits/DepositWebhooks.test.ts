/**
 * A deposit as a tenant's receiver sees it (spec sections 1 "Integration flow" and 6): TRANSACTION_CREATED then
 * TRANSACTION_STATUS_UPDATED arrive signed with the platform key, and a TRANSACTION_* event carries the transaction
 * as it is at delivery time, so resending the first event now shows the deposit COMPLETED.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { makeTestAppLayer, opsClient, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"
import { makeReceiver, verifyDelivery } from "../webhooks/fixtures/Receiver.ts"

const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  rawRequest({
    baseUrl: tenant.baseUrl,
    method,
    target,
    tenant,
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

layer(makeTestAppLayer(), { excludeTestServices: true })("deposit webhooks", (it) => {
  it.effect("created and credited arrive signed; a resend carries the deposit as it is now", () =>
    Effect.scoped(Effect.gen(function*() {
      const ops = yield* opsClient
      const tenant = yield* provisionTenant()
      const receiver = yield* makeReceiver()
      const registered = yield* call(tenant, "POST", "/v1/webhooks", {
        url: receiver.url,
        events: ["TRANSACTION_CREATED", "TRANSACTION_STATUS_UPDATED"]
      })
      assert.strictEqual(registered.status, 201, registered.text)
      const publicKey = (yield* call(tenant, "GET", "/v1/webhooks/public_key")).json.publicKey as string

      const address = (yield* call(tenant, "POST", "/v1/users/alice/deposit_address", { networkKey: "BTC_TESTNET" }))
        .json.address as string
      yield* ops.devnet.transfer({
        params: { networkKey: "BTC_TESTNET" },
        payload: { to: address, assetId: "BTC_TESTNET_BTC", amountRaw: 150_000n }
      }).pipe(Effect.orDie)
      yield* ops.devnet.mine({ params: { networkKey: "BTC_TESTNET" }, payload: { count: 2 } }).pipe(Effect.orDie)

      const [first, second] = yield* receiver.waitForRequests(2)
      const bodies = [first!, second!].map((request) => {
        const verified = verifyDelivery(request, publicKey, Math.floor(Date.now() / 1000))
        assert.isTrue(verified.ok, verified.ok ? "" : verified.reason)
        return verified.ok ? verified.body : undefined
      })
      const byType = new Map(bodies.map((body) => [body.type, body]))
      const created = byType.get("TRANSACTION_CREATED")
      const updated = byType.get("TRANSACTION_STATUS_UPDATED")
      assert.strictEqual(created.tenantId, tenant.tenantId)
      assert.strictEqual(created.data.kind, "DEPOSIT")
      assert.strictEqual(updated.data.id, created.data.id)
      // The integration flow's crediting rule: DEPOSIT, COMPLETED, subStatus null, credit netAmountRaw.
      assert.deepStrictEqual(
        [updated.data.kind, updated.data.status, updated.data.subStatus, updated.data.netAmountRaw],
        ["DEPOSIT", "COMPLETED", null, "150000"]
      )

      const resent = yield* call(tenant, "POST", `/v1/webhooks/events/${created.eventId}/resend`)
      assert.strictEqual(resent.status, 200, resent.text)
      assert.deepStrictEqual(resent.json, { eventId: created.eventId, requeued: 1 })
      const [, , again] = yield* receiver.waitForRequests(3)
      const verified = verifyDelivery(again!, publicKey)
      assert.isTrue(verified.ok)
      if (!verified.ok) return
      assert.strictEqual(verified.body.eventId, created.eventId)
      assert.strictEqual(verified.body.type, "TRANSACTION_CREATED")
      assert.strictEqual(verified.body.data.status, "COMPLETED", "the data is the transaction at delivery time")
    })))
})
