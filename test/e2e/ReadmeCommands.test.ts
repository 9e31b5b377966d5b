/**
 * The README's command blocks run as written (issue 37: its API key example made a key for 10.0.0.0/8 and then used
 * it from 127.0.0.1, a 403): "A first signed call", "A deposit and a withdrawal on the simulated chain" and
 * "Operator CLI", against a service started as `npm start` does, each `npm run call -- ...` line through the same
 * program (`node src/ops/cli.ts`, what the npm script runs) and the shell's own quoting. `<placeholders>` are
 * filled from the answers before them, as a reader would; `.data/` is the test's DATA_DIR. Every line must exit 0
 * (the CLI exits 1 on an HTTP status of 400 or more), and the deposit is credited as the README says (less the fee).
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import {
  cleanUpNow,
  freePort,
  makeDataDir,
  repositoryRoot,
  type ServiceProcess,
  spawnService,
  stopService,
  waitForHealth
} from "./ServiceProcess.ts"

/** The `sh` block under a README heading, as commands: lines joined while a quote is open or after a `\`. */
const commandsUnder = (readme: string, heading: string): ReadonlyArray<string> => {
  const section = readme.slice(readme.indexOf(`## ${heading}\n`))
  const block = /```sh\n([\s\S]*?)```/.exec(section)
  if (block === null) throw new Error(`no sh block under "## ${heading}"`)
  const commands: Array<string> = []
  let pending = ""
  for (const line of block[1]!.split("\n")) {
    if (line.trim() === "" && pending === "") continue
    pending = pending === "" ? line : `${pending}\n${line}`
    if ((pending.match(/'/g)?.length ?? 0) % 2 === 0 && !pending.endsWith("\\")) {
      commands.push(pending)
      pending = ""
    }
  }
  return commands
}

const placeholderFields: Record<string, string> = { tenantId: "id", keyId: "keyId", address: "address", walletId: "walletId" }

describe("the README's command blocks, as written", () => {
  it("A first signed call; A deposit and a withdrawal on the simulated chain; Operator CLI", async () => {
    const readme = readFileSync(join(repositoryRoot, "README.md"), "utf8")
    const dataDir = makeDataDir("coffer-readme-")
    const [port, opsPort] = [await freePort(), await freePort()]
    let service: ServiceProcess | undefined
    try {
      service = spawnService({ dataDir, port, opsPort })
      const opsToken = () => readFileSync(join(dataDir, "ops-token"), "utf8").trim()
      // The token file is written during the first start; wait for health with it once it exists.
      for (let attempt = 0; attempt < 600; attempt++) {
        try {
          opsToken()
          break
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      }
      await waitForHealth(service, opsToken(), 90_000)

      const values: Record<string, string> = {}
      const outputs: Array<string> = []
      const run = (command: string) => {
        const filled = command
          .replace(/<(\w+)>/g, (whole, name: string) => values[name] ?? whole)
          .replace(/(^|\s)\.data\//g, `$1${dataDir}/`)
        assert.notMatch(filled, /<\w+>/, `every placeholder of ${command} was answered before it`)
        const result = spawnSync("sh", ["-c", filled.replace(/^npm run call --/, `"${process.execPath}" src/ops/cli.ts`)], {
          cwd: repositoryRoot,
          encoding: "utf8",
          env: { ...process.env, DATABASE_URL: "", DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: String(port), OPS_HOST: "127.0.0.1", OPS_PORT: String(opsPort) },
          timeout: 60_000
        })
        assert.strictEqual(result.status, 0, `${command}\n${result.stderr}${result.stdout}`)
        outputs.push(result.stdout)
        try {
          const json = JSON.parse(result.stdout) as Record<string, unknown>
          for (const [name, field] of Object.entries(placeholderFields)) {
            // The first answer naming a field fills its placeholder (a tenant's id, not a later object's).
            if (values[name] === undefined && typeof json[field] === "string") values[name] = json[field] as string
          }
        } catch {
          // Not every answer is a JSON object.
        }
        return result
      }
      for (const heading of ["A first signed call", "A deposit and a withdrawal on the simulated chain", "Operator CLI"]) {
        // Placeholders are answered within their block (a user's `id` is not the Operator CLI's <tenantId>).
        for (const name of Object.keys(values)) delete values[name]
        for (const command of commandsUnder(readme, heading)) {
          if (command.startsWith("npm start")) continue
          assert.match(command, /^npm run call -- /, `a command the test knows how to run: ${command}`)
          run(command)
          if (heading === "Operator CLI" && command.includes(" key add ")) {
            // The key's private half is where the README's next line reads it.
            assert.include(outputs.at(-1)!, `${dataDir}/api-keys/${values.keyId}.pem`)
          }
        }
      }
      // The walkthrough's balance is the 0.05 ETH deposit less the deposit fee, as the README says.
      const credited = outputs.map((output) => /"availableRaw": "(\d+)"/.exec(output)?.[1]).find((raw) => raw !== undefined)
      assert.isDefined(credited, outputs.join("\n"))
      assert.isTrue(BigInt(credited!) > 0n && BigInt(credited!) < 50_000_000_000_000_000n, `credited ${credited}`)
      assert.isTrue(outputs.some((output) => output.includes("\"status\": \"COMPLETED\"")))
    } finally {
      if (service !== undefined) await stopService(service, 20_000)
      cleanUpNow(service, dataDir)
    }
  }, 300_000)
})
