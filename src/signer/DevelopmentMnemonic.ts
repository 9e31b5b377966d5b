/**
 * The development signer's mnemonic: generated once under `<dataDir>` and reused on every later start, so a
 * developer's wallets keep their addresses across restarts without anyone handling a secret by hand. Only the
 * development environment reaches this (Signer.layerConfig); production must be given SIGNER_MNEMONIC.
 */
import { generateMnemonic, validateMnemonic } from "@scure/bip39"
import { wordlist } from "@scure/bip39/wordlists/english.js"
import { Effect, Redacted } from "effect"
import { mkdir, readFile, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { SignerUnavailable } from "../domain/ApiError.ts"

export const developmentMnemonicFileName = "signer-mnemonic"

/** 24 words: the BIP-39 maximum, 256 bits of entropy from the library's CSPRNG (crypto.getRandomValues). */
const mnemonicStrengthBits = 256

/**
 * Outer whitespace (a trailing newline in a file or an env var) is dropped; anything else that is not a valid
 * English BIP-39 sentence is refused rather than repaired, because a "repaired" mnemonic is a different seed and
 * therefore a different set of addresses. The message never contains the mnemonic.
 */
export const parseMnemonic = (
  raw: Redacted.Redacted<string>,
  source: string
): Effect.Effect<Redacted.Redacted<string>, SignerUnavailable> => {
  const mnemonic = Redacted.value(raw).trim()
  return validateMnemonic(mnemonic, wordlist)
    ? Effect.succeed(Redacted.make(mnemonic, { label: "signer mnemonic" }))
    : Effect.fail(new SignerUnavailable({ message: `${source} is not a valid English BIP-39 mnemonic` }))
}

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

const unavailable = (what: string, path: string) => (error: unknown) =>
  new SignerUnavailable({ message: `cannot ${what} ${path}: ${errorCode(error) ?? String(error)}` })

/** The file's content, or undefined when it does not exist yet. */
const readIfPresent = (path: string) =>
  Effect.tryPromise({
    try: () => readFile(path, "utf8").then((text) => Redacted.make(text), (error: unknown) => {
      if (errorCode(error) === "ENOENT") return undefined
      throw error
    }),
    catch: unavailable("read", path)
  })

export const loadOrCreateDevelopmentMnemonic = Effect.fn("Signer.loadOrCreateDevelopmentMnemonic")(
  function*(dataDir: string) {
    const path = join(dataDir, developmentMnemonicFileName)
    const existing = yield* readIfPresent(path)
    // An existing file is never overwritten, even when unreadable as a mnemonic: it may hold the only copy of the
    // keys to funds already deposited.
    if (existing !== undefined) return yield* parseMnemonic(existing, path)

    const created = Redacted.make(generateMnemonic(wordlist, mnemonicStrengthBits))
    yield* Effect.tryPromise({
      try: () => mkdir(dataDir, { recursive: true, mode: 0o700 }),
      catch: unavailable("create directory", dataDir)
    })
    // `wx` fails if the file appeared in the meantime (a second process starting at the same moment): then that
    // process's mnemonic wins and is read back, so both end up with the same keys.
    const won = yield* Effect.tryPromise({
      try: () =>
        writeFile(path, `${Redacted.value(created)}\n`, { mode: 0o600, flag: "wx" }).then(() => true, (error: unknown) => {
          if (errorCode(error) === "EEXIST") return false
          throw error
        }),
      catch: unavailable("write", path)
    })
    if (!won) {
      const other = yield* readIfPresent(path)
      if (other === undefined) return yield* new SignerUnavailable({ message: `${path} vanished while starting` })
      return yield* parseMnemonic(other, path)
    }
    yield* Effect.logWarning(`generated a development signer mnemonic in ${path}; back it up or lose the keys`)
    return created
  }
)
