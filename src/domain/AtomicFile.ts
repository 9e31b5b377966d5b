/**
 * A file written aside and renamed into place, so a reader never sees it empty or half-written: `writeFileSync`
 * truncates first, and the CLI or a test that reads `<DATA_DIR>/ops-token` in that instant got an empty token and
 * 401 from then on (seen once in CI, 2026-11-27). OwnerLock.ts writes its pid file the same way.
 */
import { renameSync, writeFileSync } from "node:fs"

export const writeFileAtomically = (path: string, content: string, mode: number): void => {
  const staging = `${path}.${process.pid}.tmp`
  writeFileSync(staging, content, { mode })
  renameSync(staging, path)
}
