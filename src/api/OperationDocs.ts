/**
 * A summary and a description for every operation of the `/v1` OpenAPI document, keyed by operation id
 * (`group.endpoint`), applied by the API's OpenAPI transform (Api.ts). One table, apart from the endpoint
 * definitions, so the definitions stay about types; test/http/Reference.test.ts fails when an operation has no entry
 * or an entry names no operation. A description already on the endpoint (its rule in a sentence) is kept after the
 * table's. The full rules are the spec's section 4; docs/client.md has an example per resource.
 */
export interface OperationDoc {
  readonly summary: string
  readonly description: string
}

export const operationDocs: Readonly<Record<string, OperationDoc>> = {
  "reference.networks": {
    summary: "List networks",
    description: "The networks enabled for the tenant, with their confirmations and switches (spec 4.1)."
  },
  "reference.supportedAssets": {
    summary: "List supported assets",
    description: "Assets on the tenant's networks with decimals, minimums, current deposit and withdrawal fees " +
      "(`depositFeeRaw`, `withdrawFeeRaw`) and limits. Refresh periodically; do not hard-code them (spec 4.1)."
  },
  "reference.validateAddress": {
    summary: "Validate an address",
    description: "Whether `address` is valid for the asset's network (format and checksum). 422 ASSET_NOT_SUPPORTED " +
      "for an unknown asset. It does not check that a Solana address is a wallet (spec 4.1)."
  },
  "users.create": {
    summary: "Create a user",
    description: "Idempotent by `customerRefId`: an existing user is returned unchanged (spec 4.2). A new one past " +
      "the tenant's user quota is 422 LIMIT_EXCEEDED."
  },
  "users.list": {
    summary: "List users",
    description: "Newest first, paged with `cursor` (the previous page's `nextCursor`; null at the end), filtered by " +
      "`status` (spec 4.2)."
  },
  "users.get": {
    summary: "Get a user",
    description: "The user and its wallets. 404 NOT_FOUND when missing or another tenant's (spec 4.2)."
  },
  "users.update": {
    summary: "Update a user",
    description: "Change `email` (lowercased, unique in the tenant) or `status` (`ACTIVE`, `FROZEN`) (spec 4.2)."
  },
  "users.balances": {
    summary: "Get a user's balances",
    description: "Available and frozen raw amounts per asset over all of the user's wallets (spec 4.2). While a " +
      "deposit reversal leaves a wallet below zero its available counts 0 and `overdrawnRaw` carries the debt."
  },
  "users.depositAddress": {
    summary: "Get a deposit address",
    description: "Creates the user and a default wallet of the network's family when missing and returns its " +
      "address; idempotent. Waits up to about 6 s for allocation; on `PROVISIONING` repeat the call (spec 4.2)."
  },
  "wallets.create": {
    summary: "Create a wallet",
    description: "A wallet of a chain family for a user (created when missing). Address allocation is asynchronous: " +
      "`WALLET_CREATED` is sent when done (spec 4.3)."
  },
  "wallets.list": {
    summary: "List wallets",
    description: "The tenant's wallets, newest first, paged with `before` (the previous page's `nextBefore`), " +
      "optionally of one user (`customerRefId`) (spec 4.3)."
  },
  "wallets.get": {
    summary: "Get a wallet",
    description: "One wallet. 404 NOT_FOUND when missing or another tenant's (spec 4.3)."
  },
  "wallets.assets": {
    summary: "Get a wallet's balances",
    description: "Available and frozen raw amounts per asset of one wallet (spec 4.3). While a deposit reversal " +
      "leaves it below zero, `available` is 0 and `overdrawn` carries the debt."
  },
  "wallets.addresses": {
    summary: "List a wallet's addresses",
    description: "The wallet's deposit address on each network of its family (spec 4.3)."
  },
  "transactions.submit": {
    summary: "Submit a withdrawal or transfer",
    description: "Moves `amountRaw` of `assetId` from a wallet to another wallet, a user of the tenant or an " +
      "on-chain address. Idempotent by `externalTxId` (or the `Idempotency-Key` header) (spec 4.4)."
  },
  "transactions.list": {
    summary: "List transactions",
    description: "Deposits, withdrawals and transfers, newest first, paged with `before` (the previous page's " +
      "`nextBefore`), filtered by wallet, user, kind, status, asset and creation time (spec 4.4)."
  },
  "transactions.cancel": {
    summary: "Cancel a withdrawal",
    description: "Cancels an on-chain withdrawal not yet in signing; its frozen amount and fee return to " +
      "available. 409 INVALID_STATE for an internal transfer or a withdrawal past that point (spec 4.4)."
  },
  "transactions.estimateFee": {
    summary: "Estimate a fee",
    description: "The fee and settlement a withdrawal or transfer of this amount would have (spec 4.4)."
  },
  "transactions.byExternalTxId": {
    summary: "Get a transaction by externalTxId",
    description: "The transaction submitted with this `externalTxId`: after a timeout, ask here before retrying " +
      "(spec 4.4, section 7)."
  },
  "transactions.get": {
    summary: "Get a transaction",
    description: "One transaction by id. 404 NOT_FOUND when missing or another tenant's (spec 4.4)."
  },
  "webhookInfo.eventTypes": {
    summary: "List webhook event types",
    description: "The event types an endpoint can subscribe to, how deliveries are signed (algorithm, key, headers, " +
      "signed message) and the retry schedule. Not authenticated (spec 4.5)."
  },
  "webhooks.create": {
    summary: "Register a webhook endpoint",
    description: "An https URL that receives signed events of the subscribed types (all when `events` is empty); " +
      "at most 10 active per tenant (spec 4.5), and at most the tenant's quota (default 100) active and disabled " +
      "together; 422 LIMIT_EXCEEDED past either."
  },
  "webhooks.list": {
    summary: "List webhook endpoints",
    description: "The tenant's webhook endpoints (spec 4.5)."
  },
  "webhooks.update": {
    summary: "Update a webhook endpoint",
    description: "Change `url`, `events`, `description` or `active` (spec 4.5)."
  },
  "webhooks.disable": {
    summary: "Disable a webhook endpoint",
    description: "Disables the endpoint: it receives nothing until re-enabled with PATCH `active` (spec 4.5)."
  },
  "webhooks.test": {
    summary: "Send a test event",
    description: "Queues a `WEBHOOK_TEST` event for this endpoint only, signed and retried like any other " +
      "(spec 4.5)."
  },
  "webhooks.deliveries": {
    summary: "List webhook deliveries",
    description: "Delivery attempts with their status, filtered by endpoint and status, paged with `before` (spec 4.5)."
  },
  "webhooks.resend": {
    summary: "Resend an event",
    description: "Queues every delivery of the event again, delivered and dead ones included, with counters reset " +
      "(spec 4.5)."
  },
  "webhooks.publicKey": {
    summary: "Get the webhook signing key",
    description: "The Ed25519 public key (64 hex characters, key id `v1`) that verifies webhook signatures; " +
      "cacheable (spec 4.5)."
  }
}

/** The OpenAPI transform: every operation gets its summary and description (an endpoint's own sentence kept). */
export const addOperationDocs = (spec: Record<string, any>): Record<string, any> => {
  for (const item of Object.values<Record<string, any>>(spec.paths ?? {})) {
    for (const operation of Object.values<Record<string, any>>(item)) {
      const doc = operationDocs[operation.operationId]
      if (doc === undefined) continue
      operation.summary = doc.summary
      operation.description = operation.description === undefined
        ? doc.description
        : `${doc.description} ${operation.description}`
    }
  }
  return spec
}
