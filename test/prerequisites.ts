/**
 * `npm test`'s first step (the `pretest` script): what the suite needs beyond `npm ci` is there, or is installed now,
 * or the run stops here with one line saying what to install (test/support/Prerequisites.ts). As root, or where
 * `sudo` needs no password, a missing `litecoind` is installed with apt-get, as .ci/run always did; elsewhere the
 * line names the command.
 */
import { spawnSync } from "node:child_process"
import { defaultLitecoindBinary, isExecutable, litecoindBinary } from "./support/Prerequisites.ts"

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  process.stdout.write(
    "Usage: node test/prerequisites.ts\n" +
      "Checks what `npm test` needs beyond npm ci (litecoind, the BTC tests' regtest node), installs it with apt-get\n" +
      "as root or with password-less sudo, else says in one line what to install and exits 1.\n" +
      "LITECOIND names another litecoind binary (then nothing is installed).\n"
  )
  process.exit(0)
}

const stop = (line: string): never => {
  process.stderr.write(`npm test: ${line}\n`)
  process.exit(1)
}

const installHint = "sudo apt-get install litecoind (Debian/Ubuntu; docs/btc.md)"

if (!isExecutable(litecoindBinary)) {
  if (litecoindBinary !== defaultLitecoindBinary) {
    stop(`LITECOIND=${litecoindBinary} is not an executable file; point it at litecoind or unset it`)
  }
  const asRoot = process.getuid?.() === 0
  const sudo = !asRoot && spawnSync("sudo", ["-n", "true"], { stdio: "ignore" }).status === 0
  const aptGet = spawnSync("sh", ["-c", "command -v apt-get"], { stdio: "ignore" }).status === 0
  if (!aptGet || (!asRoot && !sudo)) {
    stop(`litecoind is missing (the BTC tests run a Litecoin Core regtest node): install it with ${installHint}, then run npm test again`)
  }
  const prefix = asRoot ? [] : ["sudo", "-n"]
  process.stderr.write("npm test: installing litecoind with apt-get (the BTC tests run a Litecoin Core regtest node)...\n")
  const run = (args: ReadonlyArray<string>) => {
    const [command, ...rest] = [...prefix, ...args]
    return spawnSync(command!, rest, { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } })
  }
  run(["apt-get", "update", "-qq"])
  const installed = run(["apt-get", "install", "-y", "-qq", "litecoind"])
  if (installed.status !== 0 || !isExecutable(litecoindBinary)) {
    stop(`installing litecoind failed (apt-get exit ${installed.status}); install it with ${installHint}, then run npm test again`)
  }
  process.stderr.write(`npm test: installed ${litecoindBinary}\n`)
}
