/**
 * A scenario: the whole service (both HTTP listeners on port 0, a fresh PostgreSQL database copied from a template,
 * the real entities and background loops) on a virtual clock, with ids and randomness drawn from a seed; and what a
 * tester drives it with: a signed tenant client, the operator client, the simulated chain's controls, webhook
 * receivers, virtual time, and checks. docs/scenarios.md describes every call.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Duration, Effect, Fiber, Layer, Option, Redacted, Scheduler, Scope } from "effect"
import { FetchHttpClient, HttpClient } from "effect/http"
import { createHash, createPrivateKey, createPublicKey, type KeyObject } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { OpsAddress, PublicAddress, ServiceLayer } from "../App.ts"
import { rawPublicKeyHex } from "../auth/Ed25519.ts"
import type { TransactionState } from "../chains/ChainClient.ts"
import { SimulatedChain, type SimulatedChainState } from "../chains/simulated/SimulatedChain.ts"
import { makeOpsClient } from "../client/OpsClient.ts"
import { signRequest } from "../client/RequestSigner.ts"
import { makeTenantClient } from "../client/TenantClient.ts"
import { AppConfig, type AppConfigShape } from "../Config.ts"
import * as Database from "../db/Database.ts"
import { poolUseOf, type PoolUse } from "../db/MeteredPgClient.ts"
import { Entropy } from "../domain/Entropy.ts"
import { Signer } from "../signer/Signer.ts"
import {
  type Balance,
  balances,
  type EventInvariantReport,
  eventInvariants,
  fingerprint,
  fingerprintLines,
  ledgerAudit
} from "./Checks.ts"
import { cloneDatabase, type ScenarioServer } from "./ScenarioDatabase.ts"
import { type AdvanceOptions, makeVirtualClock, type VirtualClock } from "./VirtualClock.ts"
import { makeWebhookReceiver, outgoingHttp, type WebhookReceiver } from "./WebhookReceiver.ts"

/** The BIP-39 test mnemonic (never holds real funds): the signer of every scenario unless one is given. */
export const scenarioMnemonic =
  "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
export const scenarioOpsToken = "scenario-ops-token"
/** 2026-10-05T00:00:00Z: where a scenario's clock starts unless told. */
export const scenarioStartMillis = Date.UTC(2026, 9, 5)

export interface ScenarioOptions {
  /** Where databases are copied from: `inject("pgAdminUrl")`/`inject("pgTemplate")` in vitest, or `embeddedServer`. */
  readonly server: ScenarioServer
  /** Ids, keys, block hashes and nonces are drawn from it: the same seed, the same run. */
  readonly seed: string
  readonly startMillis?: number
  /** Configuration over the scenario's defaults (preproduction, simulated chains, port 0), e.g. `chainRpcUrls`. */
  readonly config?: Partial<AppConfigShape>
  /** The signer; an HD signer over `scenarioMnemonic` unless given. */
  readonly signer?: Layer.Layer<Signer>
}

export interface ScenarioTenant {
  readonly tenantId: string
  readonly keyId: string
  readonly publicKeyHex: string
  /** The typed /v1 client, signing every request at the scenario's time; each call waits for the service to settle. */
  readonly client: Effect.Success<ReturnType<typeof makeTenantClient>>
  /** A raw signed request (for what the typed client cannot express); the body is sent as given. */
  readonly request: (method: string, target: string, body?: unknown, headers?: Record<string, string>) => Effect.Effect<RawResponse>
}

export interface RawResponse {
  readonly status: number
  readonly text: string
  readonly json: any
}

