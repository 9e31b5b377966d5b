/**
 * The signer: the only holder of key material. It derives wallet and platform addresses, signs transfers on the four
 * chain families (offline: every chain parameter comes in the request, see TransactionRequest.ts) and signs webhooks;
 * private keys never leave it (no method returns one). Implementations:
 *
 * - `layerLocalHd(mnemonic)`: keys derived from a BIP-39 mnemonic (empty passphrase) in this process.
 * - `layerDisabled`: every operation fails with `SignerUnavailable` (preproduction runs without keys).
 * - `layerConfig`: picks one of the two from AppConfig; see there.
 */
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import { createPrivateKey, pbkdf2Sync, sign, type KeyObject } from "node:crypto"
import { AppConfig } from "../Config.ts"
import {
  type DerivationRequest,
  type DerivedAddress,
  type DerivedKey,
  deriveAddress as deriveAddressFromRoot,
  deriveKey,
  deriveWebhookSigningKey,
  hdRootFromSeed,
  type KeyTarget,
  platformIndices,
  type PlatformRole,
  platformTenantIndex
} from "../chains/Derivation.ts"
import { SignerUnavailable } from "../domain/ApiError.ts"
import { makeBoundedCache } from "../domain/BoundedCache.ts"
import { loadOrCreateDevelopmentMnemonic, parseMnemonic } from "./DevelopmentMnemonic.ts"
import type { KeySource } from "./KeySource.ts"
import type { SignedTransaction, TransactionRequest } from "./TransactionRequest.ts"

export type SignerStatus = "ACTIVE" | "DISABLED"

export interface PlatformAddressRequest extends KeyTarget {
  readonly role: PlatformRole
  /** The tenant's index (tenants.seq) for its GAS wallet; required with GAS, absent otherwise. */
  readonly tenantIndex?: number | undefined
}

export interface SignerShape {
  /** A tenant wallet's address; `tenantIndex` must be >= 1 (0 belongs to the platform). */
  readonly deriveAddress: (request: DerivationRequest) => Effect.Effect<DerivedAddress, SignerUnavailable>
  /** A platform operating address (HOT, SWEEP, GAS); tenants may never withdraw to these. */
  readonly platformAddress: (request: PlatformAddressRequest) => Effect.Effect<DerivedAddress, SignerUnavailable>
  /**
   * Signs a fully specified transfer. A request the chain would reject as malformed (bad address, outputs above
   * inputs, tenantIndex 0 for a wallet key) is a caller bug and dies. SignerUnavailable: not now (down,
   * unreachable, disabled here), try again later; SignerRefused: never for this request (a remote signer's policy or
   * a key it does not hold). The local HD signer never refuses.
   */
  readonly signTransaction: (request: TransactionRequest) => Effect.Effect<SignedTransaction, SignerUnavailable | SignerRefused>
  /** The webhook verification key (key id `v1`): raw Ed25519 public key, 64 lowercase hex characters. */
  readonly webhookPublicKey: () => Effect.Effect<string, SignerUnavailable>
  /** Ed25519 signature of exactly `message`, 128 lowercase hex characters. */
  readonly signWebhook: (message: Uint8Array) => Effect.Effect<string, SignerUnavailable>
  readonly status: () => Effect.Effect<SignerStatus>
}

/**
 * The signer will never sign this request (decisions.md "Sending on real networks": only such a refusal fails a
 * withdrawal with SIGNING_FAILED; an unreachable signer makes it wait).
 */
export class SignerRefused extends Data.TaggedError("SignerRefused")<{ readonly message: string }> {}

const disabledMessage = "signer is disabled in this environment"

/**
 * Bound on memoised addresses. A derivation costs 2-4 ms of CPU (three HD steps, each an HMAC-SHA512 and a point
 * multiplication); deposit matching and "is this an internal address" checks ask for the same few addresses over
 * and over. 10,000 entries of ~200 bytes each stay around 2 MB.
 */
const addressCacheEntriesMax = 10_000

/**
 * Bound on memoised signing keys. Deriving a key took 1.3 ms of CPU and a whole EVM signature 2.2 ms, against 0.6 ms
 * with the key at hand (measured here); every withdrawal signs with its network's HOT key while that address's nonce
 * row is held, so the derivation was most of the time other signatures waited. The keys are no more exposed than
 * before: the HD root they come from stays in the same memory. 1,000 entries cover the operating keys and the
 * deposit addresses a sweep round signs for.
 */
