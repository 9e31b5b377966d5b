/**
 * Shared vectors (chains.md section 2). The scheme table was self-computed by the spike and agreed between
 * @scure/bip32 and bip32 for secp256k1; the published standard-path vectors live in Derivation.test.ts.
 */
import { derivationIndexMax } from "../../src/chains/Derivation.ts"
import type { ChainFamily } from "../../src/chains/ChainFamily.ts"

export const abandonMnemonic =
  "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"

export const schemeVectors: ReadonlyArray<
  readonly [readonly [number, number, number], Readonly<Record<"EVM" | "TRON" | "BTC" | "SOL", string>>]
> = [
  [[0, 0, 0], {
    EVM: "0xCbA98362e199c41E1864D0923AF9646d3A648451",
    TRON: "TSTKp3zM7YxVd1WDdUFVh19QcwwzWcXoSS",
    BTC: "bc1q7jxls0grz680083rwwms0gnzpedvcm9q9tn6ew",
    SOL: "B9sVeu4rJU12oUrUtzjc6BSNuEXdfvurZkdcaTVkP2LY"
  }],
  [[0, 0, 1], {
    EVM: "0x5b39d1CC9596715F53fc2C923D2F8A0EAcc3a378",
    TRON: "TTThU75JPi2QuNhgMZ4RNu4m7yTZTBtgU1",
    BTC: "bc1qm4krt8vfvfr4plrtfux4r5dvh48h8xz8qv3dxh",
    SOL: "634j9U9kjxbM8TmPzNCRQhjeENowxtAYC86Pwy2eGcje"
  }],
  [[0, 1, 0], {
    EVM: "0x2035C6DE8ecB9fd972477fE3BAA569eD69b98345",
    TRON: "TV1ZcdH9j1mrLooj5rfBwStdasKX44tUA9",
    BTC: "bc1qwvvjrmg2dzc3l5vcgnyqd7rrxuxnv07ap06cae",
    SOL: "9pedgei8s5tZ7S4FpLjg2WXAs5cG9SFvfgPig5RhcGdU"
  }],
  [[1, 0, 0], {
    EVM: "0x4624b645E51eecba35ab1227eAdC41Eab50f7aD7",
    TRON: "TLxEaBnxFuBqwAgTcRG7VwPnQg3CucpBQ6",
    BTC: "bc1qusajmh9ckjtdtfkgnjvt97yavpy7hh9j57edqs",
    SOL: "H6r4dUP9Jj3CLx9NyarxjDiE1HGeWMHDv2MUTAq9nYzt"
  }],
  [[derivationIndexMax, derivationIndexMax, derivationIndexMax], {
    EVM: "0x59de1368b52cDb5CC1ec09856A9e462411305a59",
    TRON: "TR8oS5w1ApTTzT9BEW28kjiuus7xmXXBEf",
    BTC: "bc1q2vzt5nqwhmpwyldkyawxq3g9s7v9vks74v9fcs",
    SOL: "bkEDiiY7KwVeyQTaquGX3dGnBFUDfmMQfsyBf57sfLU"
  }]
]

/** The notes' scheme table, in the normalized form deriveAddress returns (EVM lowercase). */
export const schemeVector = (family: ChainFamily, indices: readonly [number, number, number]): string => {
  const row = schemeVectors.find(([key]) => key.every((value, position) => value === indices[position]))
  if (row === undefined) throw new Error(`no scheme vector for ${indices.join(",")}`)
  return family === "EVM" ? row[1][family].toLowerCase() : row[1][family]
}
