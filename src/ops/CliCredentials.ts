/**
 * What the CLI authenticates with, found through the service's own configuration (DATA_DIR, OPS_TOKEN): the operator
 * token, and the key of a signed `/v1` call. Secrets are read, never printed.
 */
import { Effect, Option, Redacted } from "effect"
import { createPrivateKey, type KeyObject } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { basename, join } from "node:path"
import { AppConfig } from "../Config.ts"
import { CallFailed, fail } from "./CallFailed.ts"
import { devKeyFile, devTenantFile } from "./DevProvisioning.ts"

/** The key id of a key file named `<keyId>.pem`, as `ops key add` writes it. */
export const keyIdPattern = /^ak_[0-9a-f]{24}$/

export const opsToken = Effect.gen(function*() {
  const config = yield* AppConfig
  if (Option.isSome(config.opsToken)) return config.opsToken.value
  const file = join(config.dataDir, "ops-token")
  if (!existsSync(file)) {
    return yield* fail(`no operator token: set OPS_TOKEN or start the service once with DATA_DIR=${config.dataDir}`)
  }
  return Redacted.make(readFileSync(file, "utf8").trim())
})

export interface SigningKey {
  readonly keyId: string
  readonly privateKey: KeyObject
}

/**
 * The key of a signed call: `--key-file` and `--key-id` when given; a key file named `<keyId>.pem` (what
 * `ops key add` writes) names its key id; otherwise the development key of DATA_DIR.
 */
export const signingKey = (keyIdFlag: Option.Option<string>, keyFileFlag: Option.Option<string>) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const devTenantPath = join(config.dataDir, devTenantFile)
    const keyFile = Option.getOrElse(keyFileFlag, () => join(config.dataDir, devKeyFile))
    const keyIdFromFileName = basename(keyFile, ".pem")
    let keyId: string
    if (Option.isSome(keyIdFlag)) keyId = keyIdFlag.value
    else if (keyIdPattern.test(keyIdFromFileName)) keyId = keyIdFromFileName
    else if (Option.isNone(keyFileFlag) && existsSync(devTenantPath)) {
      const parsed = yield* Effect.try({
        try: (): { keyId?: unknown } => JSON.parse(readFileSync(devTenantPath, "utf8")),
        catch: () => new CallFailed({ message: `${devTenantPath} is not readable JSON` })
      })
      const devKeyId = parsed.keyId
      if (typeof devKeyId !== "string") return yield* fail(`${devTenantPath} has no keyId`)
      keyId = devKeyId
    } else if (Option.isNone(keyFileFlag)) {
      return yield* fail(
        `no development key in ${config.dataDir} (start the service once with SERVICE_ENV=development and the same ` +
          `DATA_DIR), or pass --key-id and --key-file`
      )
    } else return yield* fail(`--key-id is required with --key-file ${keyFile}`)
    if (!existsSync(keyFile)) return yield* fail(`no private key file ${keyFile}`)
    const privateKey = yield* Effect.try({
      try: () => createPrivateKey(readFileSync(keyFile)),
      catch: () => new CallFailed({ message: `${keyFile} is not a PEM private key` })
    })
    if (privateKey.asymmetricKeyType !== "ed25519") return yield* fail(`${keyFile} is not an Ed25519 key`)
    return { keyId, privateKey } satisfies SigningKey
  })
