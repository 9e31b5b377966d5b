/** The pure rules of webhooks: URL per environment, subscriptions, refused addresses, outcomes and the schedule. */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { guardedLookup, literalRefusal, refusalReason } from "../../src/webhooks/AddressPolicy.ts"
import { checkDescription, checkEvents, checkWebhookUrl } from "../../src/webhooks/EndpointRules.ts"
import { classifyOutcome, nextAttemptAt } from "../../src/webhooks/WebhookDelivery.ts"

const errorOf = (url: string, env: "development" | "preproduction" | "production") => {
  const checked = checkWebhookUrl(url, env)
  return "error" in checked ? checked.error : undefined
}

describe("webhook URL rules (spec 4.5, operator interface SERVICE_ENV)", () => {
  it("development and preproduction accept http:// and https://; production only https://", () => {
    for (const env of ["development", "preproduction"] as const) {
      assert.isUndefined(errorOf("http://127.0.0.1:8080/hooks", env))
      assert.isUndefined(errorOf("https://example.com/hooks?x=1", env))
      assert.strictEqual(errorOf("HTTP://example.com/", env), "webhook url must start with https://")
    }
    assert.strictEqual(errorOf("http://example.com/", "production"), "webhook url must use https")
    assert.strictEqual(errorOf("HTTP://example.com/", "production"), "webhook url must use https")
    assert.isUndefined(errorOf("https://example.com/", "production"))
  })

  it("other schemes and repaired spellings: webhook url must start with https://", () => {
    for (const env of ["development", "production"] as const) {
      for (const url of ["ftp://example.com/", "javascript:alert(1)", "mailto:a@example.com", "https:example.com", "https:/example.com"]) {
        assert.strictEqual(errorOf(url, env), "webhook url must start with https://", `${url} in ${env}`)
      }
    }
  })

  it("invalid url: empty, whitespace anywhere, over 2048 characters, unparsable", () => {
    const base = "https://example.com/"
    const unicodeSpaces = ["\u0085", "\u00a0", "\u1680", "\u2028", "\u3000", "\ufeff"].map((space) => `${base}a${space}b`)
    for (const url of ["", " ", "https://exa mple.com/", `${base}\t`, ` ${base}`, "https://", "not a url", "https://[::1/", ...unicodeSpaces]) {
      assert.strictEqual(errorOf(url, "production"), "invalid url", JSON.stringify(url))
    }
    assert.isUndefined(errorOf(base + "a".repeat(2048 - base.length), "production"))
    assert.strictEqual(errorOf(base + "a".repeat(2049 - base.length), "production"), "invalid url")
  })

  it("credentials: user:pass@ and a user alone", () => {
    assert.strictEqual(errorOf("https://user:pass@example.com/", "production"), "webhook url must not contain credentials")
    assert.strictEqual(errorOf("https://user@example.com/", "production"), "webhook url must not contain credentials")
    assert.strictEqual(errorOf("https://:pass@example.com/", "development"), "webhook url must not contain credentials")
    // An @ in the path is not a credential.
    assert.isUndefined(errorOf("https://example.com/a@b", "production"))
  })

  it("the URL is stored as given, not normalized", () => {
    assert.deepStrictEqual(checkWebhookUrl("https://Example.com:443/a/../b", "production"), {
      url: "https://Example.com:443/a/../b"
    })
  })
})

describe("subscriptions and descriptions", () => {
  it("known types once each, in the order given; the first unknown one is named", () => {
    assert.deepStrictEqual(checkEvents([]), { events: [] })
    assert.deepStrictEqual(checkEvents(["VAULT_GAS_LOW", "WALLET_CREATED", "VAULT_GAS_LOW"]), {
      events: ["VAULT_GAS_LOW", "WALLET_CREATED"]
    })
    assert.deepStrictEqual(checkEvents(["WALLET_CREATED", "wallet_created", "X"]), {
      error: "unknown event type wallet_created"
    })
    assert.deepStrictEqual(checkEvents([""]), { error: "unknown event type " })
  })

  it("description: empty counts as none, at most 500 characters", () => {
    assert.deepStrictEqual(checkDescription(""), { description: null })
    assert.deepStrictEqual(checkDescription(null), { description: null })
    assert.deepStrictEqual(checkDescription("d".repeat(500)), { description: "d".repeat(500) })
    assert.deepStrictEqual(checkDescription("d".repeat(501)), { error: "description must be at most 500 chars" })
  })
})

