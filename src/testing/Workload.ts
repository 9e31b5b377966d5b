/**
 * The seeded workload (`npm run scenario -- --seed S --steps N`, docs/scenarios.md "The seeded workload"): N steps of
 * mixed operations on one scenario (users, deposit addresses, deposits, mined blocks, internal transfers, withdrawals,
 * cancels, approvals and rejections, reorganizations, a node that stops answering, failing broadcasts, a webhook
 * endpoint that fails or goes away, jumps of time), with the ledger audit and the event invariants checked after
 * every step and once more after a closing phase (faults healed, 20 blocks, an hour).
 *
 * Each step is drawn from a PRNG over the seed and what the run has seen so far (the ids and balances the service
 * answered), and the service itself is deterministic under the kit (one seed, one fingerprint), so the first k steps
 * of a run are the same steps in every run of that seed: a run of k steps is a prefix of a run of N. That is what
 * shrinking uses: a failure at step k is followed by a bisection over prefixes (each a fresh scenario, with the
 * closing phase) for the shortest one that still fails, which is then run once more to see it fail again.
 */
import { Cause, Context, Effect, Exit, Layer, type LogLevel, References } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import { LedgerFaults, type LedgerFaultsShape } from "../ledger/LedgerFaults.ts"
import { eventInvariants, ledgerAudit, ScenarioCheckFailed } from "./Checks.ts"
import { Scenario, scenarioLayer, type ScenarioShape, type ScenarioTenant } from "./Scenario.ts"
import type { ScenarioServer } from "./ScenarioDatabase.ts"
import type { WebhookReceiver } from "./WebhookReceiver.ts"

export interface WorkloadOptions {
  readonly server: ScenarioServer
  readonly seed: string
  readonly steps: number
  /** Bugs planted in the service on purpose (the planted-bug test); none unless given. */
  readonly faults?: LedgerFaultsShape
  /** The service's log level (default "None": its logs are silent). */
  readonly logLevel?: LogLevel.LogLevel
  /** Called with each step's line as it completes (progress for the command line). */
  readonly onStep?: (line: string) => void
  /** Called at the end of a run that held with the rows its fingerprint hashes (`--dump`). */
  readonly onRows?: (lines: ReadonlyArray<string>) => void
}

export interface WorkloadFailure {
  /** The step after which a check failed (1-based); `steps + 1` is the closing phase. */
  readonly step: number
  /** One line: the check and its first discrepancy, or the error. */
  readonly message: string
  /** All of it (the ledger audit's whole report). */
  readonly detail: string
}

export interface WorkloadRun {
  readonly seed: string
  readonly steps: number
  /** One line per step: what it did and what the service answered. */
  readonly log: ReadonlyArray<string>
  readonly failure: WorkloadFailure | undefined
  /** The scenario's fingerprint at the end (checks.fingerprint); undefined when a check failed. */
  readonly fingerprint: string | undefined
}

export interface ShrunkFailure {
  readonly seed: string
  /** The first run's failure, with all its steps. */
  readonly first: WorkloadRun
  /** The shortest prefix (steps) found that still fails, and its run. */
  readonly prefix: number
  readonly shrunk: WorkloadRun
  /** The shortest prefix run once more (`again`): it failed again. */
  readonly reproduced: boolean
  readonly again: WorkloadRun
  /** Runs made while shrinking (the first and the confirmation included). */
  readonly runs: number
}

/** The network and assets the workload moves: 15 confirmations, a native coin and a token with fees. */
const network = "BSC_TESTNET"
interface AssetPlan {
  readonly assetId: string
  /** Deposits are drawn from [0, depositMax); below the catalog's minimum they complete uncredited. */
  readonly depositMax: bigint
  /** The approval thresholds the workload sets now and then. */
  readonly approvalAbove: bigint
}
const assets: ReadonlyArray<AssetPlan> = [
  { assetId: "BSC_TESTNET_BNB", depositMax: 2n * 10n ** 18n, approvalAbove: 3n * 10n ** 17n },
  { assetId: "BSC_TESTNET_USDT", depositMax: 500n * 10n ** 18n, approvalAbove: 60n * 10n ** 18n }
]
const usersMax = 10

