import { Data } from "effect"

/** Every failure of the embedded PostgreSQL: its message says what to do (which directory, which command). */
export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export const describeCause = (cause: unknown): string => cause instanceof Error ? cause.message : String(cause)
