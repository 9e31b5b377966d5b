import { assert, describe, it } from "@effect/vitest"
import { ed25519 } from "@noble/curves/ed25519.js"
import { hexToBytes } from "@noble/hashes/utils.js"
import { validateMnemonic } from "@scure/bip39"
import { wordlist } from "@scure/bip39/wordlists/english.js"
import { Cause, Effect, Exit, Layer, Option, Redacted } from "effect"
import { createPublicKey, verify } from "node:crypto"
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ChainFamily } from "../../src/chains/ChainFamily.ts"
import { derivationIndexMax } from "../../src/chains/Derivation.ts"
import { AppConfig, type AppConfigShape } from "../../src/Config.ts"
import { developmentMnemonicFileName } from "../../src/signer/DevelopmentMnemonic.ts"
import { Signer } from "../../src/signer/Signer.ts"
import { abandonMnemonic, schemeVector } from "../chains/vectors.ts"

const families = ["EVM", "TRON", "BTC", "SOL"] as const
const otherMnemonic = "legal winner thank year wave sausage worth useful legal winner thank yellow"
const abandonLayer = Signer.layerLocalHd(Redacted.make(abandonMnemonic))

const withSigner = <A, E>(layer: Layer.Layer<Signer, E>, use: (signer: Signer["Service"]) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    return yield* use(yield* Signer)
  }).pipe(Effect.provide(layer))

/** The defect of a failed exit, to tell "bug, crash" apart from the typed SignerUnavailable. */
const defectOf = <A, E>(exit: Exit.Exit<A, E>): unknown => {
  assert.isTrue(Exit.isFailure(exit))
  if (!Exit.isFailure(exit)) return undefined
  assert.isTrue(Cause.hasDies(exit.cause))
  return exit.cause.reasons.find(Cause.isDieReason)?.defect
}

