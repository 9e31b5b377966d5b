/**
 * scrypt off libuv's thread pool: a worker thread of its own, fed from one bounded queue per tenant, taken in turn.
 *
 * Why (issue 36): the service runs with one libuv thread (main.ts), and every signed request's Ed25519 verify runs
 * there. node:crypto's callback `scrypt` ran there too: a password hash holds that thread about 170 ms, so one
 * tenant creating users with passwords within its own rate cap delayed every other tenant's signature check by
 * seconds. A worker thread is scheduled by the operating system beside the event loop and the libuv thread; it takes
 * CPU time, but nothing queues behind it except other password hashes.
 *
 * Fairness between tenants: each tenant has its own queue, and a free worker takes the next job from the next
 * tenant in turn, so a tenant with a full queue delays another tenant's hash by at most one hash per waiting
 * tenant, not by its whole queue. Bounds: a tenant may have `perTenantMax` hashes waiting or running; the whole
 * pool `totalMax`. Beyond either the job is refused at once ("full"); the caller answers 429 RATE_LIMITED.
 * Sizing and the figures behind it: docs/operations.md, "Password hashing".
 *
 * The worker's code is a string evaluated by node:worker_threads (CommonJS, node: modules only): no file to find at
 * run time, so the bundle (src/Bundle.ts) carries it as it carries the rest of the service. Workers start at the
 * first hash (a start should not pay for them) and are unreferenced, so an idle pool never holds the process open.
 */
import { Worker } from "node:worker_threads"

const workerSource = `
const { parentPort } = require("node:worker_threads")
const { scryptSync } = require("node:crypto")
parentPort.on("message", (job) => {
  try {
    const key = scryptSync(job.password, Buffer.from(job.salt), job.keyLength, { N: job.n, r: job.r, p: job.p, maxmem: job.maxmem })
    parentPort.postMessage({ id: job.id, key })
  } catch (error) {
    parentPort.postMessage({ id: job.id, error: String((error && error.message) || error) })
  }
})
`

export interface ScryptParameters {
  readonly password: string
  readonly salt: Uint8Array
  readonly keyLength: number
  readonly n: number
  readonly r: number
  readonly p: number
  readonly maxmem: number
}

export interface ScryptPoolOptions {
  /** Worker threads: each runs one hash at a time. */
  readonly workers: number
  /** Hashes one tenant may have waiting or running; more are refused. */
  readonly perTenantMax: number
  /** Hashes the whole pool may have waiting or running; more are refused. */
  readonly totalMax: number
}

interface Job {
  readonly id: number
  readonly tenantId: string
  readonly parameters: ScryptParameters
  readonly done: (result: { readonly key: Buffer } | { readonly error: Error }) => void
}

interface Slot {
  readonly worker: Worker
  running: Job | undefined
}

export interface ScryptPool {
  /**
   * Queues one hash for the tenant: "full" at once when a bound is reached; otherwise `done` is called once with the
   * key or the error, unless the returned cancel runs first (a job that has started then finishes unseen).
   */
  readonly submit: (
    tenantId: string,
    parameters: ScryptParameters,
    done: (result: { readonly key: Buffer } | { readonly error: Error }) => void
  ) => "full" | (() => void)
  /** Hashes waiting or running, for tests and metrics. */
  readonly pending: () => number
  readonly close: () => Promise<void>
}

export const makeScryptPool = (options: ScryptPoolOptions): ScryptPool => {
  const queues = new Map<string, Array<Job>>()
  /** Tenants with jobs waiting, in the order they get the next free worker. */
  const turn: Array<string> = []
  const perTenant = new Map<string, number>()
  const slots: Array<Slot> = []
  let total = 0
  let nextId = 0
  let closed = false

  const release = (job: Job) => {
    total--
    const count = (perTenant.get(job.tenantId) ?? 1) - 1
    if (count === 0) perTenant.delete(job.tenantId)
    else perTenant.set(job.tenantId, count)
  }

  const startWorker = (): Slot => {
    const worker = new Worker(workerSource, { eval: true })
    worker.unref()
    const slot: Slot = { worker, running: undefined }
    worker.on("message", (message: { id: number; key?: Uint8Array; error?: string }) => {
      const job = slot.running
      if (job === undefined || job.id !== message.id) return
      slot.running = undefined
      release(job)
      job.done(message.key !== undefined ? { key: Buffer.from(message.key) } : { error: new Error(message.error) })
      dispatch()
    })
    // A worker that dies fails its job and is replaced at the next dispatch.
    const lost = (error: Error) => {
      const index = slots.indexOf(slot)
      if (index >= 0) slots.splice(index, 1)
      const job = slot.running
      slot.running = undefined
      if (job !== undefined) {
        release(job)
        job.done({ error })
      }
      if (!closed) dispatch()
    }
    worker.on("error", lost)
    worker.on("exit", (code) => lost(new Error(`scrypt worker exited with code ${code}`)))
    slots.push(slot)
    return slot
  }

  const nextJob = (): Job | undefined => {
    while (turn.length > 0) {
      const tenantId = turn.shift()!
      const queue = queues.get(tenantId)
      const job = queue?.shift()
      if (queue !== undefined && queue.length > 0) turn.push(tenantId)
      else queues.delete(tenantId)
      if (job !== undefined) return job
    }
    return undefined
  }

  const dispatch = () => {
    while (!closed && turn.length > 0) {
      const slot = slots.find((candidate) => candidate.running === undefined) ??
        (slots.length < options.workers ? startWorker() : undefined)
      if (slot === undefined) return
      const job = nextJob()
      if (job === undefined) return
      slot.running = job
      const { password, salt, keyLength, n, r, p, maxmem } = job.parameters
      slot.worker.postMessage({ id: job.id, password, salt, keyLength, n, r, p, maxmem })
    }
  }

  const submit: ScryptPool["submit"] = (tenantId, parameters, done) => {
    if (closed || total >= options.totalMax || (perTenant.get(tenantId) ?? 0) >= options.perTenantMax) return "full"
    const job: Job = { id: nextId++, tenantId, parameters, done }
    total++
    perTenant.set(tenantId, (perTenant.get(tenantId) ?? 0) + 1)
    const queue = queues.get(tenantId)
    if (queue === undefined) {
      queues.set(tenantId, [job])
      turn.push(tenantId)
    } else {
      queue.push(job)
    }
    dispatch()
    return () => {
      const waiting = queues.get(tenantId)
      const index = waiting?.indexOf(job) ?? -1
      if (waiting !== undefined && index >= 0) {
        waiting.splice(index, 1)
        release(job)
      }
    }
  }

  return {
    submit,
    pending: () => total,
    close: async () => {
      closed = true
      await Promise.all(slots.map((slot) => slot.worker.terminate()))
    }
  }
}
