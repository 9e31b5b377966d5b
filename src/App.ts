/**
 * The service assembled from layers: configuration, storage, signer, clock (Effect's default), the domain
 * services, and two HTTP listeners (the tenant interface /v1 and the operator interface). Each infrastructure
 * layer swaps in one line: `Database.layer` for `layerFromUrl`, `Signer.layerConfig` for `layerLocalHd` or
 * `layerDisabled`, `Entropy.layer` for `layerSeeded`.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Context, Effect, Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { createServer } from "node:http"
import { Api } from "./api/Api.ts"
import { ApiKeyRegistry } from "./auth/ApiKeyRegistry.ts"
import { ApiKeys } from "./auth/ApiKeys.ts"
import { NoncePurge, NonceStore } from "./auth/NonceStore.ts"
import { ConfigChanges } from "./auth/ConfigChanges.ts"
import { SignatureAuthLayer } from "./auth/SignatureAuthLayer.ts"
import { Catalog } from "./catalog/Catalog.ts"
import { FeeFloors } from "./catalog/FeeFloors.ts"
import { PriceFeed } from "./catalog/PriceFeed.ts"
import { Switches } from "./catalog/Switches.ts"
import { AppConfig } from "./Config.ts"
import { Entropy } from "./domain/Entropy.ts"
import { Ids } from "./domain/Ids.ts"
import { answerParserErrors } from "./http/ClientErrors.ts"
import { DisabledPaths } from "./http/DisabledPaths.ts"
import { errorBoundary } from "./http/ErrorBoundary.ts"
import { limitConnections, listenerServerOptions } from "./http/ListenerLimits.ts"
import { makeIpMatcher } from "./auth/IpAllowList.ts"
import { pathParamLengthMax } from "./http/RequestTarget.ts"
import { ReferenceHandlers } from "./http/ReferenceHandlers.ts"
import { referencePage } from "./http/ReferencePage.ts"
import { SchemaErrorsLayer } from "./http/SchemaErrorsLayer.ts"
import { TransactionsHandlers } from "./http/TransactionsHandlers.ts"
import { UsersHandlers } from "./http/UsersHandlers.ts"
import { WalletsHandlers } from "./http/WalletsHandlers.ts"
import { WebhookInfoHandlers } from "./http/WebhookInfoHandlers.ts"
import { WebhooksHandlers } from "./http/WebhooksHandlers.ts"
import { ClusterLayer, ClusterRetention } from "./entities/Cluster.ts"
import { clusterDuty, ShardTakeover } from "./entities/ClusterDuties.ts"
import { ClusterHealth } from "./entities/ClusterHealth.ts"
import { WalletEntityLayer } from "./entities/WalletEntity.ts"
import { WithdrawalEntityLayer } from "./entities/WithdrawalEntity.ts"
import { ClaimGraceAgreement } from "./sending/ClaimGraceAgreement.ts"
import { OutgoingSends } from "./sending/OutgoingSends.ts"
import { SweepLoop } from "./sweeps/SweepLoop.ts"
import { ReorganizedSendsLoop } from "./sending/ReorganizedSends.ts"
import { GasWallets } from "./sweeps/GasWallets.ts"
import { Sweeps } from "./sweeps/Sweeps.ts"
import { WithdrawalProcessor } from "./withdrawals/WithdrawalProcessor.ts"
import { Withdrawals } from "./withdrawals/Withdrawals.ts"
import { WithdrawalSupervisor } from "./withdrawals/WithdrawalSupervisor.ts"
import { chainClientsLayer } from "./chains/ChainClientsLayer.ts"
import { SimulatedChain } from "./chains/simulated/SimulatedChain.ts"
import { DepositWatcher } from "./deposits/DepositWatcher.ts"
import { DepositWatcherSingletons } from "./deposits/DepositWatcherLoop.ts"
import { WatchHealth } from "./deposits/WatchHealth.ts"
import { Idempotency } from "./idempotency/Idempotency.ts"
import { Outbox } from "./outbox/Outbox.ts"
import { OutboxRetention } from "./outbox/OutboxRetention.ts"
import { Ledger } from "./ledger/Ledger.ts"
import { latestTransactionEventData } from "./transactions/TransactionEventData.ts"
import { TransactionEvents } from "./transactions/TransactionEvents.ts"
import { TransactionRepository } from "./transactions/TransactionRepository.ts"
import { Movements } from "./transfers/Movements.ts"
import { TransferQuotes } from "./transfers/TransferQuotes.ts"
import { Transfers } from "./transfers/Transfers.ts"
import { PasswordHasher } from "./users/PasswordHash.ts"
import { TwoFactor } from "./users/TwoFactor.ts"
import { PlatformAddresses } from "./wallets/PlatformAddresses.ts"
import { ProvisioningSupervisor } from "./wallets/ProvisioningSupervisor.ts"
import { WalletProvisioner } from "./wallets/WalletProvisioner.ts"
import { WalletRepository } from "./wallets/WalletRepository.ts"
import { WalletSwitch } from "./wallets/WalletSwitch.ts"
import { Wallets } from "./wallets/Wallets.ts"
import { DevProvisioning } from "./ops/DevProvisioning.ts"
import { OpsDevnetHandlers } from "./ops/DevnetHandlers.ts"
import { ManualDepositCredit } from "./deposits/ManualDepositCredit.ts"
import { OpsManualHandlers } from "./ops/ManualHandlers.ts"
import { OpsSwitchHandlers } from "./ops/SwitchHandlers.ts"
import { OpsPriceHandlers } from "./ops/PriceHandlers.ts"
import { OpsSweepsHandlers } from "./ops/SweepHandlers.ts"
import { OpsReservesHandlers } from "./ops/ReservesHandlers.ts"
import { OpsOpeningBalanceHandlers } from "./ops/OpeningBalanceHandlers.ts"
import { OpeningBalances } from "./ledger/OpeningBalances.ts"
import { Reserves } from "./ledger/Reserves.ts"
import { OpsApi } from "./ops/OpsApi.ts"
import {
  OpsAuthLayer,
  OpsPlatformHandlers,
  OpsSchemaErrorsLayer,
  OpsTenantsHandlers,
  OpsUsersHandlers
} from "./ops/OpsHandlers.ts"
import { OpsToken } from "./ops/OpsToken.ts"
import { Approvals } from "./ops/Approvals.ts"
import { OpsAuditHandlers } from "./ops/AuditHandlers.ts"
import { OperatorAudit } from "./ops/OperatorAudit.ts"
import { OpsMetricsHandlers } from "./observability/MetricsHandlers.ts"
import { observeRequests, RouteRecording } from "./observability/RequestObservation.ts"
import { Signer } from "./signer/Signer.ts"
import { StorageLayer } from "./StorageLayer.ts"
import { Tenants } from "./tenants/Tenants.ts"
import { Users } from "./users/Users.ts"
import { WebhooksLayer } from "./webhooks/WebhooksLayer.ts"

/** Domain services over storage, signer and entropy. */
export const DomainLayer = Layer.mergeAll(
  WebhooksLayer,
  Wallets.layer,
  Transfers.layer,
  // This process's broadcast claim grace against the other live processes' (each recorded by its ServiceInstance).
  Layer.provideMerge(ClaimGraceAgreement, Idempotency.layer),
  // Background duties, each once in the cluster (entities/ClusterDuties.ts); the watcher once per network.
  clusterDuty("provisioning-supervisor", ProvisioningSupervisor),
  clusterDuty("cluster-retention", ClusterRetention),
  clusterDuty("outbox-retention", OutboxRetention),
  clusterDuty("nonce-purge", NoncePurge),
  DepositWatcherSingletons,
  clusterDuty("withdrawal-supervisor", WithdrawalSupervisor),
  clusterDuty("sweeps", SweepLoop),
  clusterDuty("reorganized-sends", ReorganizedSendsLoop),
  ShardTakeover
).pipe(
  Layer.provideMerge(Withdrawals.layer),
  Layer.provideMerge(WithdrawalEntityLayer),
  Layer.provideMerge(WithdrawalProcessor.layer),
  // Sweeps and GAS wallets (sweeps/), on the sending pipeline.
  // Beside them the proof of reserves (ledger/Reserves.ts), which reads the ledger and the chains and moves nothing.
  Layer.provideMerge(Layer.mergeAll(Sweeps.layer, GasWallets.layer, Reserves.layer, OpeningBalances.layer)),
  // Every transaction the service sends, once (sending/): withdrawals now, sweeps next.
  Layer.provideMerge(OutgoingSends.layer),
  Layer.provideMerge(Layer.mergeAll(
    DepositWatcher.layer,
    ManualDepositCredit.layer,
    TransferQuotes.layer,
    TwoFactor.layer,
    // Movements of a payer's funds, created in statements shared by concurrent requests (transfers/Movements.ts).
    Movements.layer
  )),
  // Fee rule 3: recent network costs and the prices that convert them (catalog, operator's PUT /ops/prices).
  Layer.provideMerge(FeeFloors.layer),
  Layer.provideMerge(PriceFeed.layer),
  // The operator's switches combine with what each network's chain client can do.
  // What a wallet address shows also depends on whether a watcher follows the network (deposits/WatchHealth.ts).
  Layer.provideMerge(Layer.mergeAll(Switches.layer, WalletSwitch.layer, WatchHealth.layer)),
  Layer.provideMerge(chainClientsLayer),
  Layer.provideMerge(SimulatedChain.layer),
  Layer.provideMerge(Layer.mergeAll(WalletEntityLayer, ClusterHealth.layer)),
  Layer.provideMerge(ClusterLayer),
  // What webhook deliveries carry as `data`: TRANSACTION_* events the transaction as it is at delivery time.
  Layer.provideMerge(latestTransactionEventData),
  Layer.provideMerge(TransactionEvents.layer),
  Layer.provideMerge(Layer.mergeAll(
    Users.layer,
    ApiKeyRegistry.layer,
    NonceStore.layer,
    OpsToken.layer,
    WalletRepository.layer,
    WalletProvisioner.layer,
    PlatformAddresses.layer,
    Ledger.layer,
    TransactionRepository.layer
  )),
  // PasswordHasher: password hashes on worker threads of their own, bounded per tenant (users/PasswordHash.ts).
  Layer.provideMerge(Layer.mergeAll(Tenants.layer, ApiKeys.layer, Catalog.layer, PasswordHasher.layer)),
  Layer.provideMerge(ConfigChanges.layer),
  // Provided once, here: ids, the outbox and the transaction events are services, never passed by hand.
  Layer.provideMerge(Outbox.layer),
  Layer.provideMerge(Ids.layer)
)

