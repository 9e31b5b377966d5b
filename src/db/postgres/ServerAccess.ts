/**
 * Can PostgreSQL reach its directories? As root the server runs as another account (ServerAccount.ts), which must
 * pass through every directory above the data directory and the binaries; a blocked one is reported with the `chmod`
 * that fixes it, before anything is created.
 */
import { realpathSync, statSync, type Stats } from "node:fs"
import { dirname, resolve } from "node:path"
import { Effect, Option } from "effect"
import { EmbeddedPostgresError } from "./EmbeddedPostgresError.ts"
import { loadPostgresBinaries } from "./PostgresBinaries.ts"
import { canEnter, type ServerAccount, serverAccount } from "./ServerAccount.ts"

const pathChain = (path: string): Array<string> => {
  const chain: Array<string> = []
  for (let directory = resolve(path);; directory = dirname(directory)) {
    chain.unshift(directory)
    if (dirname(directory) === directory) return chain
  }
}

/**
 * The first directory on the way to `path` (itself included) that `account` cannot enter. Both the path as written
 * and its symlink-free form are walked. Only the mode bits are read, not POSIX ACLs; a component that does not exist
 * yet ends the walk (we create it).
 */
const firstBlocked = (path: string, account: ServerAccount): Option.Option<{ directory: string; stats: Stats }> => {
  let real: string | undefined
  try {
    real = realpathSync(path)
  } catch {
    real = undefined
  }
  for (const chain of [pathChain(path), real === undefined ? [] : pathChain(real)]) {
    for (const directory of chain) {
      let stats: Stats
      try {
        stats = statSync(directory)
      } catch {
        break
      }
      if (!canEnter(stats, account)) return Option.some({ directory, stats })
    }
  }
  return Option.none()
}

const shellQuote = (value: string): string => /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`

const blockedError = (blocked: { directory: string; stats: Stats }, target: string, account: ServerAccount) => {
  const { directory, stats } = blocked
  const who = stats.uid === account.uid ? "u" : stats.gid === account.gid ? "g" : "o"
  const mode = (stats.mode & 0o7777).toString(8).padStart(4, "0")
  return new EmbeddedPostgresError({
    message: `PostgreSQL runs as the OS user "${account.name}" because this process is root, and that user cannot ` +
      `enter ${directory} (mode ${mode}, owner uid ${stats.uid}, gid ${stats.gid}), which is on the way to ${target}. ` +
      `Every directory above the data directory and the PostgreSQL binaries must be traversable by ` +
      `"${account.name}". Run: chmod ${who}+x ${shellQuote(directory)}  (or use a DATA_DIR / checkout it can reach, ` +
      `or set DATABASE_URL)`
  })
}

/**
 * Fails, naming the directory and the `chmod` that fixes it, when PostgreSQL could not reach `dataDir` or its own
 * binaries. Succeeds at once when this process is not root (see `serverAccount`). Changes nothing on disk.
 */
export const checkServerAccess = (dataDir: string): Effect.Effect<void, EmbeddedPostgresError> =>
  Effect.gen(function*() {
    const account = yield* serverAccount
    if (Option.isNone(account)) return
    const binaries = yield* loadPostgresBinaries
    for (const target of [resolve(dataDir), ...binaries.directories]) {
      const blocked = firstBlocked(target, account.value)
      if (Option.isSome(blocked)) return yield* blockedError(blocked.value, target, account.value)
    }
  })
