import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { AppConfig } from "../../src/Config.ts"
import * as Database from "../../src/db/Database.ts"
import { migrate, migrationsTable, runMigrations, splitSql, sqlDirectory } from "../../src/db/Migrations.ts"

describe("splitSql", () => {
  it("splits on ; outside quotes, dollar bodies and comments", () => {
    const text = `
-- leading comment; with a semicolon and a 'quote
CREATE TABLE a (v text DEFAULT 'x;y', "odd;name" int); /* block ; comment */
INSERT INTO a VALUES ('it''s; fine'), (E'back\\'slash; still inside');
CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM 1; RETURN 2; END $$;
CREATE FUNCTION g() RETURNS text LANGUAGE sql AS $body$ SELECT $$inner;$$ || 'x' $body$;
SELECT $1, a$b$ FROM t /* outer /* nested ; */ still comment ; */ WHERE v = 'z';;
-- trailing comment only;
/* and a block ; */
`
    assert.deepStrictEqual(splitSql(text), [
      `-- leading comment; with a semicolon and a 'quote\nCREATE TABLE a (v text DEFAULT 'x;y', "odd;name" int)`,
      `/* block ; comment */\nINSERT INTO a VALUES ('it''s; fine'), (E'back\\'slash; still inside')`,
      `CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM 1; RETURN 2; END $$`,
      `CREATE FUNCTION g() RETURNS text LANGUAGE sql AS $body$ SELECT $$inner;$$ || 'x' $body$`,
      `SELECT $1, a$b$ FROM t /* outer /* nested ; */ still comment ; */ WHERE v = 'z'`
    ])
  })

  it("keeps a last statement without ; and drops empty input", () => {
    assert.deepStrictEqual(splitSql("SELECT 1;\nSELECT 'a;b'"), ["SELECT 1", "SELECT 'a;b'"])
    assert.deepStrictEqual(splitSql("  \n-- nothing here;\n"), [])
    assert.deepStrictEqual(splitSql(""), [])
  })

  it("does not treat a backslash as an escape outside E'…'", () => {
    assert.deepStrictEqual(splitSql(String.raw`SELECT 'C:\'; SELECT 2`), [String.raw`SELECT 'C:\'`, "SELECT 2"])
  })
})

const url = Redacted.make(process.env.DATABASE_URL!)

layer(Database.layerFromUrl(url))("migrations on a database of this test file", (it) => {
  it.effect("every sql/ file is applied and recorded, and a second run applies nothing", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const files = readdirSync(sqlDirectory).filter((file) => file.endsWith(".sql")).sort()
      const recorded = yield* sql<{ migration_id: number; name: string }>`
        SELECT migration_id, name FROM ${sql(migrationsTable)} ORDER BY migration_id`
      assert.deepStrictEqual(
        recorded.map((row) => `${String(row.migration_id).padStart(4, "0")}_${row.name}.sql`),
        files
      )
      const tables = yield* sql<{ name: string }>`
        SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`
      for (const table of ["api_keys", "assets", "auth_nonces", "networks", "tenants", "users"]) {
        assert.include(tables.map((row) => row.name), table)
      }
      assert.deepStrictEqual(yield* runMigrations, [])
    }))

  it.effect("an empty database gets every file, in order, in one run", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`DROP SCHEMA public CASCADE`
      yield* sql`CREATE SCHEMA public`
      const applied = yield* runMigrations
      const files = readdirSync(sqlDirectory).filter((file) => file.endsWith(".sql")).sort()
      assert.deepStrictEqual(applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}.sql`), files)
      assert.deepStrictEqual(yield* runMigrations, [])
    }))

  describe("a scratch directory", () => {
    const directory = mkdtempSync(join(tmpdir(), "coffer-migrations-"))
    afterAll(() => rmSync(directory, { recursive: true, force: true }))
    const file = (name: string, text: string) => writeFileSync(join(directory, name), text)

    it.effect("runs dollar-quoted bodies, and rolls back a file whose statement fails, naming it", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        file(
          "0001_fn.sql",
          `CREATE TABLE scratch_a (v int);
           CREATE FUNCTION scratch_f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN INSERT INTO scratch_a VALUES (1); RETURN 1; END $$;`
        )
        assert.deepStrictEqual(yield* migrate(directory, "scratch_migrations"), [[1, "fn"]])
        assert.deepStrictEqual(yield* sql`SELECT scratch_f() AS v`, [{ v: 1 }])

        file("0002_broken.sql", "CREATE TABLE scratch_b (v int);\n-- why\nSELECT nope FROM scratch_missing;")
        const error = yield* Effect.flip(migrate(directory, "scratch_migrations"))
        assert.strictEqual(error._tag, "MigrationError")
        const inner = String((error as { cause?: unknown }).cause)
        assert.include(
          inner,
          `0002_broken.sql, statement 2 (SELECT nope FROM scratch_missing): relation "scratch_missing" does not exist`
        )
        const leftover = yield* sql<{ found: string | null }>`SELECT to_regclass('scratch_b')::text AS found`
        assert.deepStrictEqual(leftover, [{ found: null }])
        rmSync(join(directory, "0002_broken.sql"))
      }))

    it.effect("refuses a file numbered below the latest applied one, and a renamed applied file", () =>
      Effect.gen(function*() {
        file("0003_later.sql", "SELECT 1;")
        assert.deepStrictEqual(yield* migrate(directory, "scratch_migrations"), [[3, "later"]])

        file("0002_forgotten.sql", "SELECT 2;")
        const below = yield* Effect.flip(migrate(directory, "scratch_migrations"))
        assert.strictEqual(below._tag === "MigrationError" ? below.kind : below._tag, "BadState")
        assert.include(below.message, "2_forgotten is numbered at or below the latest applied migration (3)")
        rmSync(join(directory, "0002_forgotten.sql"))

        renameSync(join(directory, "0003_later.sql"), join(directory, "0003_renamed.sql"))
        const renamed = yield* Effect.flip(migrate(directory, "scratch_migrations"))
        assert.include(renamed.message, "has applied migration 3_later, which")
        renameSync(join(directory, "0003_renamed.sql"), join(directory, "0003_later.sql"))

        file("4-bad name.sql", "SELECT 4;")
        const badName = yield* Effect.flip(migrate(directory, "scratch_migrations"))
        assert.include(badName.message, "is not named NNNN_name.sql")
        rmSync(join(directory, "4-bad name.sql"))
        assert.deepStrictEqual(yield* migrate(directory, "scratch_migrations"), [])
      }))
  })
})

describe("Database.layer", () => {
  it.effect("uses DATABASE_URL when it is set", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      assert.deepStrictEqual(yield* sql`SELECT 1 AS one`, [{ one: 1 }])
    }).pipe(Effect.provide(Database.layer), Effect.provide(AppConfig.layerTest({ databaseUrl: Option.some(url) }))))

  it.effect("fails with where it tried and why, without the password", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.provide(Effect.void, Database.layerFromUrl(Redacted.make("postgres://app:hunter2@127.0.0.1:1/coffer")))
      )
      assert.strictEqual(error._tag, "DatabaseStartupError")
      assert.include(error.message, "cannot open the database at 127.0.0.1:1/coffer")
      assert.notInclude(error.message, "hunter2")
    }))
})
