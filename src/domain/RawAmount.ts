/**
 * Raw amounts (spec section 1, "Amounts"): digits only, no sign, point or exponent, up to the 256-bit range.
 * Carried as `bigint` everywhere inside the service and as a digit string on the wire and in SQL parameters.
 */
import { Schema, SchemaTransformation } from "effect"

export const rawAmountMax = 2n ** 256n - 1n

/** A canonical decimal digit string: no leading zeros (except "0"), at most 78 digits. */
export const rawAmountPattern = /^(0|[1-9][0-9]{0,77})$/

export const RawAmount = Schema.String.check(
  Schema.isPattern(rawAmountPattern, { message: "expected a string of decimal digits (the amount in the asset's smallest unit)" })
).pipe(
  Schema.decodeTo(
    Schema.BigInt.check(Schema.isLessThanOrEqualToBigInt(rawAmountMax)),
    SchemaTransformation.bigintFromString
  )
).annotate({ identifier: "RawAmount", description: "raw amount: decimal integer string in the asset's smallest unit" })
