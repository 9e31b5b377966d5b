import { assert, describe, it } from "@effect/vitest"
import { errorTable } from "../../src/domain/ApiError.ts"

/** Spec section 7 as written: code, HTTP status, retryable; the framework rows first (status by source). */
const specRows: ReadonlyArray<readonly [code: string, status: number, retryable: boolean]> = [
  ["BAD_REQUEST", 400, false], // path or query parameter cannot be parsed
  ["BAD_REQUEST", 422, false], // body, fields, missing Idempotency-Key, business validation
  ["BAD_REQUEST", 405, false], // unsupported method
  ["BAD_REQUEST", 413, false], // body above 1 MiB
  ["PROVIDER_UNAVAILABLE", 408, true], // processing exceeded 30 s
  ["UNAUTHORIZED", 401, false],
  ["FORBIDDEN", 403, false],
  ["NOT_FOUND", 404, false], // also the unknown route of the framework rows
  ["RATE_LIMITED", 429, true],
  ["IDEMPOTENCY_CONFLICT", 409, false],
  ["INVALID_STATE", 409, false],
  ["INTERNAL", 500, true],
  ["INVALID_ADDRESS", 422, false],
  ["ASSET_NOT_SUPPORTED", 422, false],
  ["ASSET_DISABLED", 422, false],
  ["NETWORK_DISABLED", 422, false],
  ["ASSET_MISMATCH", 422, false],
  ["WALLET_LIMIT_REACHED", 422, false],
  ["WALLET_NOT_ACTIVE", 422, false],
  ["RECIPIENT_NOT_FOUND", 404, false],
  ["RECIPIENT_NO_WALLET", 422, false],
  ["SAME_WALLET_TRANSFER", 422, false],
  ["SAME_USER_USE_WALLET_TRANSFER", 422, false],
  ["BELOW_MIN_WITHDRAWAL", 422, false],
  ["QUOTE_EXPIRED", 422, false],
  ["INSUFFICIENT_BALANCE", 422, false],
  ["LIMIT_EXCEEDED", 422, false],
  ["TWO_FACTOR_REQUIRED", 403, false],
  ["TWO_FACTOR_INVALID", 403, false],
  ["COOLDOWN_ACTIVE", 403, false],
  ["BLOCKED_BY_POLICY", 403, false],
  ["EMAIL_TAKEN", 409, false],
  ["INTERNAL_DESTINATION_NOT_ALLOWED", 422, false],
  ["PROVIDER_UNAVAILABLE", 503, true],
  ["SIGNER_UNAVAILABLE", 503, true]
]

describe("the error table (spec section 7) declared once", () => {
  it("every row the service answers is declared with the spec's code, status and retryable flag, and nothing else", () => {
    const declared = errorTable.map((row) => `${row.code} ${row.status} ${row.retryable}`).sort()
    const spec = specRows.map(([code, status, retryable]) => `${code} ${status} ${retryable}`).sort()
    assert.deepStrictEqual(declared, spec)
  })

  it("only RATE_LIMITED, PROVIDER_UNAVAILABLE, SIGNER_UNAVAILABLE and INTERNAL are retryable", () => {
    const retryable = new Set(errorTable.filter((row) => row.retryable).map((row) => row.code))
    assert.deepStrictEqual([...retryable].sort(), ["INTERNAL", "PROVIDER_UNAVAILABLE", "RATE_LIMITED", "SIGNER_UNAVAILABLE"])
  })
})