export interface ChainControls {
  /** Mines `count` blocks; the watcher scans them and withdrawals are followed before this returns. */
  readonly mine: (networkKey: string, count?: number) => Effect.Effect<number>
  /** Drops the last `depth` blocks and their transactions, then scans. */
  readonly reorg: (networkKey: string, depth: number) => Effect.Effect<number>
  /** An outside transfer into `to` (a deposit once mined). Returns its hash. */
  readonly transfer: (networkKey: string, transfer: { readonly to: string; readonly assetId: string; readonly amountRaw: bigint }) => Effect.Effect<string>
  /** Keeps `txHash` out of the next `blocks` blocks mined. */
  readonly hold: (networkKey: string, txHash: string, blocks: number) => Effect.Effect<void>
  /** New broadcasts are rejected while `fail` is true. */
  readonly failBroadcasts: (networkKey: string, fail: boolean) => Effect.Effect<void>
  /** The network fee (base unit of the native coin) the next withdrawals are quoted and signed with. */
  readonly setNetworkFee: (networkKey: string, feeRaw: bigint) => Effect.Effect<void>
  /** The node stops answering (`true`) and answers again (`false`). */
  readonly nodeDown: (networkKey: string, down: boolean) => Effect.Effect<void>
  readonly state: (networkKey: string) => Effect.Effect<SimulatedChainState>
  /** Where the chain has a transaction: `INCLUDED` in a block, `PENDING` in the mempool, `UNKNOWN` (dropped, displaced). */
  readonly transactionState: (networkKey: string, txHash: string) => Effect.Effect<TransactionState>
}

export interface ScenarioShape {
  readonly seed: string
  readonly publicUrl: string
  readonly opsUrl: string
  /** Virtual milliseconds now. */
  readonly now: () => number
  readonly clock: VirtualClock
  /** Moves virtual time on by `duration`; every duty that falls due runs at its instant, in order. */
  readonly advance: (duration: Duration.Input, options?: AdvanceOptions) => Effect.Effect<void>
  /** Moves virtual time on until no timer is pending (at most `max`, 30 days by default); returns the time moved. */
  readonly untilIdle: (max?: Duration.Input) => Effect.Effect<number>
  /** Waits (in real time) until what the last call started has finished. Every kit call does this itself. */
  readonly settle: Effect.Effect<void>
  /** The operator client; each call waits for the service to settle. */
  readonly operator: Effect.Success<ReturnType<typeof makeOpsClient>>
  /** A tenant made through the operator interface, with an API key whose key pair comes from the seed. */
  readonly newTenant: (options?: { readonly name?: string; readonly networks?: ReadonlyArray<string> }) => Effect.Effect<ScenarioTenant>
  readonly chain: ChainControls
  /** A webhook endpoint that records deliveries (register its `url` with the tenant's client). */
  readonly webhookReceiver: Effect.Effect<WebhookReceiver>
  readonly checks: {
    readonly ledgerAudit: Effect.Effect<void>
    readonly eventInvariants: Effect.Effect<EventInvariantReport>
    readonly balances: (tenantId: string) => Effect.Effect<ReadonlyArray<Balance>>
    /** SHA-256 (hex) over the outbox events, the transactions and the ledger. */
    readonly fingerprint: Effect.Effect<string>
    /** The rows the fingerprint hashes, one line each: diff two runs' lines to see where they part. */
    readonly fingerprintLines: Effect.Effect<ReadonlyArray<string>>
  }
  /** The running service's context, for a maintainer's scenario that needs a service directly. */
  readonly services: Context.Context<any>
}

export class Scenario extends Context.Service<Scenario, ScenarioShape>()("coffer/testing/Scenario") {}

const realDelay = (millis: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))

/** Ed25519 private key from a 32-byte seed (PKCS#8 DER prefix of RFC 8410). */
const ed25519FromSeed = (seed: Uint8Array): KeyObject =>
  createPrivateKey({
    key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from(seed)]),
    format: "der",
    type: "pkcs8"
  })

const toRaw = async (response: Response): Promise<RawResponse> => {
  const text = await response.text()
  let json: unknown = undefined
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, text, json }
}

/** Every method of a typed client's groups, run at the scenario's time and followed by a settle. */
const instrument = <C extends object>(client: C, around: <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>): C =>
  new Proxy(client, {
    get(target, group, receiver) {
      const value = Reflect.get(target, group, receiver)
      if (value === null || typeof value !== "object") return value
      return new Proxy(value, {
        get(groupTarget, method, groupReceiver) {
          const endpoint = Reflect.get(groupTarget, method, groupReceiver)
          return typeof endpoint === "function"
            ? (...args: Array<unknown>) => around(endpoint.apply(groupTarget, args))
            : endpoint
        }
      })
    }
  })

