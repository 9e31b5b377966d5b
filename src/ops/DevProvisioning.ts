/**
 * First run in development: a `dev` tenant with an API key whose private key (PKCS#8 PEM, mode 0600) is written
 * under DATA_DIR, so `npm run call -- GET /v1/networks` works right away. Later starts find the marker file and do
 * nothing. Never runs outside `development`.
 */
import { Context, Effect, Layer } from "effect"
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { ApiKeyRegistry } from "../auth/ApiKeyRegistry.ts"
import { keyPairFromSeed } from "../auth/Ed25519.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { AppConfig } from "../Config.ts"
import { writeFileAtomically } from "../domain/AtomicFile.ts"
import { Entropy } from "../domain/Entropy.ts"
import { Tenants } from "../tenants/Tenants.ts"

export const devTenantFile = "dev-tenant.json"
export const devKeyFile = "dev-api-key.pem"

export interface DevCredentials {
  readonly tenantId: string
  readonly keyId: string
}

export class DevProvisioning extends Context.Service<DevProvisioning, DevCredentials | undefined>()(
  "coffer/DevProvisioning"
) {
  static readonly layer = Layer.effect(
    DevProvisioning,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (config.serviceEnv !== "development") return undefined
      const marker = join(config.dataDir, devTenantFile)
      if (existsSync(marker)) return undefined
      const catalog = yield* Catalog
      const tenant = yield* Tenants.use((tenants) =>
        tenants.create({ name: "dev", networks: catalog.networks.map((network) => network.networkKey) }))
      const seed = yield* Entropy.use((entropy) => entropy.bytes(32, "dev-api-key"))
      const { privateKey, publicKeyHex } = keyPairFromSeed(seed)
      const key = yield* ApiKeyRegistry.use((registry) =>
        registry.create(tenant.id, { name: "dev", publicKey: publicKeyHex })).pipe(Effect.orDie)
      mkdirSync(config.dataDir, { recursive: true })
      const keyPath = join(config.dataDir, devKeyFile)
      writeFileAtomically(keyPath, privateKey.export({ format: "pem", type: "pkcs8" }) as string, 0o600)
      writeFileAtomically(marker, JSON.stringify({ tenantId: tenant.id, keyId: key.keyId }, null, 2) + "\n", 0o600)
      yield* Effect.logInfo(
        `development tenant ${tenant.id} provisioned with API key ${key.keyId} (private key: ${keyPath}). ` +
          `Try a signed call: npm run call -- GET /v1/networks`
      )
      return { tenantId: tenant.id, keyId: key.keyId }
    })
  )
}