/** A deterministic stream of numbers from the seed (SHA-256 in counter mode), apart from the service's own. */
export class WorkloadRandom {
  private counter = 0
  private buffer = Buffer.alloc(0)
  private offset = 0
  private readonly seed: string
  constructor(seed: string) {
    this.seed = seed
  }
  private next32(): number {
    if (this.offset + 4 > this.buffer.length) {
      this.buffer = createHash("sha256").update(`${this.seed}:workload:${this.counter++}`).digest()
      this.offset = 0
    }
    const value = this.buffer.readUInt32BE(this.offset)
    this.offset += 4
    return value
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor((this.next32() / 2 ** 32) * n)
  }
  /** An integer in [low, high]. */
  between(low: number, high: number): number {
    return low + this.int(high - low + 1)
  }
  pick<A>(items: ReadonlyArray<A>): A {
    return items[this.int(items.length)]!
  }
  chance(p: number): boolean {
    return this.next32() / 2 ** 32 < p
  }
  /** A bigint in [0, n) (n > 0), from 64 random bits. */
  below(n: bigint): bigint {
    const bits = (BigInt(this.next32()) << 32n) | BigInt(this.next32())
    return (bits * n) >> 64n
  }
  hex(bytes: number): string {
    let out = ""
    while (out.length < bytes * 2) out += this.next32().toString(16).padStart(8, "0")
    return out.slice(0, bytes * 2)
  }
}

interface WalletRef {
  readonly label: string
  readonly id: string
  readonly user: string
  readonly address: string
}

interface MovementRef {
  readonly label: string
  readonly id: string
  readonly kind: "WITHDRAWAL" | "INTERNAL_TRANSFER"
}

/** What the run has seen: the names steps refer to and the faults in force. */
interface Model {
  readonly users: Array<string>
  readonly wallets: Array<WalletRef>
  readonly movements: Array<MovementRef>
  nodeDown: boolean
  broadcastsFail: boolean
  receiverAway: boolean
  approvalsOn: boolean
  height: number
}

class StepFailed extends Error {}

const describeCause = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  if (error instanceof ScenarioCheckFailed) return `${error.check}: ${error.message}`
  if (error instanceof Error) return error.message
  return Cause.pretty(cause)
}

/** The line a failure is known by: a ledger audit's closing line (its first discrepancy), else the first line. */
const headline = (detail: string): string => {
  const lines = detail.split("\n").filter((line) => line.trim() !== "")
  return detail.startsWith("ledger audit") ? `ledger audit: ${lines[lines.length - 1] ?? ""}` : lines[0] ?? detail
}

/** An answer of the service a workload accepts: anything but a server error, a signature refusal or a bad request. */
const accepted = (what: string, response: { readonly status: number; readonly text: string }): string => {
  if (response.status >= 500 || response.status === 401 || response.status === 400) {
    throw new StepFailed(`${what}: HTTP ${response.status} ${response.text.slice(0, 300)}`)
  }
  if (response.status < 300) return `${response.status}`
  const code = (() => {
    try {
      return JSON.parse(response.text)?.error?.code ?? ""
    } catch {
      return ""
    }
  })()
  return `${response.status} ${code}`.trim()
}

const amountText = (raw: bigint, assetId: string) => `${raw} ${assetId.replace(`${network}_`, "")}`

/**
 * One step: drawn from `random` and `model`, run on the scenario; answers its line. Every choice is made before the
 * step's first call, from what earlier steps saw, so the same seed makes the same step.
 */
