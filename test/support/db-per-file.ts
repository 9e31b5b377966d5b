/**
 * Runs in each test file's worker before the file: copies the migrated template (see global-setup.ts) into a
 * database of its own, points DATABASE_URL at it as production would, and drops it after the file.
 */
import { randomUUID } from "node:crypto"
import pg from "pg"
import { afterAll, inject } from "vitest"

// Files share a worker (vitest.config.ts, `isolate: false`): what a file sets in the environment must not reach the
// next file, so the environment is put back as it was before this file after it.
const environmentBefore = { ...process.env }

const adminUrl = inject("pgAdminUrl")
const database = `coffer_test_${randomUUID().replaceAll("-", "").slice(0, 16)}`

const withAdmin = async <A>(use: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

await withAdmin((client) => client.query(`CREATE DATABASE ${database} TEMPLATE ${inject("pgTemplate")}`))
const url = new URL(adminUrl)
url.pathname = `/${database}`
process.env.DATABASE_URL = url.href

afterAll(async () => {
  for (const name of Object.keys(process.env)) if (!(name in environmentBefore)) delete process.env[name]
  Object.assign(process.env, environmentBefore)
  await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`))
})
