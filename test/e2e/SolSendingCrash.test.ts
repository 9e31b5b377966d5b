/**
 * A kill -9 at any instant of sending leaves exactly one SOL transaction per withdrawal on chain (decisions.md
 * "Sending on real networks"; docs/sending.md; docs/sol.md): the service runs as a real child process with SOL_DEVNET
 * on the litesvm JSON-RPC front (test/support/SolanaRpcFront.ts, in this test's process) and `COFFER_FAULT=<step>`
 * (src/idempotency/CrashPoints.ts `sendCrashSteps`): killed inside the signing transaction before COMMIT, right after
 * COMMIT before the broadcast, and after the node took the bytes (the front puts them in a block at once) before
 * the withdrawal is CONFIRMING. Restarted without the fault, each withdrawal completes with one transaction on chain
 * paid by HOT, and each recipient is paid exactly once: the same signed bytes are broadcast again (the chain knows
 * them by their signature), never a second signature of the payload while the first may still land.
 */
import { assert, describe, it } from "@effect/vitest"
import { Keypair } from "@solana/web3.js"
import { Effect } from "effect"
import { afterAll } from "vitest"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { finalityDepth, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"
import { completed, makeCrashHarness, submitIntoEachCrash } from "./SendingCrashHarness.ts"
import { killHard } from "./ServiceProcess.ts"

const asset = "SOL_DEVNET_SOL"
const front = await startSolanaRpcFront()
const harness = await makeCrashHarness("coffer-sol-send-crash-", { CHAIN_RPC_URLS: JSON.stringify({ SOL_DEVNET: front.url }) })
afterAll(async () => {
  await harness.cleanUp()
  await front.close()
})

describe("SOL sending across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, or after the broadcast: one transaction each on chain from HOT, each recipient paid once",
    () =>
      Effect.promise(async () => {
        const service = await harness.start()
        const hot = await harness.hotAddress(service, "SOL_DEVNET")
        front.paySol(hot, 100_000_000_000n)
        await harness.watcherAt(service, "SOL_DEVNET", BigInt(front.headHeight()))
        // A payer funded by a real deposit, credited once its block is finalized.
        const payer = await harness.depositAddress(service, "send-crash", "SOL_DEVNET")
        front.paySol(payer.address, 5_000_000_000n)
        front.mine(finalityDepth + 1)
        await harness.credited(service, payer.walletId, asset)
        const fromHotBefore = front.signaturesFrom(hot).length
        const amount = 100_000_000n

        // The front puts the bytes in a block as it takes them: after the broadcast crash they are already included.
        const sent = await submitIntoEachCrash({
          harness,
          service,
          assetId: asset,
          payerWalletId: payer.walletId,
          amountRaw: amount.toString(),
          recipient: () => Keypair.generate().publicKey.toBase58(),
          externalTxIdPrefix: "send-crash"
        })

        front.mine(finalityDepth + 1)
        for (const { id, to } of sent.withdrawals) {
          const done = await completed(harness, sent.service, id)
          assert.strictEqual(front.lamports(to), amount, `${to} paid once`)
          assert.isNull(front.blockOf(done.txHash)?.err, "included and succeeded")
          assert.strictEqual(done.networkFeeRaw, "5000")
        }
        // Exactly one transaction per withdrawal left HOT, and nothing else.
        assert.strictEqual(front.signaturesFrom(hot).length - fromHotBefore, sendCrashSteps.length)
        await killHard(sent.service)
      }),
    600_000
  )
})