describe("addresses a production delivery may not reach (spec 6, rule 4)", () => {
  it("private, loopback, link-local and other non-public ranges are refused; public unicast is not", () => {
    const refused: Array<[string, string]> = [
      ["10.1.2.3", "private"],
      ["172.16.0.1", "private"],
      ["192.168.1.1", "private"],
      ["127.0.0.1", "loopback"],
      ["127.8.9.10", "loopback"],
      ["169.254.169.254", "link-local"],
      ["0.0.0.0", "unspecified"],
      ["100.64.0.1", "shared (carrier-grade NAT)"],
      ["224.0.0.1", "multicast"],
      ["::1", "loopback"],
      ["fe80::1", "link-local"],
      ["fc00::1", "private"],
      ["fd12:3456::1", "private"],
      ["::ffff:10.0.0.1", "private"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::", "unspecified"]
    ]
    for (const [address, word] of refused) {
      assert.strictEqual(refusalReason(address), `${address} is a ${word} address`)
    }
    for (const address of ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      assert.isUndefined(refusalReason(address), address)
    }
  })

  it("IPv6: global unicast (2000::/3) only; IPv4-compatible ::/96 refused however it is written (issue 36)", () => {
    for (const address of ["::127.0.0.1", "::7f00:1", "::10.0.0.1", "::8.8.8.8"]) {
      assert.strictEqual(refusalReason(address), `${address} is an IPv4-compatible address`)
    }
    assert.strictEqual(refusalReason("4000::1"), "4000::1 is a non-global address")
    // The form a URL gives the socket: `[::127.0.0.1]` becomes `[::7f00:1]`.
    assert.strictEqual(literalRefusal(new URL("http://[::127.0.0.1]/")), "::7f00:1 is an IPv4-compatible address")
    assert.isUndefined(literalRefusal(new URL("https://[2606:4700:4700::1111]/")))
  })

  it("a name is checked on every address it resolves to: localhost is refused at lookup", async () => {
    const outcome = await new Promise<{ error: Error | null; address: unknown }>((resolve) =>
      guardedLookup("localhost", {}, (error, address) => resolve({ error, address }))
    )
    assert.instanceOf(outcome.error, Error)
    assert.match(outcome.error!.message, /^refused: localhost: .* is a loopback address$/)
  })
})

describe("attempt outcomes and the retry schedule (spec 6, rules 1-2)", () => {
  it("any 2xx is success; other statuses, no response and timeouts are failures", () => {
    for (const status of [200, 201, 202, 204, 299]) {
      assert.deepStrictEqual(classifyOutcome(Option.some({ _tag: "Response", status })), {
        delivered: true,
        responseStatus: status,
        lastError: null
      })
    }
    for (const status of [100, 199, 300, 301, 401, 404, 500, 599]) {
      assert.deepStrictEqual(classifyOutcome(Option.some({ _tag: "Response", status })), {
        delivered: false,
        responseStatus: status,
        lastError: `HTTP ${status}`
      })
    }
    assert.deepStrictEqual(classifyOutcome(Option.some({ _tag: "Response", status: 700 })), {
      delivered: false,
      responseStatus: null,
      lastError: "invalid HTTP status 700"
    })
    assert.deepStrictEqual(classifyOutcome(Option.some({ _tag: "NoResponse", reason: "connect ECONNREFUSED" })), {
      delivered: false,
      responseStatus: null,
      lastError: "connect ECONNREFUSED"
    })
    assert.deepStrictEqual(classifyOutcome(Option.none()), {
      delivered: false,
      responseStatus: null,
      lastError: "no response within 10 s"
    })
  })

  it("after failed attempt n the next is due 1m, 5m, 30m, 2h, 12h later; after the sixth none (DEAD)", () => {
    const failedAt = 1_000_000
    assert.deepStrictEqual(
      [1, 2, 3, 4, 5].map((attempt) => (nextAttemptAt(attempt, failedAt)! - failedAt) / 1000),
      [60, 300, 1800, 7200, 43200]
    )
    assert.isUndefined(nextAttemptAt(6, failedAt))
  })
})
