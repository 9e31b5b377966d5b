/**
 * The HTTP side of an idempotent endpoint (spec section 7), one copy for `POST /v1/wallets` and
 * `POST /v1/transactions`: scope the key by tenant, API key and endpoint (rule 2), fingerprint the exact body bytes
 * (rules 3 and 4), run the effect under the key with its answer stored in the effect's own database transaction
 * (Idempotency.ts `Commit`), and answer the stored bytes, so a replay is byte-identical to the first answer (rule 3).
 *
 * The key itself is checked by the handler before this runs: where that check falls among the endpoint's other
 * checks is part of each endpoint's contract (spec 4.4 checks the request's shape first).
 */
import { Effect } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { CurrentApiKey } from "../api/SignatureAuth.ts"
import { sha256Hex } from "../client/RequestSigner.ts"
import { Idempotency, type StoreInStatement } from "../idempotency/Idempotency.ts"
import type { Tenant } from "../tenants/Tenants.ts"
import { currentTenant } from "./CurrentTenant.ts"

export interface IdempotentEndpoint<A> {
  /** The scope's endpoint name, e.g. `POST /v1/wallets` (rule 2). */
  readonly endpoint: string
  /** The checked `Idempotency-Key`, or the key of an `externalTxId` (ExternalTxIdKey.ts). */
  readonly key: string
  /** Rule 8: the key is unique across the tenant (an `externalTxId`). */
  readonly tenantWide?: boolean
  /** The success status of the first answer, stored and replayed with it. */
  readonly status: number
  /** The wire object of the effect's result; its JSON text is the stored body. */
  readonly body: (answer: A) => unknown
  /**
   * No claim before the effect: its one statement inserts the record with the answer (Idempotency.ts
   * `RunOptions.claimInStatement`); the effect calls `record.claim` before any other write.
   */
  readonly claimInStatement?: boolean
}

/**
 * Idempotency.ts `Commit` with the endpoint's answers: called inside the effect's database transaction, or
 * `inStatement` for an effect written as one statement.
 */
export interface RecordAnswer<A> {
  (answer: A): Effect.Effect<void>
  readonly inStatement: StoreInStatement<A>
  /** Idempotency.ts `Commit.claim`. */
  readonly claim: Effect.Effect<void>
}

/**
 * Runs `execute` at most once per key and body. `execute` receives `record`, with which it must store the result it
 * is about to answer in the database transaction (or the one statement) of its effect, so a crash never separates
 * the two.
 */
export const idempotentResponse = <A, E, R>(
  endpoint: IdempotentEndpoint<A>,
  execute: (tenant: Tenant, record: RecordAnswer<A>) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const apiKey = yield* CurrentApiKey
    const tenant = yield* currentTenant
    const idempotency = yield* Idempotency
    const bytes = new Uint8Array(yield* Effect.orDie(request.arrayBuffer))
    const render = (answer: A) => ({ status: endpoint.status, body: JSON.stringify(endpoint.body(answer)) })
    const response = yield* idempotency.run(
      {
        tenantId: tenant.id,
        keyId: apiKey.keyId,
        endpoint: endpoint.endpoint,
        key: endpoint.key,
        tenantWide: endpoint.tenantWide === true
      },
      sha256Hex(bytes),
      (commit) => {
        const inStatement: StoreInStatement<A> = (answer, write) => commit.inStatement(render(answer), write)
        const record = Object.assign((answer: A) => commit(render(answer)), { inStatement, claim: commit.claim })
        return Effect.map(execute(tenant, record), render)
      },
      { claimInStatement: endpoint.claimInStatement === true }
    )
    return HttpServerResponse.text(response.body, { status: response.status, contentType: "application/json" })
  })