const step = (
  scenario: ScenarioShape,
  tenant: ScenarioTenant,
  receiver: WebhookReceiver,
  model: Model,
  random: WorkloadRandom,
  index: number,
  /** Says what the step is about to do, before its first call (the log's line if the step itself fails). */
  say: (what: string) => void
): Effect.Effect<string> =>
  Effect.gen(function*() {
    const funded = model.wallets
    const weights: Array<[string, number]> = [
      // Two users with deposit addresses early (so money moves soon), more users now and then.
      ["user", model.users.length < 2 ? 20 : model.users.length < usersMax ? 3 : 0],
      ["address", model.users.length > model.wallets.length ? 20 : 0],
      ["deposit", funded.length > 0 ? 16 : 0],
      ["mine", model.nodeDown ? 0 : 16],
      ["transfer", funded.length > 1 ? 10 : 0],
      ["withdraw", funded.length > 0 ? 10 : 0],
      ["cancel", model.movements.some((movement) => movement.kind === "WITHDRAWAL") ? 5 : 0],
      ["decide", 5],
      ["approvals", 2],
      ["reorg", model.height > 2 && !model.nodeDown ? 3 : 0],
      // An outage is short: a node that is down comes back soon.
      ["node", model.nodeDown ? 12 : 2],
      ["broadcasts", 2],
      ["webhooks", 3],
      ["time", 8]
    ]
    const total = weights.reduce((sum, [, weight]) => sum + weight, 0)
    let roll = random.int(total)
    const kind = weights.find(([, weight]) => (roll -= weight) < 0)![0]
    switch (kind) {
      case "user": {
        const ref = `u${model.users.length + 1}`
        say(`user ${ref}`)
        const response = yield* tenant.request("POST", "/v1/users", { customerRefId: ref })
        const outcome = accepted("create user", response)
        if (response.status === 200) model.users.push(ref)
        return `user ${ref}: ${outcome}`
      }
      case "address": {
        const user = model.users.find((ref) => !model.wallets.some((wallet) => wallet.user === ref))!
        say(`deposit address of ${user}`)
        const response = yield* tenant.request("POST", `/v1/users/${user}/deposit_address`, { networkKey: network })
        const outcome = accepted("deposit address", response)
        if (response.status === 200 && response.json?.status === "READY") {
          const label = `w${model.wallets.length + 1}`
          model.wallets.push({ label, id: response.json.walletId, user, address: response.json.address })
          return `deposit address ${label} of ${user}: ${outcome}`
        }
        return `deposit address of ${user}: ${outcome} ${response.json?.status ?? ""}`.trim()
      }
      case "deposit": {
        const wallet = random.pick(funded)
        const asset = random.pick(assets)
        const amount = random.below(asset.depositMax) + 1n
        say(`deposit ${amountText(amount, asset.assetId)} to ${wallet.label}`)
        yield* scenario.chain.transfer(network, { to: wallet.address, assetId: asset.assetId, amountRaw: amount })
        return `deposit ${amountText(amount, asset.assetId)} to ${wallet.label}`
      }
      case "mine": {
        const count = random.chance(0.4) ? 15 : random.between(1, 6)
        say(`mine ${count}`)
        model.height = yield* scenario.chain.mine(network, count)
        return `mine ${count}: height ${model.height}`
      }
      case "reorg": {
        const depth = random.between(1, Math.min(model.height - 1, 18))
        say(`reorg ${depth}`)
        model.height = yield* scenario.chain.reorg(network, depth)
        return `reorg ${depth}: height ${model.height}`
      }
      case "transfer":
      case "withdraw": {
        const from = random.pick(funded)
        const asset = random.pick(assets)
        const balance = (yield* scenario.checks.balances(tenant.tenantId))
          .find((row) => row.walletId === from.id && row.assetId === asset.assetId)?.available ?? 0n
        // Mostly within the balance, sometimes beyond it (INSUFFICIENT_BALANCE) or without one.
        const amount = balance > 0n && random.chance(0.85)
          ? random.below(balance) + 1n
          : random.below(asset.depositMax) + 1n
        const externalTxId = `workload-${index}`
        const label = `${kind === "transfer" ? "t" : "x"}${model.movements.length + 1}`
        if (kind === "transfer") {
          const to = random.pick(funded.filter((wallet) => wallet !== from))
          const byUser = random.chance(0.5)
          const what = `transfer ${amountText(amount, asset.assetId)} ${from.label} -> ${byUser ? to.user : to.label}`
          say(what)
          const response = yield* tenant.request("POST", "/v1/transactions", {
            assetId: asset.assetId,
            source: { type: "WALLET", id: from.id },
            destination: byUser ? { type: "END_USER", customerRefId: to.user } : { type: "WALLET", id: to.id },
            amountRaw: amount.toString(),
            externalTxId
          })
          const outcome = accepted("internal transfer", response)
          if (response.status === 202) model.movements.push({ label, id: response.json.transactionId, kind: "INTERNAL_TRANSFER" })
          return `${what}: ${outcome}${response.status === 202 ? ` ${response.json.status} as ${label}` : ""}`
        }
        const address = `0x${random.hex(20)}`
        const what = `withdraw ${amountText(amount, asset.assetId)} from ${from.label}`
        say(what)
        const response = yield* tenant.request("POST", "/v1/transactions", {
          assetId: asset.assetId,
          source: { type: "WALLET", id: from.id },
          destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address } },
          amountRaw: amount.toString(),
          externalTxId
        })
        const outcome = accepted("withdrawal", response)
        if (response.status === 202) model.movements.push({ label, id: response.json.transactionId, kind: "WITHDRAWAL" })
        return `${what}: ${outcome}${response.status === 202 ? ` ${response.json.status} as ${label}` : ""}`
      }
      case "cancel": {
        const target = random.pick(model.movements.filter((movement) => movement.kind === "WITHDRAWAL"))
        say(`cancel ${target.label}`)
        const response = yield* tenant.request("POST", `/v1/transactions/${target.id}/cancel`)
        return `cancel ${target.label}: ${accepted("cancel", response)}`
      }
      case "decide": {
        say("decide")
        const waiting = yield* Effect.orDie(scenario.operator.manual.approvals({ query: { tenantId: tenant.tenantId } }))
        const decidable = waiting.items.filter((item) => item.kind !== "DEPOSIT")
        if (decidable.length === 0) return "decide: nothing waits"
        const item = random.pick(decidable)
        const approve = random.chance(0.6)
        const label = model.movements.find((movement) => movement.id === item.transaction.id)?.label ?? item.transaction.id
        const what = `${approve ? "approve" : "reject"} ${label}`
        say(what)
        const params = { params: { tenantId: tenant.tenantId, id: item.transaction.id } }
        const decided = yield* Effect.exit(approve ? scenario.operator.manual.approve(params) : scenario.operator.manual.reject(params))
        if (Exit.isSuccess(decided)) return `${what}: ${decided.value.status}`
        const error = Cause.squash(decided.cause) as { readonly _tag?: string }
        if (error?._tag === "InvalidState" || error?._tag === "WalletNotActive") return `${what}: ${error._tag}`
        throw new StepFailed(`${what}: ${describeCause(decided.cause)}`)
      }
      case "approvals": {
        model.approvalsOn = !model.approvalsOn
        say(`approval thresholds ${model.approvalsOn ? "on" : "off"}`)
        const thresholds = Object.fromEntries(assets.map((asset) => [asset.assetId, asset.approvalAbove.toString()]))
        const settings = model.approvalsOn
          ? { withdrawalApprovalAbove: thresholds, transferApprovalAbove: thresholds }
          : { withdrawalApprovalAbove: {}, transferApprovalAbove: {} }
        yield* Effect.orDie(scenario.operator.tenants.update({ params: { tenantId: tenant.tenantId }, payload: { settings } }))
        return `approval thresholds ${model.approvalsOn ? "on" : "off"}`
      }
      case "node": {
        model.nodeDown = !model.nodeDown
        say(`node ${model.nodeDown ? "down" : "up"}`)
        yield* scenario.chain.nodeDown(network, model.nodeDown)
        return `node ${model.nodeDown ? "down" : "up"}`
      }
      case "broadcasts": {
        model.broadcastsFail = !model.broadcastsFail
        say(`broadcasts ${model.broadcastsFail ? "fail" : "succeed"}`)
        yield* scenario.chain.failBroadcasts(network, model.broadcastsFail)
        return `broadcasts ${model.broadcastsFail ? "fail" : "succeed"}`
      }
      case "webhooks": {
        if (model.receiverAway) {
          model.receiverAway = false
          say("webhook endpoint back")
          yield* receiver.comeBack
          return "webhook endpoint back"
        }
        if (random.chance(0.3)) {
          model.receiverAway = true
          say("webhook endpoint gone")
          yield* receiver.goAway
          return "webhook endpoint gone"
        }
        const count = random.between(1, 6)
        receiver.failNext(count, random.pick([500, 503, 404]))
        return `webhook endpoint fails the next ${count}`
      }
      case "time": {
        const seconds = random.pick([1, 10, 60, 300, 1800, 3600])
        say(`advance ${seconds} s`)
        yield* scenario.advance(`${seconds} seconds`)
        return `advance ${seconds} s`
      }
    }
    return yield* Effect.die(new Error(`unknown step ${kind}`))
  })

