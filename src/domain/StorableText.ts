/**
 * Text the database can hold. PostgreSQL `text` and `jsonb` reject U+0000, and an unpaired UTF-16 surrogate (JSON
 * can carry one as a `\ud800` escape) has no UTF-8 encoding: either would reach SQL and fail there as a 500. Every
 * string a request brings in passes this rule at the edge instead (docs/decisions.md, "Input at the edge").
 */
import { Schema } from "effect"

export const unstorableTextMessage = "text must not contain NUL or unpaired UTF-16 surrogates"

export const isStorableText = (value: string): boolean => !value.includes("\u0000") && value.isWellFormed()

/**
 * Whether every string in a decoded value (object keys included: settings are stored as jsonb) is storable. A loop
 * over an explicit stack, so a deeply nested body cannot overflow the call stack.
 */
export const isStorableValue = (value: unknown): boolean => {
  const pending: Array<unknown> = [value]
  while (pending.length > 0) {
    const next = pending.pop()
    if (typeof next === "string") {
      if (!isStorableText(next)) return false
    } else if (Array.isArray(next)) {
      for (const item of next) pending.push(item)
    } else if (typeof next === "object" && next !== null) {
      for (const [key, item] of Object.entries(next)) {
        if (!isStorableText(key)) return false
        pending.push(item)
      }
    }
  }
  return true
}

/**
 * A request body schema whose decoded value holds only storable text: a failure is a body decoding failure, so 422
 * `BAD_REQUEST` (spec section 7). Unknown fields are dropped before the check, so they stay ignored (section 1).
 */
export const storable = <S extends Schema.Top>(schema: S) =>
  schema.check(Schema.makeFilter((value: S["Type"]) => isStorableValue(value) || unstorableTextMessage))

/** "chars" in the spec's length rules are Unicode code points (as PostgreSQL's `char_length` counts them). */
export const charCount = (value: string): number => {
  let count = 0
  for (const _ of value) count++
  return count
}
