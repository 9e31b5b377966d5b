/** The operator interface (operator-interface.md): a second listener with its own bearer token. */
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "effect/http-api"
import { AssetObject } from "../api/ReferenceApi.ts"
import { TransactionObject } from "../api/TransactionsApi.ts"
import { TransactionKind } from "../transactions/Transaction.ts"
import { OpsAuditApi } from "./OpsAuditApi.ts"
import { addOpsTokenSecurity } from "./OpsOpenApi.ts"
import { UserObject, WalletObject } from "../api/UsersApi.ts"
import { Uuid } from "../domain/Ids.ts"
import { RawAmount } from "../domain/RawAmount.ts"
import { storable } from "../domain/StorableText.ts"
import { CustomerRefIdParam, PageLimit } from "../api/Common.ts"
import { OpsMetricsApi } from "../observability/MetricsApi.ts"
import {
  AssetNotSupportedWire,
  BadRequestParamsWire,
  BadRequestWire,
  InvalidAddressWire,
  InvalidStateWire,
  NotFoundWire,
  UnauthorizedWire,
  WalletNotActiveWire
} from "../domain/ApiError.ts"

export class OpsAuth extends HttpApiMiddleware.Service<OpsAuth>()("coffer/OpsAuth", {
  // 400 first: path and query values are decoded before the token is checked (as on /v1, spec section 7); a body
  // that is not UTF-8 is 422 after it (http/Utf8Body.ts).
  error: [BadRequestParamsWire, UnauthorizedWire, BadRequestWire]
}) {}

export class OpsSchemaErrors extends HttpApiMiddleware.Service<OpsSchemaErrors>()("coffer/OpsSchemaErrors", {
  error: [BadRequestParamsWire, BadRequestWire]
}) {}

export const TenantObject = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  status: Schema.Literals(["ACTIVE", "SUSPENDED"]),
  subscriptionExpiresAt: Schema.NullOr(Schema.String),
  settings: Schema.Record(Schema.String, Schema.Unknown),
  networks: Schema.Array(Schema.String),
  createdAt: Schema.String
}).annotate({ identifier: "Tenant" })
export type TenantObject = typeof TenantObject.Type

export const ApiKeyObject = Schema.Struct({
  keyId: Schema.String,
  name: Schema.String,
  allowedIps: Schema.Array(Schema.String),
  rateLimitPerSecond: Schema.Number,
  status: Schema.Literals(["ACTIVE", "REVOKED"]),
  createdAt: Schema.String
}).annotate({ identifier: "ApiKey" })

export const HealthObject = Schema.Struct({
  status: Schema.Literals(["ok", "degraded"]),
  database: Schema.Literals(["ok", "unavailable"]),
  chains: Schema.Record(Schema.String, Schema.Struct({
    height: Schema.Number,
    lagBlocks: Schema.Number,
    status: Schema.String
  })),
  signer: Schema.Literals(["ACTIVE", "DISABLED"]),
  /** The cluster as this process sees it (entities/ClusterHealth.ts); null when the database did not answer. */
  cluster: Schema.NullOr(Schema.Struct({
    runners: Schema.Array(Schema.Struct({
      address: Schema.String,
      healthy: Schema.Boolean,
      self: Schema.Boolean,
      shards: Schema.String
    })),
    heldHere: Schema.String,
    oldestUnprocessedMessageSeconds: Schema.NullOr(Schema.Number)
  })),
  /**
   * Sends final once whose block a reorganization deeper than the confirmation rule removed, broadcast again with
   * the same bytes until final again (sending/ReorganizedSends.ts); empty almost always, and when the database did
   * not answer.
   */
  reorganizedSends: Schema.Array(Schema.Struct({
    networkKey: Schema.String,
    kind: Schema.String,
    ownerId: Schema.String,
    txHash: Schema.String,
    since: Schema.String
  }))
}).annotate({ identifier: "Health" })

