/**
 * The message of a 422 `BAD_REQUEST` for a body that fails its schema (spec section 7 fixes the code, not the
 * message): the field and what it expects, e.g. `invalid request body: amountRaw: expected a string of decimal
 * digits`, so a tenant's engineer sees what to fix without reading the OpenAPI document. Only the first issue is
 * named (decoding stops there). The input itself is never repeated: a body may hold what should not come back in an
 * error that ends up in logs.
 */
import { SchemaIssue } from "effect"
import { invalidBodyMessage } from "./Utf8Body.ts"

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** Path segments come from the schema (or, for a record, from the body): bounded so a message stays a line. */
const maxSegmentLength = 64

const segment = (key: PropertyKey | { readonly key: PropertyKey }): string => {
  const bare = typeof key === "object" ? key.key : key
  const text = typeof bare === "number" ? `[${bare}]` : String(bare)
  return text.length > maxSegmentLength ? `${text.slice(0, maxSegmentLength)}...` : text
}

const fieldPath = (path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> = []): string =>
  path.map(segment).reduce((joined, part) => part.startsWith("[") || joined === "" ? joined + part : `${joined}.${part}`, "")

/**
 * "Expected string" → "expected string"; "Missing key" → "required"; a union's "Expected array | null | null" (an
 * optional nullable field lists null once per layer) → "expected array or null".
 */
const expectation = (message: string): string => {
  if (message === "Missing key") return "required"
  const sentence = message.charAt(0).toLowerCase() + message.slice(1)
  if (!sentence.startsWith("expected ") || !sentence.includes(" | ")) return sentence
  return `expected ${[...new Set(sentence.slice("expected ".length).split(" | "))].join(" or ")}`
}

export const bodyIssueMessage = (issue: SchemaIssue.Issue): string => {
  const first = formatter(issue).issues[0]
  if (first === undefined) return invalidBodyMessage
  const path = fieldPath(first.path)
  return `${invalidBodyMessage}: ${path === "" ? "" : `${path}: `}${expectation(first.message)}`
}
