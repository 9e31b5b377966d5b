/**
 * `coffer/client` (package.json `exports`): what a tenant's TypeScript code needs to call `/v1`, documented with an
 * example per resource in docs/client.md. The typed client is derived from the API definitions, so its methods,
 * parameters and results are the OpenAPI document's (`client.<group>.<operation>`, the operation id).
 */
export { Api } from "../api/Api.ts"
export { clientJwtLifetimeSeconds, sha256Hex, signJwt, signRequest, type SignRequestInput } from "./RequestSigner.ts"
export { makeTenantClient, signingHttpClient, type TenantClient, type TenantCredentials } from "./TenantClient.ts"
