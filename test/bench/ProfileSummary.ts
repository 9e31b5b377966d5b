/**
 * Where a `.cpuprofile` (node --cpu-prof) spent its time, as text: self time by area (our code, Effect, the SQL
 * driver, Node's HTTP and sockets, crypto, GC, idle), the hottest functions, and the inclusive time of our own
 * functions. Run alone: `npx node test/bench/ProfileSummary.ts <file.cpuprofile>`.
 */
import { readFileSync } from "node:fs"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly startTime: number
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const topFunctionsMax = 25
const ownFunctionsMax = 25
const callersOfTop = 2
const callerDepth = 14
const callerChainsMax = 6

/** Areas in match order: the first whose test passes names a frame's self time. */
const areas: ReadonlyArray<readonly [string, (frame: CallFrame) => boolean]> = [
  ["idle (waiting for I/O)", (frame) => frame.functionName === "(idle)"],
  ["garbage collection", (frame) => frame.functionName === "(garbage collector)"],
  ["V8/native, unattributed", (frame) => frame.functionName === "(program)"],
  ["crypto (verify, hashes)", (frame) => /node:internal\/crypto|node:crypto/.test(frame.url)],
  ["coffer src/auth", (frame) => frame.url.includes("/src/auth/")],
  ["coffer src (other)", (frame) => /\/src\//.test(frame.url) && !frame.url.includes("node_modules")],
  ["@effect/sql-pg (PostgreSQL driver)", (frame) => frame.url.includes("@effect/sql-pg")],
  ["@effect/platform-node (HTTP server adapter)", (frame) => frame.url.includes("@effect/platform-node")],
  ["effect http / http-api", (frame) => /node_modules\/effect\/(dist|src)\/(http|http-api)\//.test(frame.url)],
  ["effect schema", (frame) => /node_modules\/effect\/(dist|src)\/(schema|Schema)/.test(frame.url)],
  ["effect runtime (fibers, layers, core)", (frame) => frame.url.includes("node_modules/effect/")],
  ["node http", (frame) => /node:_http|node:http|node:internal\/http/.test(frame.url)],
  ["node net/streams/timers", (frame) => /node:net|node:internal\/(streams|stream_base|timers|net)|node:stream/.test(frame.url)],
  ["other node internals", (frame) => frame.url.startsWith("node:")],
  ["other dependencies", (frame) => frame.url.includes("node_modules")],
  ["native functions (no url)", (frame) => frame.url === ""]
]

const shortUrl = (url: string): string =>
  url.replace(/^file:\/\/.*?\/node_modules\//, "").replace(/^file:\/\/.*?\/(src|test)\//, "$1/")

const frameKey = (frame: CallFrame): string =>
  `${frame.functionName || "(anonymous)"} ${shortUrl(frame.url)}${frame.url === "" ? "" : `:${frame.lineNumber + 1}`}`

const percent = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1).padStart(5)}%`

/**
 * `window`: only samples taken within it, in microseconds of the system's monotonic clock, which is the clock of the
 * profile's timestamps (V8 TimeTicks and `process.hrtime` both read CLOCK_MONOTONIC on Linux).
 */
export const summarizeProfile = (file: string, window?: readonly [number, number]): string => {
  const profile: Profile = JSON.parse(readFileSync(file, "utf8"))
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)

  const selfByNode = new Map<number, number>()
  let total = 0
  let at = profile.startTime
  profile.samples.forEach((id, index) => {
    const delta = profile.timeDeltas[index] ?? 0
    at += delta
    if (window !== undefined && (at < window[0] || at > window[1])) return
    total += delta
    selfByNode.set(id, (selfByNode.get(id) ?? 0) + delta)
  })
  if (total === 0) return "  (no samples in the window)"

  const selfByArea = new Map<string, number>()
  const selfByFunction = new Map<string, number>()
  for (const [id, self] of selfByNode) {
    const frame = byId.get(id)!.callFrame
    const area = areas.find(([, test]) => test(frame))?.[0] ?? "other"
    selfByArea.set(area, (selfByArea.get(area) ?? 0) + self)
    const key = frameKey(frame)
    selfByFunction.set(key, (selfByFunction.get(key) ?? 0) + self)
  }

  // Inclusive time of our own functions: each sample counts once for every distinct one of them on its stack.
  const inclusiveOwn = new Map<string, number>()
  for (const [id, self] of selfByNode) {
    const seen = new Set<string>()
    for (let current: number | undefined = id; current !== undefined; current = parent.get(current)) {
      const frame = byId.get(current)!.callFrame
      if (!/\/src\//.test(frame.url) || frame.url.includes("node_modules")) continue
      seen.add(frameKey(frame))
    }
    for (const key of seen) inclusiveOwn.set(key, (inclusiveOwn.get(key) ?? 0) + self)
  }

  const lines: Array<string> = [`  ${(total / 1e6).toFixed(1)} s of samples; self time by area:`]
  for (const [area, time] of [...selfByArea].sort((a, b) => b[1] - a[1])) {
    lines.push(`  ${percent(time, total)}  ${area}`)
  }
  lines.push(`  hottest functions (self time):`)
  for (const [key, time] of [...selfByFunction].sort((a, b) => b[1] - a[1]).slice(0, topFunctionsMax)) {
    lines.push(`  ${percent(time, total)}  ${key}`)
  }
  // Who calls the hottest functions: a native one (a socket write, say) names no caller on its own.
  const hottest = [...selfByFunction].sort((a, b) => b[1] - a[1]).slice(0, callersOfTop + 1)
    .map(([key]) => key).filter((key) => !key.startsWith("("))
  for (const key of hottest.slice(0, callersOfTop)) {
    const byChain = new Map<string, number>()
    for (const [id, self] of selfByNode) {
      if (frameKey(byId.get(id)!.callFrame) !== key) continue
      const chain: Array<string> = []
      for (let current = parent.get(id); current !== undefined && chain.length < callerDepth; current = parent.get(current)) {
        chain.push(frameKey(byId.get(current)!.callFrame))
      }
      const text = chain.join(" < ")
      byChain.set(text, (byChain.get(text) ?? 0) + self)
    }
    lines.push(`  callers of ${key}:`)
    for (const [chain, time] of [...byChain].sort((a, b) => b[1] - a[1]).slice(0, callerChainsMax)) {
      lines.push(`  ${percent(time, total)}  < ${chain}`)
    }
  }
  lines.push(`  coffer functions (inclusive time):`)
  for (const [key, time] of [...inclusiveOwn].sort((a, b) => b[1] - a[1]).slice(0, ownFunctionsMax)) {
    lines.push(`  ${percent(time, total)}  ${key}`)
  }
  return lines.join("\n")
}

if (import.meta.main) {
  const file = process.argv[2]
  if (file === undefined) throw new Error("usage: node test/bench/ProfileSummary.ts <file.cpuprofile>")
  console.log(summarizeProfile(file))
}
