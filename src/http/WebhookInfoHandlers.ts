/** `GET /v1/webhooks/event_types`: the signing scheme, readable without authentication (spec 4.5). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { Signer } from "../signer/Signer.ts"
import {
  eventTypes,
  retryScheduleLabels,
  signatureHeaderFormat,
  signedMessageDescription,
  webhookHeaders,
  webhookKeyId
} from "../webhooks/EventTypes.ts"

export const WebhookInfoHandlers = HttpApiBuilder.group(Api, "webhookInfo", (handlers) =>
  Effect.gen(function*() {
    const signer = yield* Signer
    // With the signer disabled (pre-production) there is no key to publish; the rest still holds.
    const publicKey = yield* signer.webhookPublicKey().pipe(Effect.orElseSucceed(() => null))
    const response = {
          eventTypes: [...eventTypes],
          signature: {
            algorithm: "Ed25519" as const,
            keyId: webhookKeyId,
            publicKey,
            headers: [webhookHeaders.eventId, webhookHeaders.eventType, webhookHeaders.timestamp, webhookHeaders.signature],
            signedMessage: signedMessageDescription,
            signatureHeaderFormat
          },
          retrySchedule: [...retryScheduleLabels]
        }
    return handlers.handle("eventTypes", () => Effect.succeed(response))
  }))
