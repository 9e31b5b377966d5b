/** The typed operator client (bearer token), used by the CLI and the tests. */
import { type Effect, Redacted } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { OpsApi } from "../ops/OpsApi.ts"

export const makeOpsClient = (options: { readonly baseUrl: string; readonly token: Redacted.Redacted<string> }) =>
  HttpApiClient.make(OpsApi, {
    transformClient: (client) =>
      client.pipe(
        HttpClient.mapRequest(HttpClientRequest.prependUrl(options.baseUrl)),
        HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(options.token)))
      )
  })

export type OpsClient = Effect.Success<ReturnType<typeof makeOpsClient>>
