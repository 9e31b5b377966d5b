/**
 * Creating the cluster: initdb, atomically, with the superuser password of `<dataDir>/pg-password`.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync } from "node:fs"
import { chmod, chown, mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { Option } from "effect"
import { EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"
import type { PostgresBinaries } from "./PostgresBinaries.ts"
import { type ServerAccount, serverProcessOptions, serverUserName } from "./ServerAccount.ts"

const initdbTimeoutMs = 120_000

const runInitdb = (
  binaries: PostgresBinaries,
  account: Option.Option<ServerAccount>,
  args: ReadonlyArray<string>
): Promise<void> =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(binaries.initdb, args, {
      ...serverProcessOptions(account),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const collect = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-8_000)
    }
    child.stdout.on("data", collect)
    child.stderr.on("data", collect)
    const timer = setTimeout(() => child.kill("SIGKILL"), initdbTimeoutMs)
    child.once("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.once("close", (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolvePromise()
      else reject(new Error(`initdb exited with ${code ?? signal}: ${output.trim()}`))
    })
  })

/**
 * Creates the cluster in a staging directory and renames it into place, so a cluster is either complete or absent:
 * an initdb interrupted half-way would otherwise leave a PG_VERSION that looks like a cluster.
 */
export const initialiseCluster = async (
  dataDir: string,
  pgdata: string,
  password: string,
  binaries: PostgresBinaries,
  account: Option.Option<ServerAccount>
): Promise<void> => {
  if (existsSync(pgdata)) {
    if ((await readdir(pgdata)).length > 0) {
      throw new EmbeddedPostgresError({
        message: `${pgdata} is not empty but holds no PostgreSQL cluster (no PG_VERSION); move it away`
      })
    }
    await rmdir(pgdata)
  }
  const staging = `${pgdata}.initdb`
  const passwordFile = join(dataDir, "pg-initdb-password")
  await rm(staging, { recursive: true, force: true })
  await mkdir(staging, { mode: 0o700 })
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 })
  try {
    if (Option.isSome(account)) {
      await chown(staging, account.value.uid, account.value.gid)
      await chown(passwordFile, account.value.uid, account.value.gid)
    }
    await runInitdb(binaries, account, [
      `--pgdata=${staging}`,
      `--username=${serverUserName}`,
      `--pwfile=${passwordFile}`,
      "--auth=scram-sha-256",
      // Without these the cluster follows the environment and came out SQL_ASCII with LANG unset.
      "--encoding=UTF8",
      "--locale=C.UTF-8",
      "--lc-messages=C"
    ])
    await rename(staging, pgdata)
  } finally {
    await rm(passwordFile, { force: true })
  }
}

export const readOrCreatePassword = async (dataDir: string): Promise<string> => {
  const file = join(dataDir, "pg-password")
  try {
    await writeFile(file, randomBytes(18).toString("base64url"), { mode: 0o600, flag: "wx" })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
  }
  await chmod(file, 0o600)
  const password = (await readFile(file, "utf8")).trim()
  if (password === "") throw new EmbeddedPostgresError({ message: `${file} is empty; delete it only with the cluster` })
  return password
}
