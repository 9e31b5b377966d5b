import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { PublicAddress } from "../../src/App.ts"
import { sweepStuckWallets } from "../../src/wallets/ProvisioningSupervisor.ts"
import { opsClient, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"
import { makeTestAppLayer } from "../support/TestApp.ts"

/** Real time: deposit_address waits for provisioning with real sleeps. */
const AppLayer = makeTestAppLayer()

const post = (tenant: TestTenant, target: string, body: unknown, headers: Record<string, string> = {}) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "POST", target, body: JSON.stringify(body), tenant, headers })
const get = (tenant: TestTenant, target: string) => rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target, tenant })

const waitActive = (tenant: TestTenant, walletId: string) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 100; attempt++) {
      const response = yield* get(tenant, `/v1/wallets/${walletId}`)
      if (response.json.status === "ACTIVE") return response.json
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
    }
    throw new Error(`wallet ${walletId} did not become ACTIVE`)
  })

const setSettings = (tenantId: string, settings: Record<string, unknown>) =>
  Effect.gen(function*() {
    const ops = yield* opsClient
    yield* ops.tenants.update({ params: { tenantId }, payload: { settings } })
  }).pipe(Effect.orDie)

layer(AppLayer, { excludeTestServices: true })("wallets over HTTP", (it) => {
  describe("POST /v1/wallets", () => {
    it.effect("202 PROVISIONING with address null, then ACTIVE with an address and a WALLET_CREATED event", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const created = yield* post(tenant, "/v1/wallets", { customerRefId: "w-1", chainFamily: "EVM" }, {
          "idempotency-key": "create-1"
        })
        assert.strictEqual(created.status, 202)
        assert.strictEqual(created.json.status, "PROVISIONING")
        assert.isNull(created.json.address)
        assert.strictEqual(created.json.name, "EVM 1")
        assert.strictEqual(created.json.seq, 1)
        assert.isTrue(created.json.isDefault)
        assert.strictEqual(created.json.tenantId, tenant.tenantId)
        const active = yield* waitActive(tenant, created.json.id)
        assert.match(active.address, /^0x[0-9a-f]{40}$/)
        const sql = yield* SqlClient.SqlClient
        const events = yield* sql<{ data: any }>`
          SELECT data FROM outbox_events WHERE event_type = 'WALLET_CREATED' AND subject_id = ${created.json.id}`
        assert.strictEqual(events.length, 1)
        assert.deepStrictEqual(events[0]!.data, { walletId: created.json.id, chainFamily: "EVM", address: active.address })
      }))

    it.effect("second wallet of a family: seq 2, not default, name cut to 40 characters", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* post(tenant, "/v1/wallets", { customerRefId: "w-2", chainFamily: "TRON" }, { "idempotency-key": "a" })
        const second = yield* post(tenant, "/v1/wallets", {
          customerRefId: "w-2",
          chainFamily: "TRON",
          name: "n".repeat(50)
        }, { "idempotency-key": "b" })
        assert.strictEqual(second.status, 202)
        assert.strictEqual(second.json.seq, 2)
        assert.isFalse(second.json.isDefault)
        assert.strictEqual(second.json.name, "n".repeat(40))
        const active = yield* waitActive(tenant, second.json.id)
        assert.match(active.address, /^T[1-9A-HJ-NP-Za-km-z]{33}$/)
      }))

    it.effect("Idempotency-Key missing or malformed is 422 BAD_REQUEST; bad chainFamily and customerRefId too", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const missing = yield* post(tenant, "/v1/wallets", { customerRefId: "x", chainFamily: "EVM" })
        assert.strictEqual(missing.status, 422)
        assert.strictEqual(missing.json.error.code, "BAD_REQUEST")
        const malformed = yield* post(tenant, "/v1/wallets", { customerRefId: "x", chainFamily: "EVM" }, {
          "idempotency-key": "has space"
        })
        assert.strictEqual(malformed.status, 422)
        const family = yield* post(tenant, "/v1/wallets", { customerRefId: "x", chainFamily: "DOGE" }, {
          "idempotency-key": "k1"
        })
        assert.strictEqual(family.status, 422)
        assert.strictEqual(family.json.error.code, "BAD_REQUEST")
        const ref = yield* post(tenant, "/v1/wallets", { customerRefId: "   ", chainFamily: "EVM" }, {
          "idempotency-key": "k2"
        })
        assert.strictEqual(ref.status, 422)
        assert.strictEqual(ref.json.error.message, "customerRefId must be 1-128 chars")
      }))

    it.effect("idempotent replay returns the same status and bytes and creates one wallet; other body is 409", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const body = { customerRefId: "idem", chainFamily: "SOL" }
        const first = yield* post(tenant, "/v1/wallets", body, { "idempotency-key": "same" })
        const again = yield* post(tenant, "/v1/wallets", body, { "idempotency-key": "same" })
        assert.strictEqual(again.status, first.status)
        assert.strictEqual(again.text, first.text)
        const conflict = yield* post(tenant, "/v1/wallets", { ...body, name: "other" }, { "idempotency-key": "same" })
        assert.strictEqual(conflict.status, 409)
        assert.strictEqual(conflict.json.error.code, "IDEMPOTENCY_CONFLICT")
        const list = yield* get(tenant, "/v1/wallets?customerRefId=idem")
        assert.strictEqual(list.json.items.length, 1)
      }))

    it.effect("ten concurrent identical requests create one wallet", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const body = { customerRefId: "race", chainFamily: "BTC" }
        const responses = yield* Effect.all(
          Array.from({ length: 10 }, () => post(tenant, "/v1/wallets", body, { "idempotency-key": "race-key" })),
          { concurrency: "unbounded" }
        )
        for (const response of responses) assert.include([202, 409], response.status)
        const list = yield* get(tenant, "/v1/wallets?customerRefId=race")
        assert.strictEqual(list.json.items.length, 1)
      }))

    it.effect("a frozen user cannot get a wallet: 403 FORBIDDEN user is not active", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* post(tenant, "/v1/users", { customerRefId: "frozen" })
        yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "PATCH",
          target: "/v1/users/frozen",
          body: JSON.stringify({ status: "FROZEN" }),
          tenant
        })
        const response = yield* post(tenant, "/v1/wallets", { customerRefId: "frozen", chainFamily: "EVM" }, {
          "idempotency-key": "f"
        })
        assert.strictEqual(response.status, 403)
        assert.strictEqual(response.json.error.message, "user is not active")
      }))

    it.effect("WALLET_LIMIT_REACHED at the tenant's walletsPerFamily; RATE_LIMITED past walletCreationsPer24h", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* setSettings(tenant.tenantId, { walletsPerFamily: 1, walletCreationsPer24h: 2 })
        const first = yield* post(tenant, "/v1/wallets", { customerRefId: "lim", chainFamily: "EVM" }, {
          "idempotency-key": "l1"
        })
        assert.strictEqual(first.status, 202)
        const limit = yield* post(tenant, "/v1/wallets", { customerRefId: "lim", chainFamily: "EVM" }, {
          "idempotency-key": "l2"
        })
        assert.strictEqual(limit.status, 422)
        assert.strictEqual(limit.json.error.code, "WALLET_LIMIT_REACHED")
        const second = yield* post(tenant, "/v1/wallets", { customerRefId: "lim", chainFamily: "TRON" }, {
          "idempotency-key": "l3"
        })
        assert.strictEqual(second.status, 202)
        const rate = yield* post(tenant, "/v1/wallets", { customerRefId: "lim", chainFamily: "SOL" }, {
          "idempotency-key": "l4"
        })
        assert.strictEqual(rate.status, 429)
        assert.strictEqual(rate.json.error.code, "RATE_LIMITED")
        assert.strictEqual(rate.json.error.message, "too many wallets created in the last 24 hours")
        assert.isTrue(rate.json.error.retryable)
      }))

    it.effect("NETWORK_DISABLED when no network of the family is enabled for the tenant", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant({ networks: ["ETH_SEPOLIA"] })
        const response = yield* post(tenant, "/v1/wallets", { customerRefId: "nd", chainFamily: "TRON" }, {
          "idempotency-key": "nd"
        })
        assert.strictEqual(response.status, 422)
        assert.strictEqual(response.json.error.code, "NETWORK_DISABLED")
      }))
  })

  describe("reading wallets", () => {
    it.effect("GET /v1/wallets newest first with customerRefId and nextBefore paging; items carry customerRefId", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const ids: Array<string> = []
        for (const [index, family] of (["EVM", "TRON", "BTC"] as const).entries()) {
          const created = yield* post(tenant, "/v1/wallets", { customerRefId: "lister", chainFamily: family }, {
            "idempotency-key": `list-${index}`
          })
          ids.push(created.json.id)
        }
        const page1 = yield* get(tenant, "/v1/wallets?customerRefId=lister&limit=2")
        assert.deepStrictEqual(page1.json.items.map((item: any) => item.id), [ids[2], ids[1]])
        assert.strictEqual(page1.json.nextBefore, ids[1])
        assert.strictEqual(page1.json.items[0].customerRefId, "lister")
        assert.isUndefined(page1.json.items[0].tenantId)
        const page2 = yield* get(tenant, `/v1/wallets?customerRefId=lister&limit=2&before=${page1.json.nextBefore}`)
        assert.deepStrictEqual(page2.json.items.map((item: any) => item.id), [ids[0]])
        assert.isNull(page2.json.nextBefore)
        const user = yield* get(tenant, "/v1/users/lister")
        assert.strictEqual(user.json.wallets.length, 3)
      }))

    it.effect("another tenant's wallet is 404 NOT_FOUND on get, assets and addresses", () =>
      Effect.gen(function*() {
        const owner = yield* provisionTenant()
        const other = yield* provisionTenant()
        const created = yield* post(owner, "/v1/wallets", { customerRefId: "mine", chainFamily: "EVM" }, {
          "idempotency-key": "mine"
        })
        for (const suffix of ["", "/assets", "/addresses"]) {
          const response = yield* get(other, `/v1/wallets/${created.json.id}${suffix}`)
          assert.strictEqual(response.status, 404)
          assert.strictEqual(response.json.error.code, "NOT_FOUND")
        }
        const missing = yield* get(owner, "/v1/wallets/01a20190-0000-7000-8000-000000000000")
        assert.strictEqual(missing.json.error.message, "wallet not found")
        const unparsable = yield* get(owner, "/v1/wallets/not-a-uuid")
        assert.strictEqual(unparsable.status, 400)
      }))

    it.effect("addresses: one item per tenant network of the family, address once active, rule and assets", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const created = yield* post(tenant, "/v1/wallets", { customerRefId: "addr", chainFamily: "EVM" }, {
          "idempotency-key": "addr"
        })
        const active = yield* waitActive(tenant, created.json.id)
        const items = (yield* get(tenant, `/v1/wallets/${created.json.id}/addresses`)).json
        assert.deepStrictEqual(items.map((item: any) => item.networkKey).sort(), ["BSC_TESTNET", "ETH_SEPOLIA"])
        for (const item of items) {
          assert.strictEqual(item.address, active.address)
          assert.strictEqual(item.watchStatus, "ACTIVE")
          assert.strictEqual(item.walletId, created.json.id)
        }
        const sepolia = items.find((item: any) => item.networkKey === "ETH_SEPOLIA")
        assert.deepStrictEqual(sepolia.confirmations, { mode: "confirmations", n: 12 })
        assert.strictEqual(sepolia.networkName, "Ethereum Sepolia")
        const usdt = sepolia.supportedAssets.find((asset: any) => asset.assetId === "ETH_SEPOLIA_USDT")
        assert.deepStrictEqual(usdt, {
          assetId: "ETH_SEPOLIA_USDT",
          symbol: "USDT",
          name: "Tether USD",
          decimals: 6,
          minDepositRaw: "1000000",
          depositFeeRaw: "500000",
          depositPaused: false,
          iconUrl: null
        })
        const assets = yield* get(tenant, `/v1/wallets/${created.json.id}/assets`)
        assert.deepStrictEqual(assets.json, [])
      }))
  })

  describe("POST /v1/users/{customerRefId}/deposit_address", () => {
    it.effect("creates user and default wallet, READY with the address; repeats give the same wallet and address", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const first = yield* post(tenant, "/v1/users/dep-1/deposit_address", { networkKey: "ETH_SEPOLIA" })
        assert.strictEqual(first.status, 200)
        assert.strictEqual(first.json.status, "READY")
        assert.match(first.json.address, /^0x[0-9a-f]{40}$/)
        assert.strictEqual(first.json.customerRefId, "dep-1")
        assert.match(first.json.uid, /^[0-9]{8}$/)
        assert.strictEqual(first.json.chainFamily, "EVM")
        const again = yield* post(tenant, "/v1/users/dep-1/deposit_address", { networkKey: "ETH_SEPOLIA" })
        assert.deepStrictEqual(again.json, first.json)
        const bsc = yield* post(tenant, "/v1/users/dep-1/deposit_address", { networkKey: "BSC_TESTNET" })
        assert.strictEqual(bsc.json.address, first.json.address)
        assert.strictEqual(bsc.json.walletId, first.json.walletId)
        const btc = yield* post(tenant, "/v1/users/dep-1/deposit_address", { networkKey: "BTC_TESTNET" })
        assert.match(btc.json.address, /^tb1q[0-9a-z]{38}$/)
        const sol = yield* post(tenant, "/v1/users/dep-1/deposit_address", { networkKey: "SOL_DEVNET" })
        assert.match(sol.json.address, /^[1-9A-HJ-NP-Za-km-z]{32,44}$/)
      }))

    it.effect("ten parallel calls for a new user create one user and one wallet", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const responses = yield* Effect.all(
          Array.from({ length: 10 }, () => post(tenant, "/v1/users/par/deposit_address", { networkKey: "TRON_NILE" })),
          { concurrency: "unbounded" }
        )
        for (const response of responses) assert.strictEqual(response.status, 200)
        assert.strictEqual(new Set(responses.map((response) => response.json.walletId)).size, 1)
        assert.strictEqual(new Set(responses.map((response) => response.json.uid)).size, 1)
        const user = yield* get(tenant, "/v1/users/par")
        assert.strictEqual(user.json.wallets.length, 1)
      }))

    it.effect("frozen user without a wallet in the family is 403; with one, the address is still returned", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const evm = yield* post(tenant, "/v1/users/fz/deposit_address", { networkKey: "ETH_SEPOLIA" })
        yield* rawRequest({
          baseUrl: tenant.baseUrl,
          method: "PATCH",
          target: "/v1/users/fz",
          body: JSON.stringify({ status: "FROZEN" }),
          tenant
        })
        const again = yield* post(tenant, "/v1/users/fz/deposit_address", { networkKey: "ETH_SEPOLIA" })
        assert.strictEqual(again.json.address, evm.json.address)
        const tron = yield* post(tenant, "/v1/users/fz/deposit_address", { networkKey: "TRON_NILE" })
        assert.strictEqual(tron.status, 403)
        assert.strictEqual(tron.json.error.code, "FORBIDDEN")
        assert.strictEqual(tron.json.error.message, "user is not active")
      }))

    it.effect("a frozen (or hidden) default wallet is skipped: another usable wallet or a new one", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const first = yield* post(tenant, "/v1/users/skip/deposit_address", { networkKey: "ETH_SEPOLIA" })
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE wallets SET status = 'FROZEN' WHERE id = ${first.json.walletId}`
        const next = yield* post(tenant, "/v1/users/skip/deposit_address", { networkKey: "ETH_SEPOLIA" })
        assert.strictEqual(next.json.status, "READY")
        assert.notStrictEqual(next.json.walletId, first.json.walletId)
        assert.notStrictEqual(next.json.address, first.json.address)
        const again = yield* post(tenant, "/v1/users/skip/deposit_address", { networkKey: "ETH_SEPOLIA" })
        assert.strictEqual(again.json.walletId, next.json.walletId)
      }))

    it.effect("a network that joined the catalog after provisioning is registered on demand and by the sweep", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const sepolia = yield* post(tenant, "/v1/users/late/deposit_address", { networkKey: "ETH_SEPOLIA" })
        const walletId = sepolia.json.walletId
        const sql = yield* SqlClient.SqlClient
        // As if BSC_TESTNET had been added to the catalog after this wallet was provisioned.
        const forget = sql`DELETE FROM wallet_addresses WHERE wallet_id = ${walletId} AND network_key = 'BSC_TESTNET'`
        yield* forget
        const before = (yield* get(tenant, `/v1/wallets/${walletId}/addresses`)).json
        const bscBefore = before.find((item: any) => item.networkKey === "BSC_TESTNET")
        assert.isNull(bscBefore.watchStatus)
        assert.isNull(bscBefore.address)
        const bsc = yield* post(tenant, "/v1/users/late/deposit_address", { networkKey: "BSC_TESTNET" })
        assert.strictEqual(bsc.json.status, "READY")
        assert.strictEqual(bsc.json.address, sepolia.json.address)
        assert.strictEqual(bsc.json.walletId, walletId)
        // The supervisor's sweep finds such wallets on its own.
        yield* forget
        assert.isAtLeast(yield* sweepStuckWallets, 1)
        let registered = 0
        for (let attempt = 0; attempt < 100 && registered === 0; attempt++) {
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
          registered = (yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM wallet_addresses
            WHERE wallet_id = ${walletId} AND network_key = 'BSC_TESTNET'`)[0]!.n
        }
        assert.strictEqual(registered, 1)
      }))

    it.effect("NETWORK_DISABLED for a network not enabled for the tenant; 422 for a bad customerRefId or email", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant({ networks: ["ETH_SEPOLIA"] })
        const disabled = yield* post(tenant, "/v1/users/nd/deposit_address", { networkKey: "TRON_NILE" })
        assert.strictEqual(disabled.status, 422)
        assert.strictEqual(disabled.json.error.code, "NETWORK_DISABLED")
        const unknown = yield* post(tenant, "/v1/users/nd/deposit_address", { networkKey: "NOPE" })
        assert.strictEqual(unknown.json.error.code, "NETWORK_DISABLED")
        const email = yield* post(tenant, "/v1/users/nd/deposit_address", { networkKey: "ETH_SEPOLIA", email: "x" })
        assert.strictEqual(email.status, 422)
        assert.strictEqual(email.json.error.message, "invalid email")
        const longRef = yield* post(tenant, `/v1/users/${"r".repeat(129)}/deposit_address`, { networkKey: "ETH_SEPOLIA" })
        assert.strictEqual(longRef.status, 422)
        assert.strictEqual(longRef.json.error.message, "customerRefId must be 1-128 chars")
      }))
  })

  describe("GET /v1/transactions/validate_address/{assetId}/{address}", () => {
    it.effect("normalizes, flags this tenant's deposit addresses internal, refuses platform addresses", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const valid = yield* get(tenant, "/v1/transactions/validate_address/ETH_SEPOLIA_ETH/0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")
        assert.deepStrictEqual(valid.json, {
          isValid: true,
          normalized: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
          isInternal: false
        })
        const badChecksum = yield* get(tenant, "/v1/transactions/validate_address/ETH_SEPOLIA_ETH/0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed")
        assert.deepStrictEqual(badChecksum.json, { isValid: false, isInternal: false })
        const mainnetOnTestnet = yield* get(
          tenant,
          "/v1/transactions/validate_address/BTC_TESTNET_BTC/bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"
        )
        assert.isFalse(mainnetOnTestnet.json.isValid)
        const deposit = yield* post(tenant, "/v1/users/val/deposit_address", { networkKey: "ETH_SEPOLIA" })
        const internal = yield* get(
          tenant,
          `/v1/transactions/validate_address/ETH_SEPOLIA_USDT/${deposit.json.address.toUpperCase().replace("0X", "0x")}`
        )
        // An all-uppercase EVM address fails EIP-55 strictness; the lowercase form is internal.
        assert.isFalse(internal.json.isValid)
        const internalLower = yield* get(tenant, `/v1/transactions/validate_address/ETH_SEPOLIA_USDT/${deposit.json.address}`)
        assert.deepStrictEqual(internalLower.json, { isValid: true, normalized: deposit.json.address, isInternal: true })
        const other = yield* provisionTenant()
        const elsewhere = yield* get(other, `/v1/transactions/validate_address/ETH_SEPOLIA_USDT/${deposit.json.address}`)
        assert.isFalse(elsewhere.json.isInternal)
        const ops = yield* opsClient
        const platform = yield* ops.platform.addresses()
        const hot = platform.find((entry) => entry.networkKey === "ETH_SEPOLIA" && entry.role === "HOT")!
        const refused = yield* get(tenant, `/v1/transactions/validate_address/ETH_SEPOLIA_ETH/${hot.address}`)
        assert.strictEqual(refused.status, 422)
        assert.strictEqual(refused.json.error.code, "INTERNAL_DESTINATION_NOT_ALLOWED")
        const unknown = yield* get(tenant, "/v1/transactions/validate_address/NOPE/0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")
        assert.strictEqual(unknown.status, 422)
        assert.strictEqual(unknown.json.error.code, "ASSET_NOT_SUPPORTED")
      }))

    it.effect("GET /ops/platform/addresses lists HOT and SWEEP for every network and each tenant's GAS wallet per network", () =>
      Effect.gen(function*() {
        // operator-interface.md: `tenantId` set on a tenant's GAS wallet, else null (decisions.md "Operating wallets").
        const created = yield* provisionTenant()
        const ops = yield* opsClient
        const addresses = yield* ops.platform.addresses()
        const networks = new Set(addresses.map((entry) => entry.networkKey))
        assert.strictEqual(networks.size, 5)
        for (const network of networks) {
          const platform = addresses.filter((entry) => entry.networkKey === network && entry.tenantId === null)
          assert.deepStrictEqual(platform.map((entry) => entry.role).sort(), ["HOT", "SWEEP"])
          const gas = addresses.filter((entry) => entry.networkKey === network && entry.tenantId === created.tenantId)
          assert.deepStrictEqual(gas.map((entry) => entry.role), ["GAS"])
        }
        const gasWallets = addresses.filter((entry) => entry.role === "GAS" && entry.networkKey === "ETH_SEPOLIA")
        assert.isTrue(gasWallets.every((entry) => entry.tenantId !== null))
        assert.strictEqual(new Set(gasWallets.map((entry) => entry.address)).size, gasWallets.length, "one GAS wallet per tenant")
        // A tenant's GAS wallet is an INTERNAL_DESTINATION_NOT_ALLOWED target like HOT (for every tenant).
        const mine = gasWallets.find((entry) => entry.tenantId === created.tenantId)!
        const refused = yield* get(created, `/v1/transactions/validate_address/ETH_SEPOLIA_ETH/${mine.address}`)
        assert.strictEqual(refused.status, 422)
        assert.strictEqual(refused.json.error.code, "INTERNAL_DESTINATION_NOT_ALLOWED")
        const base = yield* PublicAddress
        assert.isString(base)
      }).pipe(Effect.orDie))
  })
})