/** Routes of the public listener: /v1, OpenAPI, the reference page, the disabled portal paths. */
export const PublicRoutes = Layer.mergeAll(
  HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }),
  referencePage(Api),
  DisabledPaths,
  errorBoundary(Api)
).pipe(
  Layer.provide(
    Layer.mergeAll(ReferenceHandlers, UsersHandlers, WalletsHandlers, TransactionsHandlers, WebhookInfoHandlers)
  ),
  Layer.provide(Layer.mergeAll(SignatureAuthLayer, SchemaErrorsLayer))
).pipe(
  // The webhooks group, behind the same middleware as the groups above.
  Layer.provide(WebhooksHandlers.pipe(Layer.provide(Layer.mergeAll(SignatureAuthLayer, SchemaErrorsLayer)))),
  // Each matched route's template, for the request metrics and the access line (observability/).
  Layer.provide(RouteRecording)
)

/**
 * Routes of the operator listener. Its OpenAPI document and reference page are served without the token, as /v1's
 * are: they describe the interface and hold no data, and a browser opening /ops/docs sends no bearer header.
 */
export const OpsRoutes = Layer.mergeAll(
  HttpApiBuilder.layer(OpsApi, { openapiPath: "/ops/openapi.json" }),
  referencePage(OpsApi, "/ops/docs"),
  errorBoundary(OpsApi)
).pipe(
  Layer.provide(
    Layer.mergeAll(
      OpsTenantsHandlers,
      OpsUsersHandlers,
      OpsPlatformHandlers,
      OpsManualHandlers,
      OpsSwitchHandlers,
      OpsSweepsHandlers,
      OpsDevnetHandlers,
      OpsPriceHandlers,
      OpsReservesHandlers,
      OpsOpeningBalanceHandlers,
      OpsAuditHandlers,
      OpsMetricsHandlers
    )
  ),
  Layer.provide(Layer.mergeAll(OpsAuthLayer, OpsSchemaErrorsLayer)),
  // The audit trail and the approvals queue serve only the operator interface.
  Layer.provide(Layer.mergeAll(OperatorAudit.layer, Approvals.layer)),
  // Each matched route's template, for the request metrics and the access line (observability/).
  Layer.provide(RouteRecording)
)

