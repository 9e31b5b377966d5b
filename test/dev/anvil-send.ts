/**
 * `npm run dev:anvil:send -- --to <address> --eth 0.05`: a deposit on the `npm run dev:anvil` chain, sent from anvil's
 * first dev account (AnvilDevAccount.ts) to a deposit address (`POST /v1/users/{customerRefId}/deposit_address`
 * with `{"networkKey":"ETH_SEPOLIA"}`). Prints the transaction and its block; the service credits it after the
 * network's confirmations (12 blocks, about 24 s at dev:anvil's block every 2 s). No `cast` needed.
 */
import { parseEther } from "viem"
import { parseScriptArgs, usageError } from "../../src/ScriptArgs.ts"
import { devAccount, sendFromDevAccount } from "./AnvilDevAccount.ts"

const usage = `Usage: npm run dev:anvil:send -- --to ADDRESS (--eth AMOUNT | --wei AMOUNT)

Sends ETH on the dev:anvil chain from anvil's dev account ${devAccount} (10,000 ETH, unlocked), as a
depositor would: e.g. to a deposit address from POST /v1/users/alice/deposit_address '{"networkKey":"ETH_SEPOLIA"}'.

  --to ADDRESS     0x-prefixed recipient
  --eth AMOUNT     amount in ETH, e.g. 0.05
  --wei AMOUNT     amount in wei (the raw amount), e.g. 50000000000000000
  --rpc-url URL    the node (default http://127.0.0.1:ANVIL_PORT, ANVIL_PORT default 8545)
  -h, --help       this text
`
const flags = parseScriptArgs(usage, {
  to: { type: "string" },
  eth: { type: "string" },
  wei: { type: "string" },
  "rpc-url": { type: "string" }
})
const url = flags["rpc-url"] ?? `http://127.0.0.1:${process.env.ANVIL_PORT ?? "8545"}`
if (flags.to === undefined || !/^0x[0-9a-fA-F]{40}$/.test(flags.to)) usageError("--to takes a 0x-prefixed 20-byte address")
if ((flags.eth === undefined) === (flags.wei === undefined)) usageError("give the amount once: --eth or --wei")
const wei = flags.wei !== undefined
  ? (/^[0-9]+$/.test(flags.wei) ? BigInt(flags.wei) : usageError("--wei takes decimal digits"))
  : (/^[0-9]+(\.[0-9]{1,18})?$/.test(flags.eth!) ? parseEther(flags.eth!) : usageError("--eth takes a decimal amount, e.g. 0.05"))
if (wei <= 0n) usageError("the amount must be above 0")

try {
  const sent = await sendFromDevAccount(url, flags.to!, wei)
  process.stdout.write(`sent ${wei} wei from ${devAccount} to ${flags.to}: transaction ${sent.hash} in block ${sent.blockNumber}\n`)
} catch (error) {
  const reason = error instanceof Error ? error.message : String(error)
  process.stderr.write(`dev:anvil:send: ${reason.includes("fetch failed") ? `cannot reach ${url}; is npm run dev:anvil running?` : reason}\n`)
  process.exit(1)
}
