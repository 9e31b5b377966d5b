/**
 * The operator bearer token: `OPS_TOKEN`, or generated once and written to `<DATA_DIR>/ops-token` (mode 0600)
 * when unset. Held as Redacted: it never reaches a log or a response.
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { existsSync, mkdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { AppConfig } from "../Config.ts"
import { writeFileAtomically } from "../domain/AtomicFile.ts"
import { randomHex } from "../domain/Entropy.ts"

export class OpsToken extends Context.Service<OpsToken, Redacted.Redacted<string>>()("coffer/OpsToken") {
  static readonly layer = Layer.effect(
    OpsToken,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (Option.isSome(config.opsToken)) return config.opsToken.value
      const file = join(config.dataDir, "ops-token")
      if (existsSync(file)) return Redacted.make(readFileSync(file, "utf8").trim())
      const token = yield* randomHex(32, "ops-token")
      mkdirSync(config.dataDir, { recursive: true })
      writeFileAtomically(file, `${token}\n`, 0o600)
      return Redacted.make(token)
    })
  )
}