/** The base URL each listener actually listens on (port 0 in tests picks a free port). */
export class PublicAddress extends Context.Service<PublicAddress, string>()("coffer/PublicAddress") {}
export class OpsAddress extends Context.Service<OpsAddress, string>()("coffer/OpsAddress") {}

/**
 * A `customerRefId` may be 128 characters, up to twelve times that URL-encoded: the router's default cap of 100
 * characters per path parameter would answer such paths 404, and one that is too long for its rule gets the rule's
 * answer (422 `customerRefId must be 1-128 chars`), not a route miss.
 */
export const routerConfig = { maxParamLength: pathParamLengthMax }

const listener = <I, E, R>(
  routes: Layer.Layer<never, E, R>,
  address: Context.Key<I, string>,
  host: string,
  port: number,
  isTrustedProxy: (address: string) => boolean
) =>
  Layer.mergeAll(
    // Metrics, access line and span attributes of every request (observability/RequestObservation.ts).
    HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true, routerConfig, middleware: observeRequests }),
    Layer.effect(address, Effect.map(Effect.service(HttpServer.HttpServer), (server) => HttpServer.formatAddress(server.address)))
  ).pipe(Layer.provide(Layer.unwrap(Effect.map(Effect.service(Ids), (ids) =>
    NodeHttpServer.layer(
      () =>
        limitConnections(answerParserErrors(createServer(listenerServerOptions), () => Effect.runSync(ids.uuidV7For("request"))), isTrustedProxy),
      { host, port, gracefulShutdownTimeout: "10 seconds" }
    )))))

