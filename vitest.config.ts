import { defineConfig } from "vitest/config"

/**
 * Service processes whose timing is asserted (a restart's readiness, takeover within seconds, a p99 during a freeze,
 * counts that idle work would blur): run after everything else, one at a time. The other end-to-end files (crash
 * tests, bundle, README commands) start processes too but assert only outcomes, so they run beside the service
 * files: serial, they added about 200 s to the suite (issue 32's "CI under 15 minutes").
 */
const processTests = [
  "test/e2e/ThreeProcesses.test.ts",
  "test/e2e/TwoProcesses.test.ts",
  "test/e2e/TracesAcrossProcesses.test.ts",
  "test/e2e/TransferCounts.test.ts",
  "test/e2e/WithdrawalCounts.test.ts",
  "test/e2e/Start.test.ts"
]

/**
 * Files that need a process of their own beside the others: end-to-end files (they start service processes and
 * change process-wide state such as signal handlers), and files that read process-global state (Effect's default
 * metric registry, a global tracer, environment read at import). Every other file shares its worker's module cache
 * (`isolate: false`): a fresh process per file imported effect, viem, tronweb and the service again, about 2 s each,
 * which was a fifth of the suite (60 small files: 108 s isolated, 41 s shared).
 */
const ownProcessTests = [
  "test/e2e/**/*.test.ts",
  "test/observability/Metrics.test.ts",
  "test/observability/Traces.test.ts",
  "test/observability/Sampling.test.ts",
  "test/db/MeteredPgClient.test.ts",
  "test/wallets/ResidentEntityCap.test.ts"
]

export default defineConfig({
  test: {
    testTimeout: 30_000,
    // initdb plus a start take 1-3 s on a busy 2-core box.
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    // Child processes rather than threads: tests spawn and kill processes, and change process.env.
    pool: "forks",
    // The machine has 2 cores, and the PostgreSQL server needs some of them too; but many files wait on child
    // processes, nodes and timers, so a third worker fills the cores: a full run took 13 m 45 s with 2 workers (1.4
    // cores busy on average) and 11 m 43 s with 3, all green, on merged main of 2026-11-29.
    maxWorkers: 3,
    // In CI, also a machine-readable summary: .ci/run prints its counts as the plain closing line.
    reporters: process.env.CI === "true"
      ? ["default", ["json", { outputFile: "node_modules/.cache/vitest-results.json" }]]
      : ["default"],
    projects: [
      {
        extends: true,
        test: {
          name: "service",
          include: ["test/**/*.test.ts"],
          exclude: [...processTests, ...ownProcessTests],
          isolate: false,
          // One PostgreSQL for the run, a migrated template, and a fresh database per test file from it.
          globalSetup: ["test/support/global-setup.ts"],
          setupFiles: ["test/support/db-per-file.ts"],
          sequence: { groupOrder: 0 }
        }
      },
      {
        extends: true,
        test: {
          name: "isolated",
          include: ownProcessTests,
          exclude: processTests,
          globalSetup: ["test/support/global-setup.ts"],
          setupFiles: ["test/support/db-per-file.ts"],
          sequence: { groupOrder: 0 }
        }
      },
      {
        extends: true,
        // After everything else, alone: its timing would otherwise measure the other test files' load on 2 cores
        // (a restart measured 1.6-2.0 s alone and 3.1 s beside them).
        test: {
          name: "process",
          include: processTests,
          // One file at a time too: the crash tests restart the service many times and would load the timed one.
          fileParallelism: false,
          sequence: { groupOrder: 1 }
        }
      }
    ]
  }
})
