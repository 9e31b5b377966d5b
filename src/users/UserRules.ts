/** The input rules for users (spec 4.2 and section 8), each stated once with the message the spec quotes. */
import { charCount } from "../domain/StorableText.ts"

export const customerRefIdLengthMax = 128
export const nicknameLengthMax = 32
export const passwordLengthMin = 10
export const passwordLengthMax = 128
export const emailLengthMax = 254

export const customerRefIdMessage = "customerRefId must be 1-128 chars"
export const invalidEmailMessage = "invalid email"
export const passwordRequiresEmailMessage = "password requires an email"
export const weakPasswordMessage = "password must be 10-128 chars and contain letters and digits"
export const nicknameMessage = "nickname must be at most 32 chars"
export const statusMessage = "status must be ACTIVE or FROZEN"
/** Spec section 2, "Frozen user effects": a frozen (or closed) payer cannot start withdrawals or transfers. */
export const userFrozenMessage = "user is frozen"

/** "1-128 chars" (sections 1 and 8), chars being code points as PostgreSQL's `char_length` counts them. */
export const isCustomerRefIdLength = (value: string): boolean => {
  const length = charCount(value)
  return length >= 1 && length <= customerRefIdLengthMax
}

/** Trimmed `customerRefId` of a create call, or undefined when out of range. */
export const normalizeCustomerRefId = (value: string): string | undefined => {
  const trimmed = value.trim()
  return isCustomerRefIdLength(trimmed) ? trimmed : undefined
}

/** One `@`, a dotted domain, no spaces: what a tenant's engineer would call an email; lower-cased. */
const emailPattern = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/
export const normalizeEmail = (value: string): string | undefined => {
  const trimmed = value.trim().toLowerCase()
  return trimmed.length <= emailLengthMax && emailPattern.test(trimmed) ? trimmed : undefined
}

/** Letters of any script count as letters: "пароль12345" is as strong as "password12345". */
export const isStrongPassword = (value: string): boolean =>
  value.length >= passwordLengthMin && value.length <= passwordLengthMax && /\p{L}/u.test(value) &&
  /[0-9]/.test(value)

/** Trimmed nickname; an empty one counts as not given. */
export const normalizeNickname = (value: string): string | null | undefined => {
  const trimmed = value.trim()
  if (trimmed.length === 0) return null
  return charCount(trimmed) <= nicknameLengthMax ? trimmed : undefined
}