/** A fresh data directory for each test, removed afterwards. */
const tempDataDir = Effect.acquireRelease(
  Effect.promise(() => mkdtemp(join(tmpdir(), "coffer-signer-"))),
  (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
)

const configLayer = (overrides: Partial<AppConfigShape>) =>
  Signer.layerConfig.pipe(Layer.provide(AppConfig.layerTest(overrides)))

describe("Signer.layerLocalHd: addresses follow the derivation scheme", () => {
  it.effect("deriveAddress returns the scheme vectors for tenant rows (T >= 1) of all four families", () =>
    withSigner(abandonLayer, (signer) =>
      Effect.gen(function*() {
        for (const indices of [[1, 0, 0], [derivationIndexMax, derivationIndexMax, derivationIndexMax]] as const) {
          for (const family of families) {
            const [tenantIndex, userIndex, walletIndex] = indices
            const derived = yield* signer.deriveAddress({ family, btcNetwork: "main", tenantIndex, userIndex, walletIndex })
            assert.strictEqual(derived.address, schemeVector(family, indices))
          }
        }
        const evm = yield* signer.deriveAddress({ family: "EVM", tenantIndex: 1, userIndex: 0, walletIndex: 0 })
        assert.strictEqual(evm.path, "m/44'/60'/1'/0'/0")
        const sol = yield* signer.deriveAddress({ family: "SOL", tenantIndex: 1, userIndex: 0, walletIndex: 0 })
        assert.strictEqual(sol.path, "m/44'/501'/1'/0'/0'")
      })
    ))

  it.effect("platform HOT and SWEEP are (0,0,0) and (0,1,0); a tenant's GAS is (0,2,tenant index)", () =>
    withSigner(abandonLayer, (signer) =>
      Effect.gen(function*() {
        for (const family of families) {
          const hot = yield* signer.platformAddress({ family, btcNetwork: "main", role: "HOT" })
          const sweep = yield* signer.platformAddress({ family, btcNetwork: "main", role: "SWEEP" })
          assert.strictEqual(hot.address, schemeVector(family, [0, 0, 0]))
          assert.strictEqual(sweep.address, schemeVector(family, [0, 1, 0]))
        }
        // decisions.md "Operating wallets": a GAS wallet per tenant and network, on a path no user wallet uses.
        const gas = yield* signer.platformAddress({ family: "TRON", role: "GAS", tenantIndex: 7 })
        assert.strictEqual(gas.path, "m/44'/195'/0'/2'/7")
        const shared = yield* Effect.exit(signer.platformAddress({ family: "TRON", role: "GAS" }))
        assert.isTrue(shared._tag === "Failure", "a GAS wallet without its tenant is a caller bug")
        const btcTest = yield* signer.platformAddress({ family: "BTC", btcNetwork: "test", role: "HOT" })
        assert.strictEqual(btcTest.path, "m/84'/1'/0'/0'/0")
      })
    ))

  it.effect("repeated derivations (cached) are identical; BTC test and regtest are not confused", () =>
    withSigner(abandonLayer, (signer) =>
      Effect.gen(function*() {
        const request = { family: "BTC" as ChainFamily, tenantIndex: 4, userIndex: 5, walletIndex: 6 }
        const test1 = yield* signer.deriveAddress({ ...request, btcNetwork: "test" })
        const regtest = yield* signer.deriveAddress({ ...request, btcNetwork: "regtest" })
        const test2 = yield* signer.deriveAddress({ ...request, btcNetwork: "test" })
        assert.deepStrictEqual(test2, test1)
        assert.isTrue(test1.address.startsWith("tb1q"))
        assert.isTrue(regtest.address.startsWith("bcrt1q"))
        assert.strictEqual(regtest.path, test1.path)
      })
    ))

  it.effect("two signers from the same mnemonic agree; another mnemonic gives other keys", () =>
    Effect.gen(function*() {
      const request = { family: "EVM" as const, tenantIndex: 3, userIndex: 2, walletIndex: 1 }
      const read = (layer: Layer.Layer<Signer, unknown>) =>
        withSigner(layer, (signer) => Effect.all([signer.deriveAddress(request), signer.webhookPublicKey()]))
      const [first, second, other] = yield* Effect.all([
        read(abandonLayer),
        read(Signer.layerLocalHd(Redacted.make(abandonMnemonic))),
        read(Signer.layerLocalHd(Redacted.make(otherMnemonic)))
      ])
      assert.deepStrictEqual(second, first)
      assert.notStrictEqual(other[0].address, first[0].address)
      assert.notStrictEqual(other[1], first[1])
    }))

  it.effect("tenant index 0 is the platform's: deriveAddress dies instead of handing out a hot-wallet key", () =>
    withSigner(abandonLayer, (signer) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(signer.deriveAddress({ family: "EVM", tenantIndex: 0, userIndex: 0, walletIndex: 0 }))
        assert.match(String(defectOf(exit)), /tenantIndex 0 is reserved/)
      })
    ))

  it.effect("an index outside [0, 2^31-1] or BTC without a network is a defect, not SignerUnavailable", () =>
    withSigner(abandonLayer, (signer) =>
      Effect.gen(function*() {
        const outOfRange = yield* Effect.exit(
          signer.deriveAddress({ family: "SOL", tenantIndex: 1, userIndex: 2 ** 31, walletIndex: 0 })
        )
        assert.match(String(defectOf(outOfRange)), /userIndex must be an integer/)
        const noNetwork = yield* Effect.exit(signer.platformAddress({ family: "BTC", role: "HOT" }))
        assert.match(String(defectOf(noNetwork)), /btcNetwork is required/)
      })
    ))

  it.effect("status is ACTIVE", () =>
    withSigner(abandonLayer, (signer) => Effect.map(signer.status(), (status) => assert.strictEqual(status, "ACTIVE"))))

  it.effect("an invalid mnemonic fails the layer with SignerUnavailable and does not echo the words", () =>
    Effect.gen(function*() {
      const words = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon"
      const error = yield* Effect.flip(withSigner(Signer.layerLocalHd(Redacted.make(words)), (signer) => signer.status()))
      assert.strictEqual(error._tag, "SignerUnavailable")
      assert.notInclude(error.message, "abandon")
    }))
})

describe("Signer webhook key (decisions: one Ed25519 key pair, key id v1, from the signer)", () => {
  it.effect("signWebhook verifies against webhookPublicKey with @noble/curves and node:crypto", () =>
    withSigner(abandonLayer, (signer) =>
      Effect.gen(function*() {
        const publicKeyHex = yield* signer.webhookPublicKey()
        assert.match(publicKeyHex, /^[0-9a-f]{64}$/)
        assert.strictEqual(publicKeyHex, "f39e683350f18af355dd78a0e68447a709270330f7236dab4a13d822a48bcbda")
        const message = new TextEncoder().encode(`1700000000.evt_1.{"type":"TRANSACTION_CREATED"}`)
        const signatureHex = yield* signer.signWebhook(message)
        assert.match(signatureHex, /^[0-9a-f]{128}$/)

        const publicKey = hexToBytes(publicKeyHex)
        const signature = hexToBytes(signatureHex)
        assert.isTrue(ed25519.verify(signature, message, publicKey))
        const tampered = message.slice()
        tampered[0] = tampered[0]! ^ 1
        assert.isFalse(ed25519.verify(signature, tampered, publicKey))

        const nodeKey = createPublicKey({
          key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(publicKey).toString("base64url") },
          format: "jwk"
        })
        assert.isTrue(verify(null, message, nodeKey, signature))
        // Ed25519 is deterministic: signing again gives the same bytes.
        assert.strictEqual(yield* signer.signWebhook(message), signatureHex)
      })
    ))

  it.effect("an empty message signs and verifies", () =>
    withSigner(abandonLayer, (signer) =>
      Effect.gen(function*() {
        const signature = yield* signer.signWebhook(new Uint8Array(0))
        const publicKey = yield* signer.webhookPublicKey()
        assert.isTrue(ed25519.verify(hexToBytes(signature), new Uint8Array(0), hexToBytes(publicKey)))
      })
    ))
})

