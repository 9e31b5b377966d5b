/** Wire pieces shared by several groups: paging, enumerations, path parameters (spec sections 2, 4, 7, 8). */
import { Schema, SchemaTransformation } from "effect"

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

/**
 * `customerRefId` in a path. Its length rule (1-128 chars) is not a parse failure: spec 4.2 and section 8 answer it
 * with 422 `customerRefId must be 1-128 chars`, so the handlers check it after authentication.
 */
export const CustomerRefIdParam = Schema.String.annotate({
  description: "tenant-defined user id, 1-128 chars, URL-encoded"
})
/** `externalTxId` in a path; like `customerRefId`, its length rule is section 8's 422, checked by the handler. */
export const ExternalTxIdParam = Schema.String.annotate({
  description: "tenant-generated id of a withdrawal or transfer, 1-128 chars, URL-encoded"
})

export const ChainFamilyWire = Schema.Literals(["EVM", "TRON", "BTC", "SOL"])
export const UserStatus = Schema.Literals(["ACTIVE", "FROZEN", "CLOSED"])
export const WalletStatus = Schema.Literals(["PROVISIONING", "ACTIVE", "HIDDEN", "FROZEN", "CLOSED"])