/** The closing phase: every fault healed, the chain mined past the confirmations, an hour of time. */
const closing = (scenario: ScenarioShape, receiver: WebhookReceiver, model: Model) =>
  Effect.gen(function*() {
    if (model.nodeDown) yield* scenario.chain.nodeDown(network, false)
    if (model.broadcastsFail) yield* scenario.chain.failBroadcasts(network, false)
    if (model.receiverAway) yield* receiver.comeBack
    yield* scenario.chain.mine(network, 20)
    yield* scenario.advance("1 hour")
  })

/**
 * The ledger audit and the event invariants on the scenario's database; skipped when no row of the
 * service's tables changed since the last time they held (the kit's change counter, ScenarioDatabase.ts): they would
 * read the same rows again.
 */
const makeChecks = (scenario: ScenarioShape) => {
  const sql = Context.get(scenario.services as Context.Context<SqlClient.SqlClient>, SqlClient.SqlClient)
  const changes = Effect.map(
    sql<{ changes: string }>`SELECT last_value::text || ':' || is_called::text AS changes FROM scenario_changes`.pipe(Effect.orDie),
    (rows) => rows[0]?.changes ?? ""
  )
  let checked: string | undefined
  // No settle of its own: every call of the kit a step makes ends with one, and a step that makes none (the
  // receiver told to fail) starts nothing in the service.
  return Effect.gen(function*() {
    const now = yield* changes
    if (now === checked) return
    yield* ledgerAudit(sql)
    yield* eventInvariants(sql)
    checked = now
  })
}

