/**
 * How a family's signing code gets the private key of a `SigningKey`: the Signer passes one in, built on its HD
 * root (see Signer.ts). The returned key bytes are the caller's to wipe after use.
 */
import type { KeyTarget } from "../chains/Derivation.ts"
import type { DerivedKey } from "../chains/Derivation.ts"
import type { SigningKey } from "./TransactionRequest.ts"

export type KeySource = (key: SigningKey, target: KeyTarget) => DerivedKey

/** Runs `use` with a key and zeroes its private bytes afterwards, whatever happens. */
export const withKey = async <A>(
  keys: KeySource,
  key: SigningKey,
  target: KeyTarget,
  use: (derived: DerivedKey) => Promise<A> | A
): Promise<A> => {
  const derived = keys(key, target)
  try {
    return await use(derived)
  } finally {
    derived.privateKey.fill(0)
  }
}
