/**
 * Webhook host names are resolved by the asynchronous DNS client, never by getaddrinfo on libuv's thread pool, which
 * verifies every tenant's signatures (issue 36, docs/webhooks.md "Each attempt's connection"). A name server of our
 * own on loopback: what it answers is what the delivery connects to (getaddrinfo would not know these names), a
 * name server that never answers costs the attempt a couple of seconds and holds nothing else, and in production
 * every address a name resolves to is checked before the connection uses it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { verify as verifyWithCallback, generateKeyPairSync, sign } from "node:crypto"
import { dnsQueryTimeoutMillis } from "../../src/webhooks/AddressPolicy.ts"
import { makeTransport } from "../../src/webhooks/WebhookTransport.ts"
import { makeDnsServer } from "./fixtures/DnsServer.ts"
import { makeReceiver } from "./fixtures/Receiver.ts"

const post = (transport: ReturnType<typeof makeTransport>, url: string) =>
  transport.post({ url, headers: { "content-type": "application/json" }, body: Buffer.from("{}") })

/** Milliseconds until a signature check on libuv's thread pool (how the service verifies requests) completes. */
const threadPoolVerifyMillis = () => {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519")
  const message = Buffer.from("signed request")
  const signature = sign(null, message, privateKey)
  const started = performance.now()
  return new Promise<number>((resolve) =>
    verifyWithCallback(null, message, publicKey, signature, () => resolve(performance.now() - started))
  )
}

describe("webhook host names (asynchronous DNS)", () => {
  it.live("a name is resolved by the DNS, and the delivery connects to the address it answered", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const port = new URL(receiver.url).port
      const dns = yield* makeDnsServer({ records: { "hooks.coffer-test.example": ["127.0.0.1"] } })
      const transport = makeTransport({ refusePrivateAddresses: false, dnsServers: [dns.server] })
      const outcome = yield* post(transport, `http://hooks.coffer-test.example:${port}/hook`)
      assert.deepStrictEqual(outcome, { _tag: "Response", status: 200 })
      assert.strictEqual(receiver.requests.length, 1)
      assert.isAtLeast(dns.queries(), 1)
      const unknown = yield* post(transport, `http://unknown.coffer-test.example:${port}/hook`)
      assert.deepStrictEqual(unknown, { _tag: "NoResponse", reason: "no address for unknown.coffer-test.example" })
    }).pipe(Effect.scoped), 20_000)

  it.live("a name server that never answers: the attempt fails in seconds, signature checks never wait on it", () =>
    Effect.gen(function*() {
      const dns = yield* makeDnsServer({ records: {}, silent: true })
      const transport = makeTransport({ refusePrivateAddresses: false, dnsServers: [dns.server] })
      const started = performance.now()
      // More attempts at once than libuv has threads (4 by default in tests, 1 in the service).
      const attempts = Effect.forEach(
        Array.from({ length: 8 }, (_, index) => `http://stalled-${index}.coffer-test.example/hook`),
        (url) => post(transport, url),
        { concurrency: "unbounded" }
      )
      const checks = Effect.promise(async () => {
        await new Promise((resolve) => setTimeout(resolve, 100))
        const waits: Array<number> = []
        for (let index = 0; index < 5; index++) waits.push(await threadPoolVerifyMillis())
        return waits
      })
      const [outcomes, waits] = yield* Effect.all([attempts, checks], { concurrency: 2 })
      const elapsed = performance.now() - started
      for (const outcome of outcomes) {
        assert.strictEqual(outcome._tag, "NoResponse")
        assert.match((outcome as { reason: string }).reason, /^dns timeout for stalled-\d\.coffer-test\.example$/)
      }
      assert.isBelow(elapsed, 8 * dnsQueryTimeoutMillis, "two tries of a second each, A and AAAA together")
      assert.isBelow(Math.max(...waits), 500, `signature checks waited ${waits.map((w) => w.toFixed(0)).join(", ")} ms`)
    }).pipe(Effect.scoped), 30_000)

  it.live("production: a name with any non-public address is refused before connecting; a public one is used", () =>
    Effect.gen(function*() {
      const receiver = yield* makeReceiver()
      const port = new URL(receiver.url).port
      const dns = yield* makeDnsServer({
        records: {
          "private.coffer-test.example": ["10.0.0.7"],
          "mixed.coffer-test.example": ["93.184.216.34", "127.0.0.1"],
          "loop.coffer-test.example": ["127.0.0.1"]
        }
      })
      const transport = makeTransport({ refusePrivateAddresses: true, dnsServers: [dns.server] })
      assert.deepStrictEqual(yield* post(transport, `https://private.coffer-test.example:${port}/`), {
        _tag: "NoResponse",
        reason: "refused: private.coffer-test.example: 10.0.0.7 is a private address"
      })
      assert.deepStrictEqual(yield* post(transport, `https://mixed.coffer-test.example:${port}/`), {
        _tag: "NoResponse",
        reason: "refused: mixed.coffer-test.example: 127.0.0.1 is a loopback address"
      })
      assert.deepStrictEqual(yield* post(transport, `https://loop.coffer-test.example:${port}/`), {
        _tag: "NoResponse",
        reason: "refused: loop.coffer-test.example: 127.0.0.1 is a loopback address"
      })
      assert.strictEqual(receiver.requests.length, 0)
    }).pipe(Effect.scoped), 20_000)
})
