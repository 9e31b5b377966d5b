/**
 * The typed operator client (bearer token), used by the CLI and the tests. `operator` is sent as `X-Operator`: the
 * name the audit trail records for the changes made (ops/AuditOrigin.ts).
 */
import { type Effect, Redacted } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { operatorHeader } from "../ops/AuditOrigin.ts"
import { OpsApi } from "../ops/OpsApi.ts"

export const makeOpsClient = (options: {
  readonly baseUrl: string
  readonly token: Redacted.Redacted<string>
  readonly operator?: string | undefined
}) =>
  HttpApiClient.make(OpsApi, {
    transformClient: (client) =>
      client.pipe(
        HttpClient.mapRequest(HttpClientRequest.prependUrl(options.baseUrl)),
        HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(options.token))),
        HttpClient.mapRequest((request) =>
          options.operator === undefined ? request : HttpClientRequest.setHeader(request, operatorHeader, options.operator)
        )
      )
  })

export type OpsClient = Effect.Success<ReturnType<typeof makeOpsClient>>
