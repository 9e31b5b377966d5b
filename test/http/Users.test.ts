/**
 * Users (spec 4.2, section 2 "User object", "User list item", section 8 limits, decisions "nextCursor"), over the
 * real listener. Each test makes its own tenant, so lists and emails do not leak between tests.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { PublicAddress } from "../../src/App.ts"
import { assertError, atRealisticTime, freshTime } from "../support/Signing.ts"
import { makeTestAppLayer, opsClient, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

const call = (tenant: TestTenant, method: string, target: string, body?: unknown) =>
  Effect.flatMap(PublicAddress, (baseUrl) =>
    rawRequest({
      baseUrl,
      method,
      target,
      tenant,
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    }))

const createUser = (tenant: TestTenant, body: Record<string, unknown>) => call(tenant, "POST", "/v1/users", body)
const userPath = (customerRefId: string) => `/v1/users/${encodeURIComponent(customerRefId)}`

const userObjectKeys = [
  "cooldownUntil",
  "customerRefId",
  "email",
  "id",
  "nickname",
  "source",
  "status",
  "tenantId",
  "totpEnabled",
  "uid"
]
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const created = (response: { readonly status: number; readonly text: string; readonly json: any }) => {
  assert.strictEqual(response.status, 200, response.text)
  return response.json
}

layer(atRealisticTime(makeTestAppLayer()))("users (spec 4.2)", (it) => {
  it.effect("POST /v1/users returns the user object with every documented field", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const user = created(yield* createUser(tenant, { customerRefId: "first" }))
      assert.deepStrictEqual(Object.keys(user).sort(), userObjectKeys)
      assert.match(user.id, uuidPattern)
      assert.strictEqual(user.tenantId, tenant.tenantId)
      assert.match(user.uid, /^[0-9]{8}$/)
      assert.strictEqual(user.customerRefId, "first")
      assert.isNull(user.email)
      assert.isNull(user.nickname, "nickname is null when not given")
      assert.isFalse(user.totpEnabled)
      assert.strictEqual(user.source, "B_API")
      assert.strictEqual(user.status, "ACTIVE")
      assert.isNull(user.cooldownUntil)
    }))

  it.effect("customerRefId: trimmed, 1-128 chars after trimming, else 422 `customerRefId must be 1-128 chars`", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      assert.strictEqual(created(yield* createUser(tenant, { customerRefId: "  padded\t" })).customerRefId, "padded")
      const longest = "r".repeat(128)
      assert.strictEqual(created(yield* createUser(tenant, { customerRefId: longest })).customerRefId, longest)
      assert.strictEqual(created(yield* createUser(tenant, { customerRefId: ` ${"s".repeat(128)} ` })).customerRefId, "s".repeat(128))
      assert.strictEqual(created(yield* createUser(tenant, { customerRefId: "x" })).customerRefId, "x")
      for (const customerRefId of ["", "   ", "\t\n", "t".repeat(129)]) {
        assertError(yield* createUser(tenant, { customerRefId }), 422, "BAD_REQUEST", "customerRefId must be 1-128 chars")
      }
      // The trimmed id is the same user.
      const again = created(yield* createUser(tenant, { customerRefId: "padded" }))
      const found = created(yield* call(tenant, "GET", userPath("padded")))
      assert.strictEqual(found.user.id, again.id)
    }))

  it.effect("creation is idempotent by customerRefId: the original is returned unchanged", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const original = created(yield* createUser(tenant, {
        customerRefId: "idem",
        email: "first@example.com",
        nickname: "First"
      }))
      const repeat = created(yield* createUser(tenant, {
        customerRefId: "idem",
        email: "second@example.com",
        nickname: "Second",
        password: "another1234"
      }))
      assert.deepStrictEqual(repeat, original)
      const plain = created(yield* createUser(tenant, { customerRefId: "idem" }))
      assert.deepStrictEqual(plain, original)
      const found = created(yield* call(tenant, "GET", userPath("idem")))
      assert.strictEqual(found.user.email, "first@example.com")
      assert.strictEqual(found.user.nickname, "First")
    }))

  it.effect("email: optional, lower-cased, validated (422 invalid email)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const user = created(yield* createUser(tenant, { customerRefId: "mail", email: "Mixed.Case@Example.COM" }))
      assert.strictEqual(user.email, "mixed.case@example.com")
      assert.isNull(created(yield* createUser(tenant, { customerRefId: "no-mail", email: null })).email)
      for (const email of ["plain", "a@b", "@example.com", "a@", "a b@example.com", "a@@example.com", "a@example..com", ""]) {
        assertError(yield* createUser(tenant, { customerRefId: "bad-mail", email }), 422, "BAD_REQUEST", "invalid email")
      }
      // Nothing was created by the failures.
      assertError(yield* call(tenant, "GET", userPath("bad-mail")), 404, "NOT_FOUND", "user not found")
    }))

  it.effect("email is unique in the tenant (409 EMAIL_TAKEN, case-insensitively)", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      created(yield* createUser(tenant, { customerRefId: "owner", email: "taken@example.com" }))
      assertError(
        yield* createUser(tenant, { customerRefId: "thief", email: "TAKEN@example.com" }),
        409,
        "EMAIL_TAKEN"
      )
      assertError(yield* call(tenant, "GET", userPath("thief")), 404, "NOT_FOUND")
      // Another tenant may use the same email.
      const other = yield* provisionTenant()
      assert.strictEqual(
        created(yield* createUser(other, { customerRefId: "owner", email: "taken@example.com" })).email,
        "taken@example.com"
      )
    }))

  it.effect("password: requires email, 10-128 chars with letters and digits, never returned", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      assertError(
        yield* createUser(tenant, { customerRefId: "pw-no-mail", password: "letters1234" }),
        422,
        "BAD_REQUEST",
        "password requires an email"
      )
      for (const password of ["short1234", "onlyletterspassword", "12345678901234", "a1".repeat(64) + "x", ""]) {
        const response = yield* createUser(tenant, { customerRefId: "pw-weak", email: "weak@example.com", password })
        assertError(response, 422, "BAD_REQUEST")
      }
      assertError(yield* call(tenant, "GET", userPath("pw-weak")), 404, "NOT_FOUND")
      const shortest = yield* createUser(tenant, {
        customerRefId: "pw-ok",
        email: "ok@example.com",
        password: "abcde12345"
      })
      const user = created(shortest)
      assert.deepStrictEqual(Object.keys(user).sort(), userObjectKeys)
      assert.notInclude(shortest.text, "abcde12345")
      assert.notInclude(shortest.text.toLowerCase(), "password")
      assert.notInclude(shortest.text, "scrypt")
      // Letters of any script count (docs/decisions.md).
      created(yield* createUser(tenant, { customerRefId: "pw-cyr", email: "cyr@example.com", password: "пароль12345" }))
      const longest = created(yield* createUser(tenant, {
        customerRefId: "pw-long",
        email: "long@example.com",
        password: "a1".repeat(64)
      }))
      assert.strictEqual(longest.email, "long@example.com")
      const found = yield* call(tenant, "GET", userPath("pw-ok"))
      assert.notInclude(found.text, "abcde12345")
      assert.notInclude(found.text, "scrypt")
      // Stored only as a hash.
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ password_hash: string }>`SELECT password_hash FROM users WHERE id = ${user.id}`
      assert.match(rows[0]!.password_hash, /^scrypt\$/)
      assert.notInclude(rows[0]!.password_hash, "abcde12345")
    }))

  it.effect("nickname: trimmed, at most 32 chars", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      assert.strictEqual(created(yield* createUser(tenant, { customerRefId: "n1", nickname: "  Nick  " })).nickname, "Nick")
      assert.strictEqual(created(yield* createUser(tenant, { customerRefId: "n2", nickname: "n".repeat(32) })).nickname, "n".repeat(32))
      assertError(yield* createUser(tenant, { customerRefId: "n3", nickname: "n".repeat(33) }), 422, "BAD_REQUEST")
      assertError(yield* call(tenant, "GET", userPath("n3")), 404, "NOT_FOUND")
    }))

  it.effect("uid: 8 digits, unique in the tenant", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const users = yield* Effect.all(
        Array.from({ length: 20 }, (_, index) => createUser(tenant, { customerRefId: `uid-${index}` })),
        { concurrency: 5 }
      )
      const uids = users.map((response) => created(response).uid)
      for (const uid of uids) assert.match(uid, /^[0-9]{8}$/)
      assert.strictEqual(new Set(uids).size, uids.length)
    }))

  it.effect("10 parallel creates of one customerRefId produce one user", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const responses = yield* Effect.all(
        Array.from({ length: 10 }, (_, index) =>
          createUser(tenant, { customerRefId: "racer", email: "racer@example.com", nickname: `r${index}` })),
        { concurrency: "unbounded" }
      )
      const users = responses.map(created)
      assert.strictEqual(new Set(users.map((user) => user.id)).size, 1)
      assert.strictEqual(new Set(users.map((user) => user.uid)).size, 1)
      assert.strictEqual(new Set(users.map((user) => user.nickname)).size, 1)
      const list = created(yield* call(tenant, "GET", "/v1/users"))
      assert.strictEqual(list.items.filter((item: any) => item.customerRefId === "racer").length, 1)
      assert.strictEqual(list.items.length, 1)
    }))

  it.effect("GET /v1/users: list items newest first, with exactly the documented fields", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      // Created within one millisecond of the (test) clock: order must still be by creation.
      for (const customerRefId of ["u1", "u2", "u3", "u4", "u5"]) {
        created(yield* createUser(tenant, { customerRefId, email: `${customerRefId}@example.com` }))
      }
      const list = created(yield* call(tenant, "GET", "/v1/users"))
      assert.deepStrictEqual(Object.keys(list).sort(), ["items", "nextCursor"])
      assert.deepStrictEqual(list.items.map((item: any) => item.customerRefId), ["u5", "u4", "u3", "u2", "u1"])
      assert.isNull(list.nextCursor)
      const item = list.items[0]
      assert.deepStrictEqual(Object.keys(item).sort(), ["createdAt", "customerRefId", "email", "status", "uid"])
      assert.strictEqual(item.email, "u5@example.com")
      assert.strictEqual(item.status, "ACTIVE")
      assert.match(item.uid, /^[0-9]{8}$/)
      assert.strictEqual(new Date(item.createdAt).toISOString(), item.createdAt)
    }))

  it.effect("GET /v1/users: newest first across clock time as well", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const customerRefId of ["t1", "t2", "t3"]) {
        created(yield* createUser(tenant, { customerRefId }))
        yield* freshTime
      }
      const list = created(yield* call(tenant, "GET", "/v1/users"))
      assert.deepStrictEqual(list.items.map((item: any) => item.customerRefId), ["t3", "t2", "t1"])
      assert.isTrue(list.items[0].createdAt > list.items[2].createdAt)
    }))

  it.effect("GET /v1/users: cursor paging; nextCursor non-null exactly when the page is full", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const customerRefId of ["p1", "p2", "p3", "p4", "p5"]) created(yield* createUser(tenant, { customerRefId }))
      const page1 = created(yield* call(tenant, "GET", "/v1/users?limit=2"))
      assert.deepStrictEqual(page1.items.map((item: any) => item.customerRefId), ["p5", "p4"])
      assert.match(page1.nextCursor, /^[0-9a-f-]{36}$/)
      const page2 = created(yield* call(tenant, "GET", `/v1/users?limit=2&cursor=${page1.nextCursor}`))
      assert.deepStrictEqual(page2.items.map((item: any) => item.customerRefId), ["p3", "p2"])
      assert.isString(page2.nextCursor)
      const page3 = created(yield* call(tenant, "GET", `/v1/users?limit=2&cursor=${page2.nextCursor}`))
      assert.deepStrictEqual(page3.items.map((item: any) => item.customerRefId), ["p1"])
      assert.isNull(page3.nextCursor)
      // A page that is exactly full has a cursor; the page after it is empty.
      const full = created(yield* call(tenant, "GET", "/v1/users?limit=5"))
      assert.strictEqual(full.items.length, 5)
      assert.isString(full.nextCursor)
      const empty = created(yield* call(tenant, "GET", `/v1/users?limit=5&cursor=${full.nextCursor}`))
      assert.deepStrictEqual(empty.items, [])
      assert.isNull(empty.nextCursor)
      // Default page size 50 covers them all.
      const all = created(yield* call(tenant, "GET", "/v1/users"))
      assert.strictEqual(all.items.length, 5)
      assert.isNull(all.nextCursor)
    }))

  it.effect("GET /v1/users: status filter", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      for (const customerRefId of ["s1", "s2", "s3"]) created(yield* createUser(tenant, { customerRefId }))
      created(yield* call(tenant, "PATCH", userPath("s2"), { status: "FROZEN" }))
      const frozen = created(yield* call(tenant, "GET", "/v1/users?status=FROZEN"))
      assert.deepStrictEqual(frozen.items.map((item: any) => [item.customerRefId, item.status]), [["s2", "FROZEN"]])
      const active = created(yield* call(tenant, "GET", "/v1/users?status=ACTIVE"))
      assert.deepStrictEqual(active.items.map((item: any) => item.customerRefId), ["s3", "s1"])
      const closed = created(yield* call(tenant, "GET", "/v1/users?status=CLOSED"))
      assert.deepStrictEqual(closed.items, [])
      const paged = created(yield* call(tenant, "GET", "/v1/users?status=ACTIVE&limit=1"))
      assert.deepStrictEqual(paged.items.map((item: any) => item.customerRefId), ["s3"])
      const rest = created(yield* call(tenant, "GET", `/v1/users?status=ACTIVE&limit=1&cursor=${paged.nextCursor}`))
      assert.deepStrictEqual(rest.items.map((item: any) => item.customerRefId), ["s1"])
    }))

  it.effect("GET /v1/users lists only users with source B_API", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const api = created(yield* createUser(tenant, { customerRefId: "via-api" }))
      // A legacy self-registered portal user, as the portal would have stored it.
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO users (id, tenant_id, seq, uid, customer_ref_id, source, created_at, updated_at)
        VALUES ('01900000-0000-7000-8000-000000000001', ${tenant.tenantId}, 999, '99999999', 'via-portal',
          'C_DIRECT', now(), now())`
      const list = created(yield* call(tenant, "GET", "/v1/users"))
      assert.deepStrictEqual(list.items.map((item: any) => item.customerRefId), [api.customerRefId])
      const portal = created(yield* call(tenant, "GET", userPath("via-portal")))
      assert.strictEqual(portal.user.source, "C_DIRECT")
    }))

  it.effect("GET /v1/users/{customerRefId}: {user, wallets}; 404 user not found", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const user = created(yield* createUser(tenant, { customerRefId: "getme", email: "get@example.com", nickname: "G" }))
      const found = created(yield* call(tenant, "GET", userPath("getme")))
      assert.deepStrictEqual(Object.keys(found).sort(), ["user", "wallets"])
      assert.deepStrictEqual(found.user, user)
      assert.isArray(found.wallets)
      assertError(yield* call(tenant, "GET", userPath("nobody")), 404, "NOT_FOUND", "user not found")
      // Lookups are exact: no trimming or case folding of the path value.
      assertError(yield* call(tenant, "GET", userPath("GETME")), 404, "NOT_FOUND", "user not found")
      assertError(yield* call(tenant, "GET", userPath(" getme")), 404, "NOT_FOUND", "user not found")
    }))

  it.effect("PATCH /v1/users/{customerRefId}: email lower-cased, status ACTIVE/FROZEN", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const user = created(yield* createUser(tenant, { customerRefId: "patch", nickname: "P" }))
      const withEmail = created(yield* call(tenant, "PATCH", userPath("patch"), { email: "New@Example.com" }))
      assert.deepStrictEqual(withEmail, { ...user, email: "new@example.com" })
      const frozen = created(yield* call(tenant, "PATCH", userPath("patch"), { status: "FROZEN" }))
      assert.deepStrictEqual(frozen, { ...user, email: "new@example.com", status: "FROZEN" })
      const both = created(yield* call(tenant, "PATCH", userPath("patch"), { status: "ACTIVE", email: "x@example.com" }))
      assert.deepStrictEqual(both, { ...user, email: "x@example.com", status: "ACTIVE" })
      const unchanged = created(yield* call(tenant, "PATCH", userPath("patch"), {}))
      assert.deepStrictEqual(unchanged, both)
      // The change is stored.
      assert.deepStrictEqual(created(yield* call(tenant, "GET", userPath("patch"))).user, both)
    }))

  it.effect("PATCH: `status must be ACTIVE or FROZEN`, `invalid email`, email cannot be cleared", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      const user = created(yield* createUser(tenant, { customerRefId: "strict", email: "keep@example.com" }))
      for (const status of ["CLOSED", "frozen", "DELETED", ""]) {
        assertError(
          yield* call(tenant, "PATCH", userPath("strict"), { status }),
          422,
          "BAD_REQUEST",
          "status must be ACTIVE or FROZEN"
        )
      }
      for (const email of ["nope", "", null, "a@b"]) {
        assertError(yield* call(tenant, "PATCH", userPath("strict"), { email }), 422, "BAD_REQUEST", "invalid email")
      }
      // A failed PATCH changes nothing, not even the valid half of it.
      assertError(
        yield* call(tenant, "PATCH", userPath("strict"), { email: "other@example.com", status: "CLOSED" }),
        422,
        "BAD_REQUEST"
      )
      assert.deepStrictEqual(created(yield* call(tenant, "GET", userPath("strict"))).user, user)
      assertError(yield* call(tenant, "PATCH", userPath("ghost"), { status: "FROZEN" }), 404, "NOT_FOUND")
    }))

  it.effect("PATCH: 409 EMAIL_TAKEN for another user's email; keeping one's own is fine", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      created(yield* createUser(tenant, { customerRefId: "a", email: "a@example.com" }))
      created(yield* createUser(tenant, { customerRefId: "b", email: "b@example.com" }))
      assertError(yield* call(tenant, "PATCH", userPath("b"), { email: "A@example.com" }), 409, "EMAIL_TAKEN")
      assert.strictEqual(created(yield* call(tenant, "GET", userPath("b"))).user.email, "b@example.com")
      assert.strictEqual(created(yield* call(tenant, "PATCH", userPath("b"), { email: "b@example.com" })).email, "b@example.com")
    }))

  it.effect("GET /v1/users/{customerRefId}/balances: empty items before any bookkeeping; 404 for unknown", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      created(yield* createUser(tenant, { customerRefId: "rich/er" }))
      const balances = created(yield* call(tenant, "GET", `${userPath("rich/er")}/balances`))
      assert.deepStrictEqual(balances, { customerRefId: "rich/er", items: [] })
      assertError(yield* call(tenant, "GET", `${userPath("poor")}/balances`), 404, "NOT_FOUND", "user not found")
    }))

  it.effect("section 1 rule 1: another tenant's user is 404 everywhere and never listed", () =>
    Effect.gen(function*() {
      yield* freshTime
      const owner = yield* provisionTenant()
      const intruder = yield* provisionTenant()
      const user = created(yield* createUser(owner, { customerRefId: "private", email: "private@example.com" }))
      assertError(yield* call(intruder, "GET", userPath("private")), 404, "NOT_FOUND")
      assertError(yield* call(intruder, "GET", `${userPath("private")}/balances`), 404, "NOT_FOUND")
      assertError(yield* call(intruder, "PATCH", userPath("private"), { status: "FROZEN" }), 404, "NOT_FOUND")
      assert.deepStrictEqual(created(yield* call(intruder, "GET", "/v1/users")).items, [])
      // The intruder's own user with the same customerRefId is a different user; the owner's is untouched.
      const theirs = created(yield* createUser(intruder, { customerRefId: "private" }))
      assert.notStrictEqual(theirs.id, user.id)
      assert.strictEqual(theirs.tenantId, intruder.tenantId)
      assert.isNull(theirs.email)
      created(yield* call(intruder, "PATCH", userPath("private"), { status: "FROZEN" }))
      assert.deepStrictEqual(created(yield* call(owner, "GET", userPath("private"))).user, user)
      // A cursor from another tenant's list reveals nothing.
      const ownerList = created(yield* call(owner, "GET", "/v1/users?limit=1"))
      const viaCursor = created(yield* call(intruder, "GET", `/v1/users?cursor=${ownerList.nextCursor}`))
      assert.isFalse(viaCursor.items.some((item: any) => item.email === "private@example.com"))
    }))

  it.effect("operator TOTP binding shows as totpEnabled on the user object", () =>
    Effect.gen(function*() {
      yield* freshTime
      const tenant = yield* provisionTenant()
      created(yield* createUser(tenant, { customerRefId: "totp" }))
      const ops = yield* opsClient
      yield* ops.users.bindTotp({ params: { tenantId: tenant.tenantId, customerRefId: "totp" } })
      assert.isTrue(created(yield* call(tenant, "GET", userPath("totp"))).user.totpEnabled)
      assert.isTrue(created(yield* createUser(tenant, { customerRefId: "totp" })).totpEnabled)
    }))
})