const signingKeyCacheEntriesMax = 1_000

function makeDisabled(): SignerShape {
  const unavailable = () => new SignerUnavailable({ message: disabledMessage })
  return {
    deriveAddress: Effect.fn("Signer.deriveAddress")(function*(_request: DerivationRequest) {
      return yield* unavailable()
    }),
    platformAddress: Effect.fn("Signer.platformAddress")(function*(_request: PlatformAddressRequest) {
      return yield* unavailable()
    }),
    signTransaction: Effect.fn("Signer.signTransaction")(function*(_request: TransactionRequest) {
      return yield* unavailable()
    }),
    webhookPublicKey: Effect.fn("Signer.webhookPublicKey")(function*() {
      return yield* unavailable()
    }),
    signWebhook: Effect.fn("Signer.signWebhook")(function*(_message: Uint8Array) {
      return yield* unavailable()
    }),
    status: Effect.fn("Signer.status")(function*() {
      return "DISABLED" as const
    })
  }
}

/**
 * Node's Ed25519 (OpenSSL) signed a 1 KB message in ~50 us against ~800 us for @noble/curves (measured here), and
 * every webhook delivery attempt signs; the key is imported once.
 */
const ed25519KeyObject = (key: { readonly publicKey: Uint8Array; readonly privateKey: Uint8Array }): KeyObject =>
  createPrivateKey({
    key: {
      kty: "OKP",
      crv: "Ed25519",
      d: Buffer.from(key.privateKey).toString("base64url"),
      x: Buffer.from(key.publicKey).toString("base64url")
    },
    format: "jwk"
  })

/**
 * BIP-39's seed: PBKDF2-HMAC-SHA512 of the NFKD mnemonic, salt "mnemonic" (no passphrase), 2048 rounds. node:crypto
 * takes 1.5 ms where @scure/bip39's `mnemonicToSeedSync` took 32 ms of every start (measured here); the derivation
 * vectors in test/chains hold both to the same bytes.
 */
const mnemonicToSeed = (mnemonic: string): Uint8Array =>
  new Uint8Array(pbkdf2Sync(mnemonic.normalize("NFKD"), "mnemonic", 2048, 64, "sha512"))

