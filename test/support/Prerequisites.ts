/**
 * What the test suite needs beyond `npm ci`: today only Litecoin Core's `litecoind` (the BTC client's regtest
 * stand-in, docs/btc.md; Debian/Ubuntu package `litecoind`). Everything else (Node 24, PostgreSQL, anvil, the SOL
 * and TRON stand-ins) comes from npm. `npm test` checks it first (test/prerequisites.ts, the `pretest` script), so
 * a missing one is one line before anything runs, not a failure deep inside a BTC test file.
 */
import { accessSync, constants } from "node:fs"

/** The Debian package's path; `LITECOIND` names another binary (then nothing is installed for it). */
export const defaultLitecoindBinary = "/usr/bin/litecoind"
export const litecoindBinary = process.env.LITECOIND ?? defaultLitecoindBinary

export const isExecutable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}
