/**
 * CPU per unit of work in slices (issue 34: the lines by CPU rather than by rate): what TransferCpuPhase.ts,
 * DeliveriesPhase.ts and AuthCpuPhase.ts share. A slice is a measured window's units and the CPU seconds the
 * processes that matter spent in it, read from /proc (utime + stime) around it; the service and its raw baseline run
 * in alternating slices of one run, so the machine's load at any moment weighs on both alike.
 */
import { cpuSeconds, postgresPids } from "../e2e/ServiceProcess.ts"

export interface Slice {
  readonly units: number
  readonly cpuSeconds: number
}

export const sumSlices = (slices: ReadonlyArray<Slice>): Slice =>
  slices.reduce((total, slice) => ({ units: total.units + slice.units, cpuSeconds: total.cpuSeconds + slice.cpuSeconds }), {
    units: 0,
    cpuSeconds: 0
  })

/** CPU microseconds per unit of the slice. */
export const microsPerUnit = (slice: Slice): number =>
  slice.units === 0 ? Number.NaN : (slice.cpuSeconds * 1e6) / slice.units

/**
 * Starts counting the CPU of the service's process and, unless `postgres` is false, of its PostgreSQL's processes
 * (the postmaster's children alive now: a backend started later is not counted); answers the reading of the seconds
 * spent since.
 */
export const startServiceCpu = (options: {
  readonly servicePid: number
  readonly dataDir: string
  readonly postgres?: boolean
}): () => number => {
  const pids = options.postgres === false ? [] : postgresPids(options.dataDir)
  const total = () => cpuSeconds(options.servicePid) + pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
  const start = total()
  return () => total() - start
}

/** This process's CPU seconds (user + system): the client side of a raw baseline. */
export const clientCpuSeconds = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1e6
}
