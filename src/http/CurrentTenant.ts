/** The tenant of the signed request, for handlers behind SignatureAuth. */
import { Effect } from "effect"
import { CurrentApiKey } from "../api/SignatureAuth.ts"
import { Tenants } from "../tenants/Tenants.ts"

export const currentTenant = Effect.gen(function*() {
  const key = yield* CurrentApiKey
  const tenant = yield* Tenants.use((tenants) => tenants.getCached(key.tenantId))
  // The key was just resolved with its tenant; a missing tenant row is a broken invariant.
  if (tenant === undefined) return yield* Effect.die(new Error(`tenant ${key.tenantId} of key ${key.keyId} is missing`))
  return tenant
})