/** A tenant id that is not a UUID cannot name a tenant: a path parse failure, 400 (as on /v1, spec section 7). */
const tenantParams = { tenantId: Uuid }
const userParams = { tenantId: Uuid, customerRefId: CustomerRefIdParam }

export class OpsTenantsApi extends HttpApiGroup.make("tenants")
  .add(
    HttpApiEndpoint.post("create", "/ops/tenants", {
      payload: storable(Schema.Struct({ name: Schema.String, networks: Schema.optional(Schema.Array(Schema.String)) })),
      success: TenantObject.pipe(HttpApiSchema.status(201)),
      error: [BadRequestWire]
    }),
    HttpApiEndpoint.get("list", "/ops/tenants", {
      query: {
        status: Schema.optional(Schema.Literals(["ACTIVE", "SUSPENDED"])),
        limit: Schema.optional(PageLimit),
        cursor: Schema.optional(Uuid)
      },
      success: Schema.Struct({ items: Schema.Array(TenantObject), nextCursor: Schema.NullOr(Schema.String) })
    })
      .annotate(OpenApi.Summary, "List tenants")
      .annotate(OpenApi.Description, "Newest first; `nextCursor` is set when the page is full."),
    HttpApiEndpoint.get("get", "/ops/tenants/:tenantId", {
      params: tenantParams,
      success: TenantObject,
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.patch("update", "/ops/tenants/:tenantId", {
      params: tenantParams,
      payload: storable(Schema.Struct({
        status: Schema.optional(Schema.Literals(["ACTIVE", "SUSPENDED"])),
        subscriptionExpiresAt: Schema.optional(Schema.NullOr(Schema.String)),
        networks: Schema.optional(Schema.Array(Schema.String)),
        settings: Schema.optional(Schema.Record(Schema.String, Schema.Unknown))
      })),
      success: TenantObject,
      error: [NotFoundWire, BadRequestWire]
    }),
    HttpApiEndpoint.post("createApiKey", "/ops/tenants/:tenantId/api-keys", {
      params: tenantParams,
      payload: storable(Schema.Struct({
        name: Schema.String,
        publicKey: Schema.String,
        allowedIps: Schema.optional(Schema.Array(Schema.String)),
        rateLimitPerSecond: Schema.optional(Schema.Number)
      })),
      success: ApiKeyObject.pipe(HttpApiSchema.status(201)),
      error: [NotFoundWire, BadRequestWire]
    }),
    HttpApiEndpoint.delete("revokeApiKey", "/ops/tenants/:tenantId/api-keys/:keyId", {
      params: { tenantId: Uuid, keyId: Schema.String },
      success: HttpApiSchema.NoContent,
      error: [NotFoundWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Tenants and API keys" }))
{}

export class OpsUsersApi extends HttpApiGroup.make("users")
  .add(
    HttpApiEndpoint.post("bindTotp", "/ops/tenants/:tenantId/users/:customerRefId/totp", {
      params: userParams,
      success: Schema.Struct({ secret: Schema.String, otpauthUrl: Schema.String }),
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.delete("unbindTotp", "/ops/tenants/:tenantId/users/:customerRefId/totp", {
      params: userParams,
      success: HttpApiSchema.NoContent,
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.patch("update", "/ops/tenants/:tenantId/users/:customerRefId", {
      params: userParams,
      payload: storable(Schema.Struct({
        cooldownUntil: Schema.optional(Schema.NullOr(Schema.String)),
        status: Schema.optional(Schema.Literals(["ACTIVE", "FROZEN", "CLOSED"]))
      })),
      success: UserObject,
      error: [NotFoundWire, BadRequestWire, InvalidStateWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "End users (portal stand-in)" }))
{}

export const PlatformAddressObject = Schema.Struct({
  networkKey: Schema.String,
  address: Schema.String,
  role: Schema.Literals(["HOT", "SWEEP", "GAS"]),
  /** The tenant whose GAS wallet it is; null for HOT and SWEEP. */
  tenantId: Schema.NullOr(Schema.String)
}).annotate({ identifier: "PlatformAddress" })

export class OpsPlatformApi extends HttpApiGroup.make("platform")
  .add(HttpApiEndpoint.get("health", "/ops/health", { success: HealthObject }))
  .add(HttpApiEndpoint.get("addresses", "/ops/platform/addresses", { success: Schema.Array(PlatformAddressObject) }))
  .annotateMerge(OpenApi.annotations({ title: "Platform" }))
{}

export const SweepObject = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literals(["SWEEP", "TOP_UP"]),
  networkKey: Schema.String,
  assetId: Schema.String,
  from: Schema.String,
  to: Schema.String,
  amountRaw: Schema.String,
  txHash: Schema.NullOr(Schema.String),
  networkFeeRaw: Schema.NullOr(Schema.String),
  status: Schema.Literals(["WAITING_GAS", "PENDING", "CONFIRMING", "COMPLETED", "FAILED"]),
  createdAt: Schema.String
}).annotate({ identifier: "Sweep" })

export const GasWalletObject = Schema.Struct({
  networkKey: Schema.String,
  address: Schema.String,
  assetId: Schema.String,
  balanceRaw: Schema.String,
  recommendedMinRaw: Schema.String
}).annotate({ identifier: "GasWallet" })

/** Sweeps and GAS wallets (operator-interface.md "Platform"; docs/sweeps.md). */
export class OpsSweepsApi extends HttpApiGroup.make("sweeps")
  .add(
    HttpApiEndpoint.get("list", "/ops/sweeps", {
      query: {
        networkKey: Schema.optional(Schema.String),
        status: Schema.optional(Schema.Literals(["WAITING_GAS", "PENDING", "CONFIRMING", "COMPLETED", "FAILED"])),
        limit: Schema.optional(PageLimit),
        cursor: Schema.optional(Uuid)
      },
      success: Schema.Struct({ items: Schema.Array(SweepObject), nextCursor: Schema.NullOr(Schema.String) })
    }),
    HttpApiEndpoint.get("gas", "/ops/tenants/:tenantId/gas", {
      params: { tenantId: Uuid },
      success: Schema.Array(GasWalletObject),
      error: [NotFoundWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Sweeps and gas wallets" }))
{}

const devnetParams = { networkKey: Schema.String }

export const DevnetState = Schema.Struct({
  networkKey: Schema.String,
  height: Schema.Number,
  hash: Schema.String,
  finalizedHeight: Schema.Number,
  pendingTransfers: Schema.Number,
  broadcastFails: Schema.Boolean,
  networkFeeRaw: Schema.String,
  /** The platform hot wallet's balance per asset of the network, raw. */
  hotWalletBalance: Schema.Record(Schema.String, Schema.String)
}).annotate({ identifier: "DevnetState" })

/** The developer chain (operator-interface.md): only for networks served by the built-in simulated chain. */
export class OpsDevnetApi extends HttpApiGroup.make("devnet")
  .add(
    HttpApiEndpoint.post("transfer", "/ops/devnet/:networkKey/transfers", {
      params: devnetParams,
      payload: storable(Schema.Struct({
        to: Schema.String,
        assetId: Schema.String,
        amountRaw: RawAmount,
        from: Schema.optional(Schema.String)
      })),
      success: Schema.Struct({ txHash: Schema.String }),
      error: [NotFoundWire, BadRequestWire, InvalidAddressWire, AssetNotSupportedWire]
    }),
    HttpApiEndpoint.post("mine", "/ops/devnet/:networkKey/blocks", {
      params: devnetParams,
      payload: Schema.Struct({ count: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1000 }))) }),
      success: Schema.Struct({ height: Schema.Number }),
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.post("reorg", "/ops/devnet/:networkKey/reorg", {
      params: devnetParams,
      payload: Schema.Struct({ depth: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })) }),
      success: Schema.Struct({ height: Schema.Number }),
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.patch("configure", "/ops/devnet/:networkKey", {
      params: devnetParams,
      payload: storable(Schema.Struct({
        broadcastFails: Schema.optional(Schema.Boolean),
        networkFeeRaw: Schema.optional(RawAmount),
        hotWalletBalance: Schema.optional(Schema.Record(Schema.String, RawAmount))
      })),
      success: DevnetState,
      error: [NotFoundWire, AssetNotSupportedWire]
    }),
    HttpApiEndpoint.get("state", "/ops/devnet/:networkKey", {
      params: devnetParams,
      success: DevnetState,
      error: [NotFoundWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Developer chain (simulated networks only)" }))
{}

/** Approvals and manual handling (operator-interface.md): pending internal transfers and withdrawals. */
export const ApprovalObject = Schema.Struct({
  tenantId: Schema.String,
  /** The transaction's kind: DEPOSIT is a deposit held for manual handling (credit it), the others wait for a decision. */
  kind: Schema.Literals(TransactionKind),
  transaction: TransactionObject
}).annotate({ identifier: "Approval" })

export class OpsManualApi extends HttpApiGroup.make("manual")
  .add(
    HttpApiEndpoint.get("approvals", "/ops/approvals", {
      query: {
        tenantId: Schema.optional(Uuid),
        kind: Schema.optional(Schema.Literals(TransactionKind)),
        limit: Schema.optional(PageLimit),
        cursor: Schema.optional(Uuid)
      },
      success: Schema.Struct({ items: Schema.Array(ApprovalObject), nextCursor: Schema.NullOr(Schema.String) })
    })
      .annotate(OpenApi.Summary, "List what waits for an operator")
      .annotate(
        OpenApi.Description,
        "Withdrawals and internal transfers in PENDING_AUTHORIZATION and deposits held for manual handling " +
          "(COMPLETED / MANUAL_REVIEW), of every tenant, oldest first; `nextCursor` is set when the page is full."
      ),
    HttpApiEndpoint.post("creditDeposit", "/ops/tenants/:tenantId/deposits/:id/credit", {
      params: { tenantId: Uuid, id: Uuid },
      success: TransactionObject,
      error: [NotFoundWire, InvalidStateWire]
    }),
    HttpApiEndpoint.post("approve", "/ops/tenants/:tenantId/transactions/:id/approve", {
      params: { tenantId: Uuid, id: Uuid },
      success: TransactionObject,
      // 422 WALLET_NOT_ACTIVE: an internal transfer whose wallets were frozen (or hidden) since it was submitted.
      error: [NotFoundWire, InvalidStateWire, WalletNotActiveWire]
    }),
    HttpApiEndpoint.post("reject", "/ops/tenants/:tenantId/transactions/:id/reject", {
      params: { tenantId: Uuid, id: Uuid },
      success: TransactionObject,
      error: [NotFoundWire, InvalidStateWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Approvals and manual handling" }))
{}

export const NetworkSwitchesObject = Schema.Struct({
  networkKey: Schema.String,
  depositEnabled: Schema.Boolean,
  withdrawEnabled: Schema.Boolean,
  watch: Schema.Literals(["ACTIVE", "FROZEN"])
}).annotate({ identifier: "NetworkSwitches" })

/**
 * Switches (operator-interface.md): stored with when they were set, in force in every process at once. The
 * answers show what the network, asset or wallet allows afterwards (a switch only narrows: docs/operations.md).
 */
export class OpsSwitchesApi extends HttpApiGroup.make("switches")
  .add(
    HttpApiEndpoint.patch("network", "/ops/networks/:networkKey", {
      params: { networkKey: Schema.String },
      payload: Schema.Struct({
        depositEnabled: Schema.optional(Schema.Boolean),
        withdrawEnabled: Schema.optional(Schema.Boolean),
        watch: Schema.optional(Schema.Literals(["ACTIVE", "FROZEN"]))
      }),
      success: NetworkSwitchesObject,
      error: [NotFoundWire, InvalidStateWire]
    }),
    HttpApiEndpoint.patch("asset", "/ops/assets/:assetId", {
      params: { assetId: Schema.String },
      payload: Schema.Struct({
        status: Schema.optional(Schema.Literals(["ENABLED", "DEPOSIT_PAUSED"])),
        withdrawEnabled: Schema.optional(Schema.Boolean)
      }),
      success: AssetObject,
      error: [NotFoundWire, InvalidStateWire]
    }),
    HttpApiEndpoint.patch("wallet", "/ops/tenants/:tenantId/wallets/:walletId", {
      params: { tenantId: Uuid, walletId: Uuid },
      // A string rather than literals, so CLOSED and PROVISIONING get a message that says what may be set.
      payload: storable(Schema.Struct({ status: Schema.String })),
      success: WalletObject,
      error: [NotFoundWire, BadRequestWire, InvalidStateWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Switches" }))
{}

export const PriceObject = Schema.Struct({
  /** USD per whole unit, a decimal string; null: no price (the asset's static fee floors alone apply). */
  priceUsd: Schema.NullOr(Schema.String),
  source: Schema.Literals(["CATALOG", "OPERATOR"]),
  /** When and by whom the operator set it (RFC 3339; `X-Operator` header); null for a catalog price. */
  setAt: Schema.NullOr(Schema.String),
  setBy: Schema.NullOr(Schema.String)
}).annotate({ identifier: "Price" })

/** The prices in force, by assetId (every catalog asset). */
export const PricesObject = Schema.Record(Schema.String, PriceObject).annotate({ identifier: "Prices" })

/**
 * Prices (operator-interface.md, "Platform"; decisions.md "Operating wallets, sweeps, gas and fee floors"): the body
 * maps assetId to a USD price (a decimal string; null drops the operator's price, back to the catalog's). Stored
 * with who set it and when; fee rule 3 uses the new price at once (docs/operations.md, "Prices and fee floors").
 */
export class OpsPricesApi extends HttpApiGroup.make("prices")
  .add(
    HttpApiEndpoint.get("list", "/ops/prices", { success: PricesObject }),
    HttpApiEndpoint.put("set", "/ops/prices", {
      payload: storable(Schema.Record(Schema.String, Schema.NullOr(Schema.String))),
      success: PricesObject,
      error: [BadRequestWire, AssetNotSupportedWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Prices" }))
{}

export const OpeningBalanceObject = Schema.Struct({
  id: Schema.String,
  networkKey: Schema.String,
  address: Schema.String,
  role: Schema.Literals(["HOT", "SWEEP", "GAS"]),
  assetId: Schema.String,
  amountRaw: Schema.String,
  /** The block it was held at: the one the network's deposit watcher started from. */
  height: Schema.String,
  /** BTC: the output (else null). */
  txid: Schema.NullOr(Schema.String),
  vout: Schema.NullOr(Schema.Number),
  recordedAt: Schema.String,
  recordedBy: Schema.String,
  requestId: Schema.String
}).annotate({ identifier: "OpeningBalance" })

/**
 * Opening balances (docs/ledger.md "Opening balances"): what an operating address held at the block the network's
 * deposit watcher started from, so the chain books explain it. Recorded once, audited, never changed.
 */
export class OpsOpeningBalancesApi extends HttpApiGroup.make("openingBalances")
  .add(
    HttpApiEndpoint.get("list", "/ops/networks/:networkKey/opening_balances", {
      params: { networkKey: Schema.String },
      success: Schema.Struct({ items: Schema.Array(OpeningBalanceObject) }),
      error: [NotFoundWire]
    }),
    HttpApiEndpoint.post("record", "/ops/networks/:networkKey/opening_balances", {
      params: { networkKey: Schema.String },
      payload: storable(Schema.Struct({
        address: Schema.String,
        assetId: Schema.String,
        /** Account families: what the address held. */
        amountRaw: Schema.optional(RawAmount),
        /** BTC: the address's unspent outputs at that block. */
        outputs: Schema.optional(Schema.Array(Schema.Struct({ txid: Schema.String, vout: Schema.Number, valueRaw: RawAmount }))),
        /** The watcher's start block: confirms it, or names it where the database predates its record. */
        height: Schema.optional(RawAmount)
      })),
      success: Schema.Struct({ items: Schema.Array(OpeningBalanceObject) }).pipe(HttpApiSchema.status(201)),
      error: [NotFoundWire, BadRequestWire, InvalidStateWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Opening balances" }))
{}

const TreeRootObject = Schema.Struct({
  /** SHA-256 of the root node, hex (docs/reserves.md). */
  hash: Schema.String,
  /** The liabilities: the sum of every leaf, raw. */
  sumRaw: Schema.String
}).annotate({ identifier: "ReserveTreeRoot" })

export const ReserveAssetObject = Schema.Struct({
  networkKey: Schema.String,
  assetId: Schema.String,
  liabilities: Schema.Struct({ root: TreeRootObject, leafCount: Schema.Number }),
  /** What the listed addresses hold on chain at the node's head (`height`); null when the network cannot be read. */
  holdings: Schema.NullOr(Schema.Struct({
    at: Schema.Literal("HEAD"),
    height: Schema.String,
    totalRaw: Schema.String,
    addresses: Schema.Array(Schema.Struct({ address: Schema.String, role: Schema.String, balanceRaw: Schema.String }))
  })),
  /** Why `holdings` is null. */
  holdingsNotRead: Schema.NullOr(Schema.String),
  /** holdings − liabilities, signed (a minus sign: less on chain than owed); null without holdings. */
  differenceRaw: Schema.NullOr(Schema.String)
}).annotate({ identifier: "ReserveAsset" })

export const LiabilityProofObject = Schema.Struct({
  networkKey: Schema.String,
  assetId: Schema.String,
  leaf: Schema.Struct({
    salt: Schema.String,
    ownerKind: Schema.Literals(["USER", "TENANT_FEES"]),
    tenantId: Schema.String,
    customerRefId: Schema.String,
    assetId: Schema.String,
    availableRaw: Schema.String,
    frozenRaw: Schema.String,
    hash: Schema.String
  }),
  path: Schema.Array(Schema.Struct({ side: Schema.Literals(["LEFT", "RIGHT"]), hash: Schema.String, sumRaw: Schema.String })),
  root: TreeRootObject
}).annotate({ identifier: "LiabilityProof" })

/** Proof of reserves (docs/reserves.md): liabilities as Merkle sum tree roots, holdings, and one user's proof. */
export class OpsReservesApi extends HttpApiGroup.make("reserves")
  .add(
    HttpApiEndpoint.get("report", "/ops/reserves", {
      success: Schema.Struct({ takenAt: Schema.String, items: Schema.Array(ReserveAssetObject) })
    }),
    HttpApiEndpoint.get("liabilityProof", "/ops/tenants/:tenantId/users/:customerRefId/liability_proof", {
      params: userParams,
      success: Schema.Struct({ takenAt: Schema.String, proofs: Schema.Array(LiabilityProofObject) }),
      error: [NotFoundWire]
    })
  )
  .annotateMerge(OpenApi.annotations({ title: "Proof of reserves" }))
{}

export class OpsApi extends HttpApi.make("coffer-ops")
  .add(OpsTenantsApi)
  .add(OpsUsersApi)
  .add(OpsPlatformApi)
  .add(OpsManualApi)
  .add(OpsSwitchesApi)
  .add(OpsSweepsApi)
  .add(OpsDevnetApi)
  .add(OpsPricesApi)
  .add(OpsReservesApi)
  .add(OpsOpeningBalancesApi)
  .add(OpsAuditApi)
  .add(OpsMetricsApi)
  .middleware(OpsAuth)
  .middleware(OpsSchemaErrors)
  .annotateMerge(OpenApi.annotations({
    title: "Coffer operator interface",
    version: "1.0",
    description: "Tenant provisioning, keys, approvals, switches, prices, listings and the audit trail, on the " +
      "operator listener (OPS_HOST:OPS_PORT). Every route takes `Authorization: Bearer <ops token>`.",
    transform: addOpsTokenSecurity
  }))
{}