/** A step's line prefixed with its number. */
const numbered = (index: number, line: string) => `${String(index).padStart(4)}. ${line.replace(/\s+/g, " ")}`

/**
 * One run of `steps` steps of the workload on a fresh scenario of `seed`, checks after each step and after the closing
 * phase. Never fails: a check that fails, a server error, or a defect of the kit is the run's `failure`.
 */
export const runWorkload = (options: WorkloadOptions): Effect.Effect<WorkloadRun> => {
  const log: Array<string> = []
  let current = 0
  const program = Effect.gen(function*() {
    const scenario = yield* Scenario
    const random = new WorkloadRandom(options.seed)
    const tenant = yield* scenario.newTenant({ name: "workload", networks: [network] })
    yield* Effect.orDie(scenario.operator.tenants.update({
      params: { tenantId: tenant.tenantId },
      payload: { settings: { walletCreationsPer24h: 1_000 } }
    }))
    const checks = makeChecks(scenario)
    const receiver = yield* scenario.webhookReceiver
    const endpoint = yield* tenant.request("POST", "/v1/webhooks", { url: receiver.url })
    accepted("webhook endpoint", endpoint)
    const model: Model = {
      users: [],
      wallets: [],
      movements: [],
      nodeDown: false,
      broadcastsFail: false,
      receiverAway: false,
      approvalsOn: false,
      height: 0
    }
    for (let index = 1; index <= options.steps; index++) {
      current = index
      // Until the step answers, its line is what it set out to do: a step that fails is listed too.
      log.push(numbered(index, "(a step that failed before it said what it was)"))
      const say = (what: string) => {
        log[index - 1] = numbered(index, `${what}: did not complete`)
      }
      const line = numbered(index, yield* step(scenario, tenant, receiver, model, random, index, say))
      log[index - 1] = line
      yield* checks
      options.onStep?.(line)
    }
    current = options.steps + 1
    yield* closing(scenario, receiver, model)
    yield* checks
    if (options.onRows !== undefined) options.onRows(yield* scenario.checks.fingerprintLines)
    return yield* scenario.checks.fingerprint
  })
  const layer = scenarioLayer({ server: options.server, seed: options.seed }).pipe(
    Layer.provide(Layer.mergeAll(
      Layer.succeed(LedgerFaults)(options.faults ?? { dropEntryKinds: [] }),
      // The service's request and error logs would drown the workload's own lines; failures are reported by it.
      Layer.succeed(References.MinimumLogLevel)(options.logLevel ?? "None")
    ))
  )
  return Effect.map(Effect.exit(Effect.provide(program, layer)), (exit): WorkloadRun =>
    Exit.isSuccess(exit)
      ? { seed: options.seed, steps: options.steps, log, failure: undefined, fingerprint: exit.value }
      : {
        seed: options.seed,
        steps: options.steps,
        log,
        failure: (() => {
          const detail = describeCause(exit.cause)
          return { step: Math.max(current, 1), message: headline(detail), detail }
        })(),
        fingerprint: undefined
      })
}