const makeLocalHd = (mnemonic: Redacted.Redacted<string>) =>
  Effect.gen(function*() {
    const valid = yield* parseMnemonic(mnemonic, "the signer mnemonic")
    const seed = mnemonicToSeed(Redacted.value(valid))
    const root = hdRootFromSeed(seed)
    // The HD root keeps what it needs; the seed itself is not needed again.
    seed.fill(0)

    const webhookKey = deriveWebhookSigningKey(root)
    const webhookSigningKey = ed25519KeyObject(webhookKey)
    const webhookPublicKeyHex = Buffer.from(webhookKey.publicKey).toString("hex")

    // Both keyed by family, BTC network and the three indexes: test and regtest share the path m/84'/1'/... but not
    // the address prefix, so the network is part of the key.
    const cacheKey = (request: DerivationRequest) =>
      [request.family, request.family === "BTC" ? request.btcNetwork ?? "" : "", request.tenantIndex, request.userIndex,
        request.walletIndex].join("/")
    const addressCache = makeBoundedCache<DerivedAddress>(addressCacheEntriesMax)
    const derive = (request: DerivationRequest): DerivedAddress => {
      const key = cacheKey(request)
      const cached = addressCache.get(key)
      if (cached !== undefined) return cached
      const derived = deriveAddressFromRoot(root, request)
      addressCache.set(key, derived)
      return derived
    }

    // Signing keys, memoised like addresses (signingKeyCacheEntriesMax says why). The cached key is never handed
    // out: every caller gets its own copy of the private bytes, which withKey (KeySource.ts) wipes after use.
    const keyCache = makeBoundedCache<DerivedKey>(signingKeyCacheEntriesMax)
    const cachedKey = (request: DerivationRequest): DerivedKey => {
      const key = cacheKey(request)
      const derived = keyCache.get(key) ?? deriveKey(root, request)
      keyCache.set(key, derived)
      return { ...derived, privateKey: Uint8Array.from(derived.privateKey) }
    }

    const keyFor: KeySource = (key, target) => {
      if (key._tag === "Platform") return cachedKey({ ...target, ...platformIndices(key.role) })
      if (key._tag === "Gas") return cachedKey({ ...target, ...platformIndices("GAS", key.tenantIndex) })
      // The same reservation as deriveAddress: tenant 0's keys are the platform's own.
      if (key.tenantIndex === platformTenantIndex) throw new RangeError("tenantIndex 0 is reserved for platform keys")
      return cachedKey({ ...target, ...key })
    }

    // Each family's signing code, with the libraries only it needs (ox's ABI encoding, ecpair, ...), is imported at
    // the first signature of that family rather than at start: 39 modules (about 40 ms) off a restart's module
    // loading, which bounds the 3 s restart promise (README; test/e2e/StartupModules.test.ts). The module loader
    // keeps each after its first import.
    const signTransfer = async (request: TransactionRequest): Promise<SignedTransaction> => {
      switch (request.family) {
        case "EVM":
          return (await import("./EvmSigning.ts")).signEvmTransfer(keyFor, request)
        case "TRON":
          return (await import("./TronSigning.ts")).signTronTransfer(keyFor, request)
        case "BTC":
          return (await import("./BtcSigning.ts")).signBtcTransfer(keyFor, request)
        case "SOL":
          return (await import("./SolSigning.ts")).signSolTransfer(keyFor, request)
      }
    }

    return {
      deriveAddress: Effect.fn("Signer.deriveAddress")(function*(request: DerivationRequest) {
        // Tenant 0 is the platform's: a tenant wallet there would share keys with the hot wallet. Tenant indexes
        // come from a database sequence starting at 1, so this is a bug, not a request error.
        if (request.tenantIndex === platformTenantIndex) {
          return yield* Effect.die(new RangeError("tenantIndex 0 is reserved for platform addresses"))
        }
        // Out-of-range indexes and a BTC request without a network throw in `derive`: a defect, for the same reason.
        return yield* Effect.sync(() => derive(request))
      }),
      platformAddress: Effect.fn("Signer.platformAddress")(function*(request: PlatformAddressRequest) {
        // A GAS request without its tenant (or HOT/SWEEP with one) throws in platformIndices: a caller bug.
        return yield* Effect.sync(() =>
          derive({ family: request.family, btcNetwork: request.btcNetwork, ...platformIndices(request.role, request.tenantIndex) })
        )
      }),
      signTransaction: Effect.fn("Signer.signTransaction")(function*(request: TransactionRequest) {
        // A rejected promise is a defect: see the method's contract.
        return yield* Effect.promise(() => signTransfer(request))
      }),
      webhookPublicKey: Effect.fn("Signer.webhookPublicKey")(function*() {
        return webhookPublicKeyHex
      }),
      signWebhook: Effect.fn("Signer.signWebhook")(function*(message: Uint8Array) {
        return sign(null, message, webhookSigningKey).toString("hex")
      }),
      status: Effect.fn("Signer.status")(function*() {
        return "ACTIVE" as const
      })
    } satisfies SignerShape
  })

export class Signer extends Context.Service<Signer, SignerShape>()("coffer/Signer") {
  /** Keys from `mnemonic`; fails at start when it is not a valid English BIP-39 mnemonic. */
  static readonly layerLocalHd = (mnemonic: Redacted.Redacted<string>): Layer.Layer<Signer, SignerUnavailable> =>
    Layer.effect(Signer, Effect.map(makeLocalHd(mnemonic), Signer.of))

  static readonly layerDisabled: Layer.Layer<Signer> = Layer.succeed(Signer)(makeDisabled())

  /**
   * - preproduction: disabled, whatever else is configured (that environment must not hold keys to funds);
   * - SIGNER_MNEMONIC set: that mnemonic;
   * - development without one: `<dataDir>/signer-mnemonic`, generated on the first start and reused afterwards;
   * - production without one: the service does not start.
   */
  static readonly layerConfig: Layer.Layer<Signer, SignerUnavailable, AppConfig> = Layer.unwrap(
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (config.serviceEnv === "preproduction") return Signer.layerDisabled
      if (Option.isSome(config.signerMnemonic)) return Signer.layerLocalHd(config.signerMnemonic.value)
      if (config.serviceEnv === "production") {
        return yield* new SignerUnavailable({
          message: "SIGNER_MNEMONIC must be set when SERVICE_ENV=production; refusing to start without signing keys"
        })
      }
      return Signer.layerLocalHd(yield* loadOrCreateDevelopmentMnemonic(config.dataDir))
    })
  )
}
