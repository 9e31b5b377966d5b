/**
 * A kill -9 at any instant of sending leaves exactly one transaction per withdrawal on TRON too (decisions.md
 * "Sending on real networks"; docs/tron.md): the service runs as a real child process with TRON_NILE on the
 * java-tron HTTP API stand-in (test/support/TronNode.ts, served from this test process) and
 * `COFFER_FAULT=<step>` (src/idempotency/CrashPoints.ts `sendCrashSteps`): inside the signing transaction before
 * COMMIT, right after COMMIT before the broadcast, and after the node accepted the bytes but before the withdrawal is
 * CONFIRMING. Restarted without the fault, each withdrawal completes with one transaction on chain and the recipient
 * is paid exactly once. TRON has no nonces: what prevents a second payment is that the stored bytes (one txID) are
 * given again, never re-signed while they could still be included; a node that already has them answers
 * DUP_TRANSACTION_ERROR, which is success.
 */
import { assert, describe, it } from "@effect/vitest"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect } from "effect"
import { TronWeb } from "tronweb"
import { afterAll } from "vitest"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { startTronNode } from "../support/TronNode.ts"
import { completed, makeCrashHarness, submitIntoEachCrash } from "./SendingCrashHarness.ts"
import { killHard } from "./ServiceProcess.ts"

const asset = "TRON_NILE_TRX"
const node = await startTronNode({ tokens: [{ contract: "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf", supply: 10n ** 15n }] })
const harness = await makeCrashHarness("coffer-tron-send-crash-", { CHAIN_RPC_URLS: JSON.stringify({ TRON_NILE: node.url }) })
afterAll(async () => {
  await harness.cleanUp()
  await node.stop()
})

describe("sending on TRON across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, or after the broadcast: one transaction each on chain, each recipient paid once",
    () =>
      Effect.promise(async () => {
        const service = await harness.start()
        const hot = await harness.hotAddress(service, "TRON_NILE")
        await node.fund(hot, 1_000_000_000n)
        await harness.watcherAt(service, "TRON_NILE", node.head().number)
        // A payer funded by a real deposit, credited once its block is solidified.
        const payer = await harness.depositAddress(service, "send-crash", "TRON_NILE")
        await node.fund(payer.address, 500_000_000n)
        node.mine(19)
        await harness.credited(service, payer.walletId, asset)
        const sentBefore = node.sentBy(hot).length
        const amount = 10_000_000n

        const sent = await submitIntoEachCrash({
          harness,
          service,
          assetId: asset,
          payerWalletId: payer.walletId,
          amountRaw: amount.toString(),
          recipient: () => TronWeb.address.fromPrivateKey(bytesToHex(secp256k1.utils.randomSecretKey())) as string,
          externalTxIdPrefix: "send-crash",
          // The node took the bytes before the crash: mined while the service is down, the restart's broadcast of
          // the same bytes is a duplicate, which must read as accepted.
          whileDown: (step) => {
            if (step === "send-after-broadcast") node.mine(1)
          }
        })

        node.mine(1)
        node.mine(19)
        for (const { id, to } of sent.withdrawals) {
          const done = await completed(harness, sent.service, id)
          assert.strictEqual(node.trxBalance(to), amount, `${to} paid once`)
          assert.include(node.sentBy(hot), done.txHash)
        }
        // Exactly one transaction per withdrawal left HOT.
        assert.strictEqual(node.sentBy(hot).length - sentBefore, sendCrashSteps.length)
        await killHard(sent.service)
      }),
    600_000
  )
})