/**
 * Runs the workload; on a failure, bisects the prefixes 1..k (k the failing step, each a fresh run of that many steps
 * with the closing phase) for the shortest that still fails, and runs that one again. A prefix counts as failing when
 * its run fails anywhere, its closing phase included: a withdrawal submitted at step 3 that goes wrong only later
 * shrinks to 3 steps.
 */
export const findFailure = (
  options: WorkloadOptions & { readonly onShrink?: (prefix: number, failed: boolean) => void }
): Effect.Effect<WorkloadRun | ShrunkFailure> =>
  Effect.gen(function*() {
    const first = yield* runWorkload(options)
    if (first.failure === undefined) return first
    let runs = 1
    let failing = Math.min(first.failure.step, options.steps)
    let shrunk: WorkloadRun = first
    let low = 0 // the longest prefix known to hold (0: nothing run)
    const { onRows: _onRows, onStep: _onStep, ...quiet } = options
    while (failing - low > 1) {
      const middle = Math.floor((low + failing) / 2)
      const run = yield* runWorkload({ ...quiet, steps: middle })
      runs++
      options.onShrink?.(middle, run.failure !== undefined)
      if (run.failure !== undefined) {
        failing = middle
        shrunk = run
      } else {
        low = middle
      }
    }
    if (shrunk === first && failing < first.steps) {
      shrunk = yield* runWorkload({ ...quiet, steps: failing })
      runs++
    }
    const again = yield* runWorkload({ ...quiet, steps: failing })
    runs++
    return { seed: options.seed, first, prefix: failing, shrunk, reproduced: again.failure !== undefined, again, runs }
  })

export const isShrunkFailure = (result: WorkloadRun | ShrunkFailure): result is ShrunkFailure => "prefix" in result
