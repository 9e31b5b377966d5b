/**
 * The typed tenant client, derived from the API definitions: every call is signed per request (section 5). The
 * signature covers the URL exactly as HttpClient will send it (`Url.make` of url and query), and the body bytes
 * exactly as encoded, so what is signed is what is sent.
 */
import { Clock, Effect, Option, Result } from "effect"
import { HttpClient, HttpClientRequest, Url } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import type { KeyObject } from "node:crypto"
import { Api } from "../api/Api.ts"
import { signRequest } from "./RequestSigner.ts"

export interface TenantCredentials {
  readonly baseUrl: string
  readonly keyId: string
  readonly privateKey: KeyObject
  /** Each request's JWT nonce; a random UUID unless given (the testers' kit draws them from the scenario's seed). */
  readonly nonce?: () => string
}

/** An HttpClient that signs each request (for raw calls the typed client does not cover). */
export const signingHttpClient = (credentials: TenantCredentials) => (client: HttpClient.HttpClient) =>
  client.pipe(
    HttpClient.mapRequest(HttpClientRequest.prependUrl(credentials.baseUrl)),
    HttpClient.mapRequestEffect((request) =>
      Effect.map(Clock.currentTimeMillis, (millis) => {
        const url = Url.make(request.url, request.urlParams, Option.getOrUndefined(request.hash))
        if (Result.isFailure(url)) return request
        const body = request.body._tag === "Uint8Array" ? request.body.body : new Uint8Array(0)
        return HttpClientRequest.setHeaders(request, signRequest({
          keyId: credentials.keyId,
          privateKey: credentials.privateKey,
          target: url.success.pathname + url.success.search,
          body,
          nowSeconds: Math.floor(millis / 1000),
          ...(credentials.nonce === undefined ? {} : { nonce: credentials.nonce() })
        }))
      })
    )
  )

export const makeTenantClient = (credentials: TenantCredentials) =>
  HttpApiClient.make(Api, { transformClient: signingHttpClient(credentials) })

export type TenantClient = Effect.Success<ReturnType<typeof makeTenantClient>>
