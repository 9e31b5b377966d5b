/**
 * Forward-only schema migrations: `sql/NNNN_name.sql`, plain SQL that can be reviewed and applied without the
 * service. effect's Migrator runs the pending ones in one transaction, after `LOCK TABLE schema_migrations`, so two
 * processes starting together apply each file once.
 *
 * The Migrator skips every file numbered at or below the latest applied one. The loader below refuses such a file
 * instead, and refuses a database that has applied migrations this build does not have: both mean the code and the
 * schema disagree, and starting anyway would fail later and less clearly.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Schema } from "effect"
import { Migrator, SqlClient, type SqlError } from "effect/sql"
import { projectFile } from "../ProjectRoot.ts"
import { decodeRows, Int4, Text } from "./RowSchemas.ts"

// Compiled once (RowSchemas.ts): the applied migrations as recorded, decoded at this edge.
const appliedMigrations = decodeRows(Schema.Struct({ migration_id: Int4, name: Text }), "Migrations (applied)")

export const sqlDirectory = fileURLToPath(projectFile("sql/"))
export const migrationsTable = "schema_migrations"

const migrationFile = /^(\d+)_(\w+)\.sql$/
const isIdentifierChar = (char: string | undefined): boolean => char !== undefined && /[\w$\u0080-\uffff]/.test(char)
const dollarTag = /^\$(?:[A-Za-z_\u0080-\uffff][\w\u0080-\uffff]*)?\$/

/**
 * Splits a migration file into statements on the `;` that are outside quotes, dollar-quoted bodies and comments:
 * the driver speaks only the extended protocol, which takes one statement at a time. Handles '…' (with ''),
 * E'…' (with \'), "…", $$…$$ and $tag$…$tag$, -- comments and nested block comments. Statements keep their own
 * comments; pieces that hold only comments or whitespace are dropped.
 */
export const splitSql = (text: string): Array<string> => {
  const statements: Array<string> = []
  let start = 0
  let hasCode = false
  let i = 0
  const endOfStatement = (end: number) => {
    if (hasCode) statements.push(text.slice(start, end).trim())
    start = end + 1
    hasCode = false
  }
  while (i < text.length) {
    const char = text[i]!
    const next = text[i + 1]
    if (char === "-" && next === "-") {
      const newline = text.indexOf("\n", i)
      i = newline < 0 ? text.length : newline + 1
      continue
    }
    if (char === "/" && next === "*") {
      let depth = 1
      i += 2
      while (i < text.length && depth > 0) {
        if (text[i] === "/" && text[i + 1] === "*") (depth++, i += 2)
        else if (text[i] === "*" && text[i + 1] === "/") (depth--, i += 2)
        else i++
      }
      continue
    }
    if (char === ";") {
      endOfStatement(i)
      i++
      continue
    }
    if (/\s/.test(char)) {
      i++
      continue
    }
    hasCode = true
    if (char === "'" || char === "\"") {
      // E'…' is the only form where a backslash escapes; standard_conforming_strings is on since PostgreSQL 9.1.
      const prefix = text[i - 1]
      const backslashEscapes = char === "'" && (prefix === "E" || prefix === "e") && !isIdentifierChar(text[i - 2])
      i++
      while (i < text.length) {
        if (backslashEscapes && text[i] === "\\") i += 2
        else if (text[i] === char && text[i + 1] === char) i += 2
        else if (text[i] === char) break
        else i++
      }
      i++
      continue
    }
    const tag = char === "$" && !isIdentifierChar(text[i - 1]) ? dollarTag.exec(text.slice(i)) : null
    if (tag !== null) {
      const close = text.indexOf(tag[0], i + tag[0].length)
      i = close < 0 ? text.length : close + tag[0].length
      continue
    }
    i++
  }
  endOfStatement(text.length)
  return statements
}

