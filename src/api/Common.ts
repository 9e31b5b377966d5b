/** Wire pieces shared by several groups: paging, enumerations, path parameters (spec sections 2, 4, 7, 8). */
import { Schema, SchemaTransformation } from "effect"
import { charCount } from "../domain/StorableText.ts"

/**
 * A non-negative integer query value, parsed strictly: decimal digits only (no sign, whitespace, exponent, hex or
 * fraction), then the range. Anything else fails the parameter's type: 400 before authentication (section 7).
 * At most 15 digits, so the number is exact.
 */
export const DecimalIntegerFromString = (range: { readonly minimum: number; readonly maximum: number }) =>
  Schema.String.check(Schema.isPattern(/^[0-9]{1,15}$/, { message: "expected decimal digits" })).pipe(
    Schema.decodeTo(
      Schema.Number.check(Schema.isBetween(range)),
      SchemaTransformation.transform({ decode: (text: string) => Number(text), encode: (value: number) => String(value) })
    )
  )

/** `limit` (1-200, default 50): a query value outside that range is a parse failure, 400 before authentication. */
export const pageLimitMax = 200
export const pageLimitDefault = 50
export const PageLimit = DecimalIntegerFromString({ minimum: 1, maximum: pageLimitMax })
  .annotate({ description: "page size, 1-200, default 50" })

/** A string of 1 to `maximum` chars (code points), for identifiers whose length the spec bounds. */
const boundedText = (maximum: number, description: string) =>
  Schema.String.check(
    Schema.makeFilter((text: string) => {
      const length = charCount(text)
      return (length >= 1 && length <= maximum) || `expected 1-${maximum} chars`
    })
  ).annotate({ description })

/** `customerRefId` in a path or query: 1-128 chars (sections 1 and 8); longer cannot name a user, so 400. */
export const CustomerRefIdParam = boundedText(128, "tenant-defined user id, 1-128 chars, URL-encoded in a path")
/** `externalTxId` in a path: 1-128 chars (sections 1 and 8). */
export const ExternalTxIdParam = boundedText(128, "tenant-generated id of a withdrawal or transfer, 1-128 chars, URL-encoded")

export const ChainFamilyWire = Schema.Literals(["EVM", "TRON", "BTC", "SOL"])
export const UserStatus = Schema.Literals(["ACTIVE", "FROZEN", "CLOSED"])
export const WalletStatus = Schema.Literals(["PROVISIONING", "ACTIVE", "HIDDEN", "FROZEN", "CLOSED"])
