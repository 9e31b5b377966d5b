/**
 * The idempotency key under which a submission with an `externalTxId` is recorded (spec section 7, rules 1 and 8).
 * An `externalTxId` is any 1-128 chars (sections 1 and 8: `/`, `%`, spaces, any script), while a stored key keeps
 * rule 1's alphabet (the `idempotency_records` CHECK). An id already in that alphabet is its own key, so records
 * read the same as before; any other id is keyed by its SHA-256, which fits the alphabet and stays unique per id.
 * The `externalTxId` itself is stored untouched on the transaction.
 */
import { createHash } from "node:crypto"
import { idempotencyKeyPattern } from "./Idempotency.ts"

export const externalTxIdKey = (externalTxId: string): string =>
  idempotencyKeyPattern.test(externalTxId)
    ? externalTxId
    : `sha256:${createHash("sha256").update(externalTxId, "utf8").digest("hex")}`