const preview = (statement: string): string => {
  const code = statement.replace(/--[^\n]*|\/\*[\s\S]*?\*\//g, " ").replace(/\s+/g, " ").trim()
  return code.length > 80 ? `${code.slice(0, 77)}...` : code
}

/** The server's own words: the SqlError message alone is "PgConnection: Query failed". */
const serverMessage = (error: SqlError.SqlError): string => {
  const fields = error.reason.cause as { message?: string; code?: string; detail?: string; hint?: string } | undefined
  if (fields?.message === undefined) return error.message
  const text = [fields.message, fields.detail, fields.hint].filter((part) => part !== undefined).join("; ")
  return fields.code === undefined ? text : `${text} (SQLSTATE ${fields.code})`
}

const runFile = (directory: string, file: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const statements = splitSql(readFileSync(join(directory, file), "utf8"))
    for (const [index, statement] of statements.entries()) {
      yield* sql.unsafe(statement).unprepared.pipe(
        Effect.mapError((error) =>
          new Migrator.MigrationError({
            kind: "Failed",
            message: `${file}, statement ${index + 1} (${preview(statement)}): ${serverMessage(error)}`,
            cause: error
          })
        )
      )
    }
  })

/**
 * A Migrator loader over `<directory>/NNNN_name.sql`. It runs inside the migration transaction, after the lock, so
 * the rows it compares against are the ones the Migrator will use.
 */
export const fromSqlDirectory = (
  directory: string,
  table: string = migrationsTable
): Migrator.Loader<SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const files = yield* Effect.try({
      try: () => readdirSync(directory).filter((file) => file.endsWith(".sql")).sort(),
      catch: (cause) => new Migrator.MigrationError({ kind: "ImportError", message: `cannot read ${directory}`, cause })
    })
    const migrations: Array<Migrator.ResolvedMigration> = []
    for (const file of files) {
      const match = migrationFile.exec(file)
      if (match === null) {
        return yield* new Migrator.MigrationError({
          kind: "BadState",
          message: `${join(directory, file)} is not named NNNN_name.sql, so it would never run; rename it`
        })
      }
      // The Migrator expects the loader to succeed with the migration's effect.
      migrations.push([Number(match[1]), match[2]!, Effect.succeed(runFile(directory, file))])
    }
    migrations.sort(([a], [b]) => a - b)

    const sql = yield* SqlClient.SqlClient
    const applied = yield* sql`
      SELECT migration_id, name FROM ${sql(table)} ORDER BY migration_id`.pipe(
      Effect.mapError((cause) =>
        new Migrator.MigrationError({ kind: "BadState", message: `cannot read ${table}: ${cause.message}`, cause })
      ),
      Effect.flatMap(appliedMigrations)
    )
    const latest = applied.at(-1)?.migration_id ?? 0
    for (const row of applied) {
      const file = migrations.find(([id]) => id === row.migration_id)
      if (file === undefined || file[1] !== row.name) {
        return yield* new Migrator.MigrationError({
          kind: "BadState",
          message: `the database has applied migration ${row.migration_id}_${row.name}, which ${directory} ` +
            `${file === undefined ? "does not have" : `names ${file[0]}_${file[1]}`}: this build does not match ` +
            `the database schema`
        })
      }
    }
    for (const [id, name] of migrations) {
      if (id <= latest && !applied.some((row) => row.migration_id === id)) {
        return yield* new Migrator.MigrationError({
          kind: "BadState",
          message: `${id}_${name} is numbered at or below the latest applied migration (${latest}) but was never ` +
            `applied, so it would never run; give it a number above ${latest}`
        })
      }
    }
    return migrations
  })

/** Applies the pending files of `directory`, recording them in `table`; succeeds with the ids and names applied. */
export const migrate = (directory: string, table: string = migrationsTable) =>
  Migrator.make({})({ loader: fromSqlDirectory(directory, table), table })

/** Applies the pending files of the repository's `sql/` directory. */
export const runMigrations = migrate(sqlDirectory)
