/**
 * Every npm script with flags answers `--help` with its usage (exit 0) and an unknown flag with one line (exit 2),
 * never a stack trace (issue 37: `npm run bench -- --help` threw). `npm test`'s prerequisite check stops with one
 * line when litecoind is missing. The CLI refuses a JSON argument that does not parse, before sending anything.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))

const run = (script: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const result = spawnSync(process.execPath, [script, ...args], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 60_000
  })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

const scripts: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
  ["npm run bench", "test/bench/bench.ts", ["--only", "--profile", "--no-miss-profiles", "--withdrawals"]],
  ["npm run ledger:check", "src/ledger/ledger-check.ts", ["--chain"]],
  ["npm run scenario", "src/testing/scenario-run.ts", ["--seed", "--steps", "TEST_DATABASE_URL"]],
  ["npm run dev:anvil", "test/dev/anvil-service.ts", ["ANVIL_PORT", "DATA_DIR"]],
  ["npm run dev:anvil:send", "test/dev/anvil-send.ts", ["--to", "--eth", "--wei"]],
  ["node test/prerequisites.ts", "test/prerequisites.ts", ["litecoind"]]
]

describe("npm scripts answer --help", () => {
  for (const [name, script, mentions] of scripts) {
    it(`${name} -- --help: the usage, exit 0; an unknown flag: one line, exit 2`, () => {
      const help = run(script, ["--help"])
      assert.strictEqual(help.code, 0, help.stderr)
      assert.match(help.stdout, /^Usage: /)
      for (const mention of mentions) assert.include(help.stdout, mention)
      if (script === "test/prerequisites.ts") return
      const unknown = run(script, ["--no-such-flag"])
      assert.strictEqual(unknown.code, 2, unknown.stdout + unknown.stderr)
      assert.strictEqual(unknown.stderr, "Unknown option '--no-such-flag'; --help lists the options\n")
    }, 60_000)
  }

  it("npm run call -- --help lists the commands", () => {
    const help = run("src/ops/cli.ts", ["--help"])
    assert.strictEqual(help.code, 0, help.stderr)
    assert.include(help.stdout, "USAGE")
    assert.include(help.stdout, "ops")
    // The operator name the audit trail records (issue 37): the flag and where its default comes from.
    const opsHelp = run("src/ops/cli.ts", ["ops", "--help"])
    assert.strictEqual(opsHelp.code, 0, opsHelp.stderr)
    assert.match(opsHelp.stdout, /--operator string +name recorded in the audit trail \(X-Operator; default COFFER_OPERATOR, else the OS user\)/)
  }, 60_000)
})

describe("npm test's prerequisites (test/prerequisites.ts)", () => {
  it("a litecoind that is not there stops the run at once with one line saying what to do", () => {
    const missing = run("test/prerequisites.ts", [], { LITECOIND: "/nonexistent/litecoind" })
    assert.strictEqual(missing.code, 1)
    assert.strictEqual(missing.stderr, "npm test: LITECOIND=/nonexistent/litecoind is not an executable file; point it at litecoind or unset it\n")
  })

  it("an executable litecoind passes silently", () => {
    const present = run("test/prerequisites.ts", [], { LITECOIND: process.execPath })
    assert.strictEqual(present.code, 0, present.stderr)
    assert.strictEqual(present.stderr, "")
  })
})

describe("npm run call checks its JSON argument before sending", () => {
  it("a body that does not parse: one line, exit 1, nothing sent (no service needed)", () => {
    // Port 9 (discard) has no service: had the CLI sent, the message would be "cannot reach".
    const result = run("src/ops/cli.ts", ["--ops-url", "http://127.0.0.1:9", "ops", "POST", "/ops/tenants", "{name:acme}"], {
      OPS_TOKEN: "a-token-for-the-test-0123456789abcdef"
    })
    assert.strictEqual(result.code, 1)
    assert.include(result.stderr, "the body is not JSON (")
    assert.include(result.stderr, "nothing was sent")
    assert.notInclude(result.stderr, "cannot reach")
  }, 60_000)
})