describe("Signer.layerDisabled", () => {
  it.effect("every method fails with SignerUnavailable; status is DISABLED", () =>
    withSigner(Signer.layerDisabled, (signer) =>
      Effect.gen(function*() {
        const failures = yield* Effect.all([
          Effect.flip(signer.deriveAddress({ family: "EVM", tenantIndex: 1, userIndex: 0, walletIndex: 0 })),
          Effect.flip(signer.platformAddress({ family: "SOL", role: "HOT" })),
          Effect.flip(signer.webhookPublicKey()),
          Effect.flip(signer.signWebhook(new Uint8Array([1, 2, 3])))
        ])
        for (const error of failures) {
          assert.strictEqual(error._tag, "SignerUnavailable")
          assert.strictEqual(error.message, "signer is disabled in this environment")
        }
        assert.strictEqual(yield* signer.status(), "DISABLED")
      })
    ))
})

describe("Signer.layerConfig", () => {
  it.effect("preproduction is disabled even when a mnemonic is configured", () =>
    withSigner(
      configLayer({ serviceEnv: "preproduction", signerMnemonic: Option.some(Redacted.make(abandonMnemonic)) }),
      (signer) => Effect.map(signer.status(), (status) => assert.strictEqual(status, "DISABLED"))
    ))

  it.effect("a configured mnemonic is used as is (production)", () =>
    withSigner(
      configLayer({ serviceEnv: "production", signerMnemonic: Option.some(Redacted.make(abandonMnemonic)) }),
      (signer) =>
        Effect.gen(function*() {
          assert.strictEqual(yield* signer.status(), "ACTIVE")
          const hot = yield* signer.platformAddress({ family: "EVM", role: "HOT" })
          assert.strictEqual(hot.address, schemeVector("EVM", [0, 0, 0]))
        })
    ))

  it.effect("production without SIGNER_MNEMONIC refuses to start", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDataDir
      const error = yield* Effect.flip(
        withSigner(configLayer({ serviceEnv: "production", dataDir }), (signer) => signer.status())
      )
      assert.strictEqual(error._tag, "SignerUnavailable")
      assert.include(error.message, "SIGNER_MNEMONIC must be set")
      // Nothing was generated on the production path.
      const exit = yield* Effect.exit(Effect.promise(() => stat(join(dataDir, developmentMnemonicFileName))))
      assert.isTrue(Exit.isFailure(exit))
    }))

  it.effect("development without a mnemonic generates one once (mode 0600) and reuses it on the next start", () =>
    Effect.gen(function*() {
      const dataDir = join(yield* tempDataDir, "nested", "data")
      const layer = configLayer({ serviceEnv: "development", dataDir })
      const readKeys = withSigner(layer, (signer) =>
        Effect.all([signer.webhookPublicKey(), signer.deriveAddress({ family: "SOL", tenantIndex: 1, userIndex: 1, walletIndex: 1 })])
      )
      const first = yield* readKeys
      const file = join(dataDir, developmentMnemonicFileName)
      const content = yield* Effect.promise(() => readFile(file, "utf8"))
      const mode = (yield* Effect.promise(() => stat(file))).mode & 0o777
      assert.strictEqual(mode, 0o600)
      const words = content.trim().split(" ")
      assert.strictEqual(words.length, 24)
      assert.isTrue(validateMnemonic(content.trim(), wordlist))

      const second = yield* readKeys
      assert.deepStrictEqual(second, first)
      assert.strictEqual(yield* Effect.promise(() => readFile(file, "utf8")), content)

      // The file is the source of truth: the same words through layerLocalHd give the same keys.
      const direct = yield* withSigner(Signer.layerLocalHd(Redacted.make(content)), (signer) => signer.webhookPublicKey())
      assert.strictEqual(direct, first[0])
    }))

  it.effect("development with a corrupt mnemonic file fails and leaves the file alone", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDataDir
      const file = join(dataDir, developmentMnemonicFileName)
      yield* Effect.promise(() => writeFile(file, "not a mnemonic\n", { mode: 0o600 }))
      const error = yield* Effect.flip(
        withSigner(configLayer({ serviceEnv: "development", dataDir }), (signer) => signer.status())
      )
      assert.strictEqual(error._tag, "SignerUnavailable")
      assert.include(error.message, "is not a valid English BIP-39 mnemonic")
      assert.strictEqual(yield* Effect.promise(() => readFile(file, "utf8")), "not a mnemonic\n")
    }))
})
