/**
 * A kill -9 at any instant of sending leaves exactly one transaction per withdrawal on chain (decisions.md "Sending
 * on real networks"; docs/sending.md): the service runs as a real child process on anvil (ETH_SEPOLIA, chain id
 * 11155111) with `COFFER_FAULT=<step>` (src/idempotency/CrashPoints.ts `sendCrashSteps`), so it kills itself with
 * SIGKILL when a withdrawal's sending reaches that step: inside the signing transaction before COMMIT, right after
 * COMMIT before the broadcast, after the broadcast's claim (sql/0029) before the node got the bytes, and after the
 * node accepted the bytes but before the withdrawal is CONFIRMING. Its
 * PostgreSQL is killed too (a power cut). Restarted without the fault, each withdrawal completes with one
 * transaction on chain, the nonces stay consecutive, and the recipient is paid exactly once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type Hex, parseEther } from "viem"
import { afterAll, beforeAll } from "vitest"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { anvilAccounts, startAnvil } from "../support/Anvil.ts"
import { completed, makeCrashHarness, submitIntoEachCrash } from "./SendingCrashHarness.ts"
import { killHard } from "./ServiceProcess.ts"

const anvil = startAnvil({ chainId: 11155111 })
const { client: node } = anvil
const asset = "ETH_SEPOLIA_ETH"
const harness = await makeCrashHarness("coffer-send-crash-", { CHAIN_RPC_URLS: JSON.stringify({ ETH_SEPOLIA: anvil.url }) })
beforeAll(() => Effect.runPromise(anvil.ready))
afterAll(() => harness.cleanUp())

describe("sending across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, after the broadcast's claim, or after the broadcast: one transaction each on chain, consecutive nonces, each recipient paid once",
    () =>
      Effect.promise(async () => {
        const service = await harness.start()
        const hot = await harness.hotAddress(service, "ETH_SEPOLIA") as Hex
        await node.setBalance({ address: hot, value: parseEther("100") })
        await harness.watcherAt(service, "ETH_SEPOLIA", await node.getBlockNumber())
        // A payer funded by a real deposit, credited after 12 confirmations.
        const payer = await harness.depositAddress(service, "send-crash", "ETH_SEPOLIA")
        await node.sendTransaction({ account: anvilAccounts[0], to: payer.address as Hex, value: parseEther("5"), chain: null })
        await node.mine({ blocks: 13 })
        await harness.credited(service, payer.walletId, asset)
        const nonceBefore = await node.getTransactionCount({ address: hot })

        const sent = await submitIntoEachCrash({
          harness,
          service,
          assetId: asset,
          payerWalletId: payer.walletId,
          amountRaw: parseEther("0.1").toString(),
          recipient: (index) => `0x${(0xc0ffee00 + index).toString(16).padStart(40, "0")}`,
          externalTxIdPrefix: "send-crash",
          // The node took the bytes before the crash, mined while the service is down: the restart finds the
          // broadcast claimed (sql/0029) and asks the node, which holds them, so it sends nothing again. Killed after
          // the claim but before the node got the bytes, the restart waits out the claim's grace, finds them unknown to
          // the node and broadcasts them.
          whileDown: async (step) => {
            if (step === "send-after-broadcast") await node.mine({ blocks: 1 })
          }
        })
        assert.include(sent.service.output(), "is held by the node already", "the restart asked the node before broadcasting again")

        await node.mine({ blocks: 13 })
        for (const { id, to } of sent.withdrawals) {
          const done = await completed(harness, sent.service, id)
          assert.strictEqual(await node.getBalance({ address: to as Hex }), parseEther("0.1"), `${to} paid once`)
          const receipt = await node.getTransactionReceipt({ hash: done.txHash })
          assert.strictEqual(receipt.status, "success")
        }
        // Exactly one transaction per withdrawal left HOT: three nonces, consecutive, and nothing else.
        assert.strictEqual(await node.getTransactionCount({ address: hot }), nonceBefore + sendCrashSteps.length)
        const head = await node.getBlockNumber()
        let fromHot = 0
        for (let height = 0n; height <= head; height++) {
          const block = await node.getBlock({ blockNumber: height, includeTransactions: true })
          fromHot += block.transactions.filter((tx) => tx.from.toLowerCase() === hot.toLowerCase()).length
        }
        assert.strictEqual(fromHot, sendCrashSteps.length)
        await killHard(sent.service)
      }),
    600_000
  )
})
