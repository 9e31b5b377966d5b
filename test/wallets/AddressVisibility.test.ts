import { assert, describe, it } from "@effect/vitest"
import type { NetworkWatchHealth } from "../../src/deposits/WatchHealth.ts"
import { addressItem, type NetworkWatchState } from "../../src/wallets/AddressVisibility.ts"
import type { WalletAddress, WalletStatus } from "../../src/wallets/WalletRepository.ts"

const registration = (watchStatus: WalletAddress["watchStatus"]): WalletAddress => ({
  walletId: "w",
  networkKey: "ETH_SEPOLIA",
  address: "0xabc",
  watchStatus
})

const followed: NetworkWatchState = { depositEnabled: true, watch: "ACTIVE", health: "ACTIVE" }

describe("address visibility (spec 2, wallet address item)", () => {
  it("an address is shown only when the wallet is ACTIVE and the watch ACTIVE or DEGRADED", () => {
    const statuses: ReadonlyArray<WalletStatus> = ["PROVISIONING", "ACTIVE", "HIDDEN", "FROZEN", "CLOSED"]
    const watches: ReadonlyArray<WalletAddress["watchStatus"]> = ["ALLOCATED", "REGISTERING", "ACTIVE", "DEGRADED", "FROZEN"]
    for (const status of statuses) {
      assert.deepStrictEqual(addressItem({ status }, undefined, followed), { watchStatus: null, address: null }, status)
      for (const watch of watches) {
        const shown = status === "ACTIVE" && (watch === "ACTIVE" || watch === "DEGRADED")
        const item = addressItem({ status }, registration(watch), followed)
        assert.deepStrictEqual(item, { watchStatus: watch, address: shown ? "0xabc" : null }, `${status}/${watch}`)
      }
    }
  })

  it("a network watch FROZEN by the operator shows FROZEN and hides the address (operator-interface.md, Switches)", () => {
    const frozen = { ...followed, watch: "FROZEN" as const }
    assert.deepStrictEqual(addressItem({ status: "ACTIVE" }, registration("ACTIVE"), frozen), { watchStatus: "FROZEN", address: null })
    assert.deepStrictEqual(addressItem({ status: "ACTIVE" }, undefined, frozen), { watchStatus: null, address: null })
  })

  it("decisions.md 'Sending on real networks': ACTIVE only while a watcher follows; nobody watching is ALLOCATED without the address, a lagging watcher DEGRADED with it", () => {
    const withHealth = (health: NetworkWatchHealth) => addressItem({ status: "ACTIVE" }, registration("ACTIVE"), { ...followed, health })
    assert.deepStrictEqual(withHealth("UNWATCHED"), { watchStatus: "ALLOCATED", address: null })
    assert.deepStrictEqual(withHealth("DEGRADED"), { watchStatus: "DEGRADED", address: "0xabc" })
    assert.deepStrictEqual(withHealth("ACTIVE"), { watchStatus: "ACTIVE", address: "0xabc" })
    // The operator's FROZEN outranks the watcher's state; a registration not yet ACTIVE shows what it is.
    assert.strictEqual(addressItem({ status: "ACTIVE" }, registration("ACTIVE"), { ...followed, watch: "FROZEN", health: "DEGRADED" }).watchStatus, "FROZEN")
    assert.strictEqual(addressItem({ status: "ACTIVE" }, registration("REGISTERING"), { ...followed, health: "DEGRADED" }).watchStatus, "REGISTERING")
  })

  it("no address on a network that takes no deposits (networkDepositEnabled false), whatever its watch", () => {
    const item = addressItem({ status: "ACTIVE" }, registration("ACTIVE"), { ...followed, depositEnabled: false })
    assert.deepStrictEqual(item, { watchStatus: "ACTIVE", address: null })
  })
})