/** The virtual time one call may wait for the service before the kit gives up. */
const callVirtualMillisMax = 10 * 60_000

/** The time a settle may take before the kit gives up: a service that never goes quiet is a bug to see. */
const settleTimeoutMillis = 60_000
/** A settle's samples in a row with nothing in flight, and the real time between two. */
const settleSamples = 5
const settleSampleMillis = 2

/**
 * Effect's own scheduler with the tasks it has queued and not yet run counted: a fiber that has work to do (a
 * statement's answer to go on with, a step after a yield) shows here, and the settle waits for it.
 */
const countingScheduler = () => {
  let pending = 0
  const scheduler = new Scheduler.MixedScheduler("async", (task) => {
    pending++
    let done = false
    const handle = setImmediate(() => {
      done = true
      pending--
      task()
    })
    return () => {
      if (done) return
      done = true
      pending--
      clearImmediate(handle)
    }
  })
  return Object.assign(scheduler, { pending: () => pending })
}

export const scenarioLayer = (options: ScenarioOptions): Layer.Layer<Scenario> =>
  Layer.effectContext(Effect.gen(function*() {
    const phaseStarted = performance.now()
    const phase = (name: string) => {
      if (process.env.COFFER_SCENARIO_DEBUG === "1") console.error(`scenario ${name} at ${(performance.now() - phaseStarted).toFixed(0)} ms`)
    }
    const database = yield* cloneDatabase(options.server)
    phase("database copied")
    const receivers: Array<WebhookReceiver> = []
    const scheduler = countingScheduler()
    // The service's pool, read once it is built: its statements and transactions are counted in this process.
    let pool: PoolUse | undefined
    /**
     * What the service has in flight, all counted in this process: fibers with work scheduled, statements sent and
     * not answered, transactions open, checkouts waiting for a session, outgoing HTTP requests (less those a
     * receiver holds on purpose). The server's own view (`pg_stat_activity`) was used before: under load a
     * statement written to the socket that its backend had not read yet showed as idle, time moved on under it, and
     * a timeout of the cluster's (a shard release's 1.5 s) fired in virtual time while its statement ran; the run
     * then went another way (docs/scenarios.md, "Determinism").
     */
    const inFlightParts = () => {
      const held = receivers.reduce((sum, receiver) => sum + receiver.held(), 0)
      return {
        fibers: scheduler.pending(),
        statements: pool?.statements ?? 0,
        transactions: pool?.transactions ?? 0,
        checkouts: pool?.waiting ?? 0,
        http: Math.max(0, outgoingHttp() - held)
      }
    }
    const inFlight = () => {
      const parts = inFlightParts()
      return parts.fibers + parts.statements + parts.transactions + parts.checkouts + parts.http
    }
    const settle = Effect.gen(function*() {
      let quiet = 0
      const started = performance.now()
      // Samples in a row with nothing in flight: work that is neither a fiber's step, a statement nor an HTTP request
      // (a message on the cluster's own socket) gets that long to show itself.
      while (quiet < settleSamples) {
        yield* realDelay(settleSampleMillis)
        quiet = inFlight() === 0 ? quiet + 1 : 0
        if (performance.now() - started > settleTimeoutMillis) {
          return yield* Effect.die(
            new Error(`the service did not settle within ${settleTimeoutMillis} ms: ${JSON.stringify(inFlightParts())} in flight`)
          )
        }
      }
    })
    const virtual = makeVirtualClock({
      startMillis: options.startMillis ?? scenarioStartMillis,
      settle,
      changes: database.changes,
      nextDue: database.nextDue
    })
    const atScenarioTime = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.provideService(effect, Clock.Clock, virtual.clock)
    /**
     * A call of the kit: at the scenario's time, followed by a settle. While the call waits on the service (a
     * deposit address waits for its wallet, polling every 100 ms), virtual time moves on in steps of 100 ms once the
     * service is quiet, as it would for a real client; at most `callVirtualMillisMax`.
     */
    const around = <A, E>(effect: Effect.Effect<A, E>) =>
      atScenarioTime(Effect.gen(function*() {
        let done = false
        const fiber = yield* Effect.forkChild(Effect.ensuring(effect, Effect.sync(() => {
          done = true
        })))
        const started = virtual.nowMillis()
        const sinceSeq = virtual.nextSeq()
        let idleRounds = 0
        while (!done) {
          yield* realDelay(2)
          if (done) break
          yield* settle
          if (done) break
          if (virtual.nowMillis() - started > callVirtualMillisMax) {
            return yield* Effect.die(new Error(`a call waited more than ${callVirtualMillisMax} ms of virtual time`))
          }
          // Time moves only to a timer the call's own work set, once the service is quiet: the same on every run.
          if (yield* virtual.wakeNext(sinceSeq)) {
            idleRounds = 0
          } else if (++idleRounds >= 50) {
            // Quiet, no timer of its own, still waiting: something polled must move it.
            yield* virtual.wakeNext(0, true)
            idleRounds = 0
          }
        }
        const result = yield* Fiber.join(fiber)
        yield* settle
        return result
      }))

    const dataDir = mkdtempSync(join(tmpdir(), "coffer-scenario-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true })))

    const service = ServiceLayer.pipe(
      Layer.provideMerge(options.signer ?? Signer.layerLocalHd(Redacted.make(scenarioMnemonic))),
      Layer.provideMerge(Entropy.layerSeeded(options.seed)),
      // No pool timer may expire in a jump of virtual time while a connection is being made (Database.PoolTimings).
      Layer.provideMerge(Database.layerFromUrl(Redacted.make(database.url), {
        connectTimeout: "3650 days",
        idleTimeout: "3650 days",
        connectionTTL: "3650 days"
      })),
      Layer.provideMerge(AppConfig.layerTest({
        dataDir,
        opsToken: Option.some(Redacted.make(scenarioOpsToken)),
        serviceEnv: "preproduction",
        ...options.config
      })),
      Layer.provideMerge(FetchHttpClient.layer),
      Layer.provide(Layer.succeed(Clock.Clock)(virtual.clock)),
      Layer.provide(Layer.succeed(Scheduler.Scheduler)(scheduler)),
      Layer.orDie
    )
    const services = yield* Layer.build(service)
    pool = poolUseOf(Context.get(services, PgClient.PgClient))
    if (pool === undefined) return yield* Effect.die(new Error("the service's PostgreSQL client does not count its statements"))
    phase("service built")
    // Tables made at start (the cluster's) are watched too.
    yield* database.watchTables
    yield* settle
    phase("settled")

    const publicUrl = Context.get(services, PublicAddress)
    const opsUrl = Context.get(services, OpsAddress)
    const httpClient = Context.get(services, HttpClient.HttpClient)
    const simulated = Context.get(services, SimulatedChain)
    const withHttp = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) =>
      Effect.provideService(effect, HttpClient.HttpClient, httpClient)

    const operator = instrument(
      yield* withHttp(makeOpsClient({ baseUrl: opsUrl, token: Redacted.make(scenarioOpsToken) })),
      around
    )

    /** Deterministic material for the kit itself: SHA-256 of the seed and a label. */
    const seeded = (label: string) => createHash("sha256").update(`${options.seed}:kit:${label}`).digest()
    let tenantCount = 0
    let nonceCount = 0
    const nextNonce = () => `${seeded(`nonce:${nonceCount++}`).toString("hex").slice(0, 32)}`

    const newTenant = (tenantOptions: { readonly name?: string; readonly networks?: ReadonlyArray<string> } = {}) =>
      Effect.gen(function*() {
        const index = tenantCount++
        const tenant = yield* operator.tenants.create({
          payload: {
            name: tenantOptions.name ?? `tenant ${index + 1}`,
            ...(tenantOptions.networks ? { networks: tenantOptions.networks } : {})
          }
        })
        const privateKey = ed25519FromSeed(seeded(`tenant-key:${index}`))
        const publicKeyHex = rawPublicKeyHex(createPublicKey(privateKey))
        const key = yield* operator.tenants.createApiKey({
          params: { tenantId: tenant.id },
          payload: { name: "scenario key", publicKey: publicKeyHex, rateLimitPerSecond: 1_000 }
        })
        const client = instrument(
          yield* withHttp(makeTenantClient({ baseUrl: publicUrl, keyId: key.keyId, privateKey, nonce: nextNonce })),
          around
        )
        const request = (method: string, target: string, body?: unknown, headers: Record<string, string> = {}) =>
          around(Effect.promise(() => {
            const text = body === undefined ? "" : typeof body === "string" ? body : JSON.stringify(body)
            const signed = signRequest({
              keyId: key.keyId,
              privateKey,
              target,
              body: text,
              nowSeconds: Math.floor(virtual.nowMillis() / 1000),
              nonce: nextNonce()
            })
            return fetch(`${publicUrl}${target}`, {
              method,
              headers: { ...(text.length > 0 ? { "content-type": "application/json" } : {}), ...signed, ...headers },
              ...(method === "GET" || method === "HEAD" ? {} : { body: text.length > 0 ? text : null })
            }).then(toRaw)
          }))
        return { tenantId: tenant.id, keyId: key.keyId, publicKeyHex, client, request } satisfies ScenarioTenant
      }).pipe(Effect.orDie)

    const chain: ChainControls = {
      mine: (networkKey, count = 1) =>
        Effect.map(Effect.orDie(operator.devnet.mine({ params: { networkKey }, payload: { count } })), (r) => r.height),
      reorg: (networkKey, depth) =>
        Effect.map(Effect.orDie(operator.devnet.reorg({ params: { networkKey }, payload: { depth } })), (r) => r.height),
      transfer: (networkKey, transfer) =>
        Effect.map(
          Effect.orDie(operator.devnet.transfer({
            params: { networkKey },
            payload: { to: transfer.to, assetId: transfer.assetId, amountRaw: transfer.amountRaw }
          })),
          (r) => r.txHash
        ),
      hold: (networkKey, txHash, blocks) => around(simulated.hold(networkKey, txHash, blocks)),
      failBroadcasts: (networkKey, fail) =>
        Effect.asVoid(Effect.orDie(operator.devnet.configure({ params: { networkKey }, payload: { broadcastFails: fail } }))),
      setNetworkFee: (networkKey, feeRaw) =>
        Effect.asVoid(Effect.orDie(operator.devnet.configure({ params: { networkKey }, payload: { networkFeeRaw: feeRaw } }))),
      nodeDown: (networkKey, down) => around(simulated.setNodeDown(networkKey, down)),
      state: (networkKey) => around(simulated.state(networkKey)),
      transactionState: (networkKey, txHash) => around(Effect.orDie(simulated.client(networkKey).transactionState(txHash)))
    }

    const scope = yield* Effect.scope
    const webhookReceiver = Effect.gen(function*() {
      const receiver = yield* makeWebhookReceiver(virtual.clock).pipe(Scope.provide(scope))
      receivers.push(receiver)
      return receiver
    })

    const scenario: ScenarioShape = {
      seed: options.seed,
      publicUrl,
      opsUrl,
      now: virtual.nowMillis,
      clock: virtual,
      advance: virtual.advance,
      untilIdle: virtual.untilIdle,
      settle,
      operator,
      newTenant,
      chain,
      webhookReceiver,
      checks: {
        ledgerAudit: Effect.andThen(settle, ledgerAudit(database.sql)),
        eventInvariants: Effect.andThen(settle, eventInvariants(database.sql)),
        balances: (tenantId) => Effect.andThen(settle, balances(database.sql, tenantId)),
        fingerprint: Effect.andThen(settle, fingerprint(database.sql)),
        fingerprintLines: Effect.andThen(settle, fingerprintLines(database.sql))
      },
      services
    }
    // The test body runs on the scenario's clock too, so what it signs or reads carries the scenario's time.
    return Context.make(Scenario, scenario).pipe(Context.add(Clock.Clock, virtual.clock))
  }))
