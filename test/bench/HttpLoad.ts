/**
 * A closed-loop HTTP/1.1 load generator over raw keep-alive sockets: each connection sends one request, waits for the
 * whole response, sends the next. Requests are prepared byte buffers, responses are parsed only as far as the status
 * and Content-Length, so the client spends far less CPU per request than the server and, on a small shared machine,
 * takes as little as possible from it. (node:http or fetch would cost the client about as much as the server.)
 */
import net from "node:net"

export interface LoadOptions {
  readonly host: string
  readonly port: number
  /**
   * Several service processes (the processes phase): the connections are spread over these ports in turn, each
   * connection staying on its own port; `port` is then unused.
   */
  readonly ports?: ReadonlyArray<number>
  readonly connections: number
  /** Requests sent during the warm-up are answered but not counted. */
  readonly warmupMs: number
  readonly durationMs: number
  /** The next request's bytes; undefined when the supply (pre-signed tokens) is used up. */
  readonly nextRequest: () => Buffer | undefined
  /** Called when the measured window opens and when it closes (to sample CPU counters). */
  readonly onWindowStart?: () => void
  readonly onWindowEnd?: () => void
}

export interface LoadResult {
  /** 2xx responses completed inside the measured window. */
  readonly ok: number
  /** Other responses inside the window, by status. */
  readonly failedByStatus: ReadonlyMap<number, number>
  readonly measuredMs: number
  readonly requestsPerSecond: number
  readonly latencyP50Ms: number
  readonly latencyP99Ms: number
  /** True when `nextRequest` ran dry before the window ended (the rate is then over a shorter window). */
  readonly exhausted: boolean
  readonly socketErrors: number
  /** The measured window on the system's monotonic clock in microseconds: the clock of `--cpu-prof` timestamps. */
  readonly windowMonotonicMicros: readonly [number, number]
}

/** After the window, responses still in flight get this long before their sockets are closed. */
const drainTimeoutMs = 2_000
const latencySamplesMax = 1_000_000
const responseHeaderBytesMax = 16 * 1024
const headerEnd = Buffer.from("\r\n\r\n")
const contentLengthPattern = /\r\ncontent-length:\s*(\d+)/i

const percentile = (sorted: Float64Array, fraction: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!

export const runLoad = (options: LoadOptions): Promise<LoadResult> =>
  new Promise((resolvePromise, reject) => {
    const startedAt = performance.now()
    const startedAtMonotonicMicros = Number(process.hrtime.bigint() / 1000n)
    const windowStart = startedAt + options.warmupMs
    const windowEnd = windowStart + options.durationMs
    let ok = 0
    const failedByStatus = new Map<number, number>()
    const latencies = new Float64Array(latencySamplesMax)
    let latencyCount = 0
    let exhaustedAt: number | undefined
    let socketErrors = 0
    let open = 0
    let finished = false
    const sockets = new Set<net.Socket>()

    let windowEnded = false
    const endWindow = () => {
      if (windowEnded) return
      windowEnded = true
      clearTimeout(windowEndTimer)
      options.onWindowEnd?.()
    }
    const closeAll = () => {
      finished = true
      clearTimeout(drainTimer)
      for (const socket of sockets) socket.destroy()
    }
    const abort = (error: Error) => {
      if (finished) return
      closeAll()
      reject(error)
    }
    const finish = () => {
      if (finished) return
      // Every connection may close at the window's end before its timer runs (timers fire late on a loaded
      // machine): the window's end is then read here, so a CPU meter always gets its reading.
      endWindow()
      closeAll()
      const measuredMs = Math.max(0, Math.min(windowEnd, exhaustedAt ?? windowEnd) - windowStart)
      const sorted = latencies.slice(0, latencyCount).sort()
      resolvePromise({
        ok,
        failedByStatus,
        measuredMs,
        requestsPerSecond: measuredMs === 0 ? 0 : ok / (measuredMs / 1000),
        latencyP50Ms: percentile(sorted, 0.5),
        latencyP99Ms: percentile(sorted, 0.99),
        exhausted: exhaustedAt !== undefined,
        socketErrors,
        windowMonotonicMicros: [
          startedAtMonotonicMicros + (windowStart - startedAt) * 1000,
          startedAtMonotonicMicros + (windowStart - startedAt + measuredMs) * 1000
        ]
      })
    }
    const drainTimer = setTimeout(finish, options.warmupMs + options.durationMs + drainTimeoutMs)
    if (options.onWindowStart !== undefined) setTimeout(options.onWindowStart, options.warmupMs)
    const windowEndTimer = setTimeout(endWindow, options.warmupMs + options.durationMs)

    const connect = (port: number) => {
      const socket = net.connect({ host: options.host, port, noDelay: true })
      sockets.add(socket)
      open++
      let pending: Buffer = Buffer.alloc(0)
      let sentAt = 0

      const sendNext = () => {
        const now = performance.now()
        if (now >= windowEnd || finished) return socket.end()
        const request = options.nextRequest()
        if (request === undefined) {
          exhaustedAt ??= now
          return socket.end()
        }
        sentAt = now
        socket.write(request)
      }

      socket.on("connect", sendNext)
      socket.on("data", (chunk: Buffer) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
        for (;;) {
          const end = pending.indexOf(headerEnd)
          if (end < 0) {
            if (pending.length > responseHeaderBytesMax) return abort(new Error("response header too large"))
            return
          }
          const head = pending.toString("latin1", 0, end)
          const length = contentLengthPattern.exec(head)
          // The service always sends Content-Length; anything else is not a response this client understands.
          if (length === null) return abort(new Error(`response without content-length:\n${head}`))
          const total = end + headerEnd.length + Number(length[1])
          if (pending.length < total) return
          const status = Number(head.slice(9, 12))
          pending = pending.subarray(total)
          const doneAt = performance.now()
          if (doneAt >= windowStart && doneAt < windowEnd) {
            if (status >= 200 && status < 300) ok++
            else failedByStatus.set(status, (failedByStatus.get(status) ?? 0) + 1)
            if (latencyCount < latencySamplesMax) latencies[latencyCount++] = doneAt - sentAt
          }
          sendNext()
        }
      })
      socket.on("error", () => {
        socketErrors++
      })
      socket.on("close", () => {
        sockets.delete(socket)
        open--
        // The server may close an idle or errored connection: replace it while the window is open.
        if (!finished && performance.now() < windowEnd && exhaustedAt === undefined) connect(port)
        else if (open === 0) finish()
      })
    }

    const ports = options.ports ?? [options.port]
    for (let index = 0; index < options.connections; index++) connect(ports[index % ports.length]!)
  })
