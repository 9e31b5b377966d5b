import { assert, describe, it } from "@effect/vitest"
import { visibleAddress, withNetworkWatch } from "../../src/wallets/AddressVisibility.ts"
import type { WalletAddress, WalletStatus } from "../../src/wallets/WalletRepository.ts"

const registration = (watchStatus: WalletAddress["watchStatus"]): WalletAddress => ({
  walletId: "w",
  networkKey: "ETH_SEPOLIA",
  address: "0xabc",
  watchStatus
})

describe("address visibility (spec 2, wallet address item)", () => {
  it("an address is shown only when the wallet is ACTIVE and the watch ACTIVE or DEGRADED", () => {
    const statuses: ReadonlyArray<WalletStatus> = ["PROVISIONING", "ACTIVE", "HIDDEN", "FROZEN", "CLOSED"]
    const watches: ReadonlyArray<WalletAddress["watchStatus"]> = ["ALLOCATED", "REGISTERING", "ACTIVE", "DEGRADED", "FROZEN"]
    for (const status of statuses) {
      assert.isNull(visibleAddress({ status }, undefined), `${status} without a registration`)
      for (const watch of watches) {
        const shown = status === "ACTIVE" && (watch === "ACTIVE" || watch === "DEGRADED")
        assert.strictEqual(visibleAddress({ status }, registration(watch)), shown ? "0xabc" : null, `${status}/${watch}`)
      }
    }
  })

  it("a network watch FROZEN by the operator shows FROZEN and hides the address (operator-interface.md, Switches)", () => {
    const frozen = withNetworkWatch(registration("ACTIVE"), "FROZEN")
    assert.strictEqual(frozen?.watchStatus, "FROZEN")
    assert.isNull(visibleAddress({ status: "ACTIVE" }, frozen))
    assert.strictEqual(withNetworkWatch(registration("DEGRADED"), "ACTIVE")?.watchStatus, "DEGRADED")
    assert.isUndefined(withNetworkWatch(undefined, "FROZEN"))
  })
})
