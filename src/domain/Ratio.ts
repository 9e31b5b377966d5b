/**
 * Exact fractions over bigint, for the few places where money meets a non-integer: a USD price ("0.25") or a
 * catalog ratio (a fee safety factor of 0.2). A JS number would round (0.1 + 0.2 !== 0.3), and a fee rounded the
 * wrong way is charged to someone; here every step is integer arithmetic and the one rounding is explicit.
 */

/** A fraction `numerator / denominator`; the denominator is positive. */
export interface Ratio {
  readonly numerator: bigint
  readonly denominator: bigint
}

/** A non-negative decimal with at most 18 fraction digits, no sign or exponent (a catalog `priceUsd`). */
export const decimalPattern = /^(0|[1-9][0-9]*)(\.[0-9]{1,18})?$/

/** The exact value of a decimal string matching `decimalPattern` (the caller checked it). */
export const ratioOfDecimal = (text: string): Ratio => {
  const [whole, fraction = ""] = text.split(".")
  return { numerator: BigInt(`${whole}${fraction}`), denominator: 10n ** BigInt(fraction.length) }
}

/**
 * The exact value of a finite non-negative number as JavaScript prints it (shortest round-trip form, "0.2", or
 * "1e-7"): what the catalog author wrote, not the binary double nearest to it (0.2 is 1/5, not 0.2000000000000000111).
 */
export const ratioOfNumber = (value: number): Ratio => {
  const match = /^([0-9]+)(?:\.([0-9]+))?(?:e([+-]?[0-9]+))?$/.exec(String(value))
  if (match === null || !Number.isFinite(value)) throw new Error(`not a finite non-negative number: ${value}`)
  const [, whole, fraction = "", exponentText = "0"] = match
  const exponent = Number(exponentText) - fraction.length
  const digits = BigInt(`${whole}${fraction}`)
  return exponent >= 0
    ? { numerator: digits * 10n ** BigInt(exponent), denominator: 1n }
    : { numerator: digits, denominator: 10n ** BigInt(-exponent) }
}

/** `value × ratio`, rounded up to an integer (a fee floor never rounds in the payer's favour). */
export const multiplyCeil = (value: bigint, ...ratios: ReadonlyArray<Ratio>): bigint => {
  let numerator = value
  let denominator = 1n
  for (const ratio of ratios) {
    numerator *= ratio.numerator
    denominator *= ratio.denominator
  }
  if (denominator <= 0n) throw new Error("a ratio's denominator must be positive")
  return numerator <= 0n ? 0n : (numerator + denominator - 1n) / denominator
}

export const inverse = (ratio: Ratio): Ratio => {
  if (ratio.numerator <= 0n) throw new Error("cannot invert a ratio that is not positive")
  return { numerator: ratio.denominator, denominator: ratio.numerator }
}

/** `1 + ratio`. */
export const onePlus = (ratio: Ratio): Ratio => ({
  numerator: ratio.denominator + ratio.numerator,
  denominator: ratio.denominator
})
