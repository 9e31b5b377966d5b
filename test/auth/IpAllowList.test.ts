/**
 * Spec section 5, check 6 as pure functions: allow-list entries (IP or CIDR, IPv4 and IPv6) and the client ip,
 * including peers a loopback test listener cannot produce (IPv6 and IPv4-mapped sockets).
 */
import { assert, describe, it } from "@effect/vitest"
import { clientIp, isIpOrCidr, makeIpMatcher } from "../../src/auth/IpAllowList.ts"

describe("IpAllowList", () => {
  it("operator input: IP or CIDR, IPv4 or IPv6", () => {
    for (const entry of ["10.0.0.1", "10.0.0.0/8", "0.0.0.0/0", "::1", "2001:db8::/32", "::/0", "fe80::1", " 10.0.0.1 "]) {
      assert.isTrue(isIpOrCidr(entry), entry)
    }
    for (const entry of ["", "abc", "300.1.1.1", "10.0.0.0/33", "2001:db8::/129", "10.0.0.0/", "/8", "10.0.0.0/8/8", "1.2.3.4.5"]) {
      assert.isFalse(isIpOrCidr(entry), entry)
    }
  })

  it("operator input: only dotted-quad IPv4 (no shorthand or hex forms that read as other addresses)", () => {
    for (const entry of ["10", "127.1", "10.1.2", "0x7f000001", "0x7f.0.0.1", "017.0.0.1/8"]) {
      assert.isFalse(isIpOrCidr(entry), entry)
    }
  })

  it("matching: single addresses, ranges, and families kept apart", () => {
    const matcher = makeIpMatcher(["10.0.0.0/8", "192.168.1.5", "2001:db8::/32"])
    assert.isTrue(matcher("10.255.0.1"))
    assert.isTrue(matcher("192.168.1.5"))
    assert.isFalse(matcher("192.168.1.6"))
    assert.isTrue(matcher("2001:db8:ffff::1"))
    assert.isFalse(matcher("2001:db9::1"))
    assert.isTrue(matcher("::ffff:10.0.0.1"), "an IPv4-mapped peer is its IPv4 address")
    assert.isFalse(matcher("garbage"))
    assert.isFalse(makeIpMatcher([])("10.0.0.1"))
  })

  it("client ip: the TCP peer, normalized", () => {
    const noProxy = makeIpMatcher([])
    assert.strictEqual(clientIp("127.0.0.1", undefined, noProxy), "127.0.0.1")
    assert.strictEqual(clientIp("::ffff:127.0.0.1", undefined, noProxy), "127.0.0.1")
    assert.strictEqual(clientIp("2001:0db8:0:0:0:0:0:1", undefined, noProxy), "2001:db8::1")
    assert.strictEqual(clientIp("::ffff:127.0.0.1", "203.0.113.7", noProxy), "127.0.0.1")
    assert.isUndefined(clientIp(undefined, undefined, noProxy))
  })

  it("client ip: the first X-Forwarded-For address only when the peer is a trusted proxy", () => {
    const proxies = makeIpMatcher(["10.0.0.0/8", "fd00::/8"])
    assert.strictEqual(clientIp("10.1.1.1", "203.0.113.7, 10.1.1.1", proxies), "203.0.113.7")
    assert.strictEqual(clientIp("::ffff:10.1.1.1", "203.0.113.7", proxies), "203.0.113.7")
    assert.strictEqual(clientIp("fd00::1", "2001:db8::7", proxies), "2001:db8::7")
    assert.strictEqual(clientIp("10.1.1.1", undefined, proxies), "10.1.1.1")
    assert.strictEqual(clientIp("192.0.2.1", "203.0.113.7", proxies), "192.0.2.1")
    assert.isUndefined(clientIp("10.1.1.1", "bogus", proxies))
    assert.isUndefined(clientIp("10.1.1.1", "", proxies))
  })
})
