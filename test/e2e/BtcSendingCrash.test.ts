/**
 * A kill -9 at any instant of BTC sending leaves exactly one payment per withdrawal on chain (decisions.md "Sending
 * on real networks"; docs/btc.md): the service runs as a real child process with BTC_TESTNET on a regtest Litecoin
 * Core node, with `COFFER_FAULT=<step>` (src/idempotency/CrashPoints.ts `sendCrashSteps`), so it kills itself with
 * SIGKILL when a withdrawal's sending reaches that step: inside the signing transaction before COMMIT (the outputs
 * were reserved before it: the restart chooses again for the same withdrawal), right after COMMIT before the
 * broadcast, and after the node accepted the bytes (mined while the service is down: the restart's broadcast of the
 * same bytes is "already in block chain"). Restarted without the fault, each withdrawal completes, and each recipient
 * is paid by exactly one output in the whole chain.
 */
import { assert, describe, it } from "@effect/vitest"
import * as bitcoin from "bitcoinjs-lib"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll } from "vitest"
import { bitcoinNetworks } from "../../src/chains/BitcoinNetwork.ts"
import { sendCrashSteps } from "../../src/idempotency/CrashPoints.ts"
import { startLitecoind } from "../support/Litecoind.ts"
import { completed, makeCrashHarness, submitIntoEachCrash } from "./SendingCrashHarness.ts"
import { killHard } from "./ServiceProcess.ts"

const node = startLitecoind()
const asset = "BTC_TESTNET_BTC"
const harness = await makeCrashHarness("coffer-btc-send-crash-", { CHAIN_RPC_URLS: JSON.stringify({ BTC_TESTNET: node.url }) })
beforeAll(() => node.ready, 60_000)
afterAll(() => harness.cleanUp())

describe("BTC sending across crashes (decisions.md: exactly one transaction per withdrawal)", () => {
  it.live(
    "a kill -9 inside the signing transaction, after it, or after the broadcast: each recipient paid by exactly one output",
    () =>
      Effect.promise(async () => {
        const startHeight = Number(await node.height())
        const service = await harness.start()
        const hot = await harness.hotAddress(service, "BTC_TESTNET")
        for (let index = 0; index < sendCrashSteps.length; index++) await node.send(hot, "test", 10_000_000n)
        // A payer funded by a real deposit, credited at the 2nd confirmation; its output is the first one spent.
        const payer = await harness.depositAddress(service, "btc-send-crash", "BTC_TESTNET")
        await node.send(payer.address, "test", 20_000_000n)
        await node.mine(2)
        await harness.credited(service, payer.walletId, asset)

        const sent = await submitIntoEachCrash({
          harness,
          service,
          assetId: asset,
          payerWalletId: payer.walletId,
          amountRaw: "1000000",
          recipient: () => bitcoin.payments.p2wpkh({ hash: randomBytes(20), network: bitcoinNetworks.test }).address!,
          externalTxIdPrefix: "btc-send-crash",
          // The node took the bytes before the crash: mined while the service is down.
          whileDown: async (step) => {
            if (step === "send-after-broadcast") await node.mine(1)
          },
          completedCounts: true
        })

        await node.mine(2)
        for (const { id } of sent.withdrawals) await completed(harness, sent.service, id)
        // Every output of every block since the node's start: each recipient's script is paid exactly once.
        const paid = new Map<string, Array<string>>()
        const head = Number(await node.height())
        for (let height = startHeight; height <= head; height++) {
          const block = await node.rpc("getblock", [await node.rpc("getblockhash", [height]), 2])
          for (const tx of block.tx) {
            for (const output of tx.vout) paid.set(output.scriptPubKey.hex, [...(paid.get(output.scriptPubKey.hex) ?? []), tx.txid])
          }
        }
        for (const { to } of sent.withdrawals) {
          const script = Buffer.from(bitcoin.address.toOutputScript(to, bitcoinNetworks.test)).toString("hex")
          assert.strictEqual(paid.get(script)?.length, 1, `${to} paid once: ${JSON.stringify(paid.get(script))}`)
        }
        await killHard(sent.service)
      }),
    600_000
  )
})
