/** The tenant interface /v1 as one HttpApi: groups, middleware, and the OpenAPI document derived from them. */
import { HttpApi, OpenApi } from "effect/http-api"
import { ReferenceApi } from "./ReferenceApi.ts"
import { SchemaErrors, SignatureAuth } from "./SignatureAuth.ts"
import { TransactionsApi } from "./TransactionsApi.ts"
import { UsersApi } from "./UsersApi.ts"
import { WalletsApi } from "./WalletsApi.ts"
import { WebhookInfoApi } from "./WebhookInfoApi.ts"
import { WebhooksApi } from "./WebhooksApi.ts"
import { addOperationDocs } from "./OperationDocs.ts"

/**
 * Schemas decode with unknown fields dropped, and the spec says unknown request fields are ignored and clients must
 * tolerate new response fields (sections 1 and 9): the document must not claim `additionalProperties: false`.
 */
export const allowAdditionalProperties = (node: unknown): void => {
  if (Array.isArray(node)) {
    for (const item of node) allowAdditionalProperties(item)
  } else if (typeof node === "object" && node !== null) {
    const record = node as Record<string, unknown>
    if (record.additionalProperties === false) delete record.additionalProperties
    for (const value of Object.values(record)) allowAdditionalProperties(value)
  }
}

/** Both headers together authenticate a request, so they form one security requirement (spec section 5). */
const addSignedRequestSecurity = (spec: Record<string, any>): Record<string, any> => {
  allowAdditionalProperties(spec)
  spec.components = spec.components ?? {}
  spec.components.securitySchemes = {
    ...spec.components.securitySchemes,
    apiKey: {
      type: "apiKey",
      in: "header",
      name: "X-API-Key",
      description: "the key id: `ak_` followed by 24 hex characters"
    },
    signedJwt: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "JWT",
      description: "an EdDSA (Ed25519) compact JWS per request with claims uri, nonce, iat, exp, sub, bodyHash"
    }
  }
  for (const [path, item] of Object.entries<Record<string, any>>(spec.paths ?? {})) {
    for (const operation of Object.values<Record<string, any>>(item)) {
      if (typeof operation !== "object" || operation === null || !("responses" in operation)) continue
      operation.security = path === "/v1/webhooks/event_types" ? [] : [{ apiKey: [], signedJwt: [] }]
    }
  }
  return spec
}

export class Api extends HttpApi.make("coffer")
  .add(ReferenceApi.middleware(SignatureAuth))
  .add(UsersApi.middleware(SignatureAuth))
  .add(WalletsApi.middleware(SignatureAuth))
  .add(TransactionsApi.middleware(SignatureAuth))
  .add(WebhookInfoApi)
  .add(WebhooksApi.middleware(SignatureAuth))
  .middleware(SchemaErrors)
  .annotateMerge(OpenApi.annotations({
    title: "Coffer tenant open interface",
    version: "1.0",
    description: "Custody wallet service, tenant interface /v1. Every route except GET /v1/webhooks/event_types " +
      "is signed per request (X-API-Key and an EdDSA JWT).",
    transform: (spec) => addOperationDocs(addSignedRequestSecurity(spec))
  }))
{}