export const Listeners = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  const isTrustedProxy = makeIpMatcher(config.trustedProxies)
  return Layer.mergeAll(
    listener(PublicRoutes, PublicAddress, config.host, config.port, isTrustedProxy),
    listener(OpsRoutes, OpsAddress, config.opsHost, config.opsPort, isTrustedProxy)
  )
})).pipe(
  // The last line of a start: a start that stops short of it shows where in its log.
  Layer.tap((context) =>
    Effect.logInfo(`listening: the API on ${Context.get(context, PublicAddress)}, ops on ${Context.get(context, OpsAddress)}`)
  )
)

/**
 * Everything but configuration, storage, signer and entropy: what tests build over a test database. The listeners open only after
 * the database is migrated and the catalog loaded (they depend on those layers).
 */
export const ServiceLayer = Listeners.pipe(
  Layer.provideMerge(DevProvisioning.layer),
  Layer.provideMerge(DomainLayer)
)

/** The whole service over configuration and storage (StorageLayer.ts), which main.ts starts first. */
export const ServiceOnStorage = ServiceLayer.pipe(
  Layer.provideMerge(Signer.layerConfig),
  Layer.provideMerge(Entropy.layer)
)

/** The whole service on its configured (or embedded) database. */
export const AppLayer = ServiceOnStorage.pipe(Layer.provideMerge(StorageLayer))
