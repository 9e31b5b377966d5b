import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // One PostgreSQL for the run, a migrated template, and a fresh database per test file from it.
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/db-per-file.ts"],
    testTimeout: 30_000,
    // initdb plus a start take 1-3 s on a busy 2-core box.
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    // Child processes rather than threads: tests spawn and kill processes, and change process.env.
    pool: "forks",
    // The machine has 2 cores, and the PostgreSQL server needs some of them too.
    maxWorkers: 2,
    // In CI, also a machine-readable summary: .ci/run prints its counts as the plain closing line.
    reporters: process.env.CI === "true"
      ? ["default", ["json", { outputFile: "node_modules/.cache/vitest-results.json" }]]
      : ["default"]
  }
})
