import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { validateAddress } from "../../src/chains/AddressValidation.ts"
import { checkCatalog, loadCatalogFile } from "../../src/catalog/Catalog.ts"
import { ServiceEnv } from "../../src/Config.ts"

describe("network and asset catalogs (kept as data, one file per SERVICE_ENV)", () => {
  for (const environment of ServiceEnv) {
    it.effect(`${environment}: loads, every family present, token contracts are valid addresses of their chain`, () =>
      Effect.gen(function*() {
        const catalog = yield* loadCatalogFile(environment)
        const families = new Set(catalog.networks.map((network) => network.chainFamily))
        assert.deepStrictEqual([...families].sort(), ["BTC", "EVM", "SOL", "TRON"])
        assert.isAtLeast(catalog.networks.filter((network) => network.chainFamily === "EVM").length, 2)
        for (const network of catalog.networks) {
          const assets = catalog.assets.filter((asset) => asset.networkKey === network.networkKey)
          assert.isTrue(assets.some((asset) => asset.kind === "NATIVE"), `${network.networkKey} has its coin`)
          if (network.chainFamily !== "BTC") {
            assert.isTrue(assets.some((asset) => asset.kind === "TOKEN"), `${network.networkKey} has a token`)
          }
          assert.strictEqual(network.isTestnet, environment !== "production")
        }
        for (const asset of catalog.assets.filter((candidate) => candidate.contract !== null)) {
          const network = catalog.networks.find((candidate) => candidate.networkKey === asset.networkKey)!
          const result = validateAddress({ family: network.chainFamily, address: asset.contract! })
          assert.isTrue(result.isValid, `${asset.assetId} contract ${asset.contract}`)
          if (network.chainFamily === "EVM" && result.isValid) assert.strictEqual(result.normalized, asset.contract)
        }
      }))
  }

  it.effect("cross-record rules: duplicate keys, unknown networks and a missing native coin are refused", () =>
    Effect.gen(function*() {
      const catalog = yield* loadCatalogFile("development")
      assert.isUndefined(checkCatalog(catalog))
      assert.strictEqual(
        checkCatalog({ ...catalog, networks: [...catalog.networks, catalog.networks[0]!] }),
        "duplicate networkKey"
      )
      assert.strictEqual(checkCatalog({ ...catalog, assets: [...catalog.assets, catalog.assets[0]!] }), "duplicate assetId")
      assert.match(
        checkCatalog({ ...catalog, assets: [{ ...catalog.assets[0]!, assetId: "X", networkKey: "NOPE" }] }) ?? "",
        /unknown network NOPE/
      )
      assert.match(
        checkCatalog({ ...catalog, assets: catalog.assets.filter((asset) => asset.assetId !== "TRON_NILE_TRX") }) ?? "",
        /TRON_NILE: nativeAssetId/
      )
    }))

  it.effect("an environment without a catalog file fails with a clear message", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(loadCatalogFile("staging"))
      assert.match(error.message, /no catalog for SERVICE_ENV=staging/)
    }))
})
