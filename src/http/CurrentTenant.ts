/** The tenant of the signed request, for handlers behind SignatureAuth. */
import { Effect } from "effect"
import { CurrentApiKey } from "../api/SignatureAuth.ts"
import { Tenants } from "../tenants/Tenants.ts"

export const currentTenant = Effect.flatMap(
  Effect.zip(Effect.service(CurrentApiKey), Effect.service(Tenants)),
  ([key, tenants]) =>
    Effect.flatMap(tenants.getCached(key.tenantId), (tenant) =>
      // The key was just resolved with its tenant; a missing tenant row is a broken invariant.
      tenant === undefined
        ? Effect.die(new Error(`tenant ${key.tenantId} of key ${key.keyId} is missing`))
        : Effect.succeed(tenant))
)
