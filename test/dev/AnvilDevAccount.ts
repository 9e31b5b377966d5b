/**
 * Sends from anvil's first dev account (mnemonic `test test ... junk`, 10,000 ETH, unlocked: anvil signs for it), as
 * a depositor or an operator funding an address would: a real transaction in a block, which the service's watcher
 * sees like any other (a deposit, or a `platform_receipts` row for HOT, docs/ledger.md "Chain books"). The balance
 * `anvil_setBalance` writes has no transaction, so the chain books could not explain it.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { anvilRequest } from "../support/AnvilProcess.ts"

export const devAccount = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"

/** A block every 2 s in dev:anvil: a minute is plenty, and a hung node still ends the wait. */
const receiptTimeoutMs = 60_000

export interface SentTransfer {
  readonly hash: string
  readonly blockNumber: bigint
}

export const sendFromDevAccount = async (
  url: string,
  to: string,
  wei: bigint,
  signal?: AbortSignal
): Promise<SentTransfer> => {
  const hash = await anvilRequest(url, "eth_sendTransaction", [{ from: devAccount, to, value: `0x${wei.toString(16)}` }]) as string
  const deadline = performance.now() + receiptTimeoutMs
  for (;;) {
    signal?.throwIfAborted()
    const receipt = await anvilRequest(url, "eth_getTransactionReceipt", [hash]) as
      | { status: string; blockNumber: string }
      | null
    if (receipt !== null) {
      if (receipt.status !== "0x1") throw new Error(`transaction ${hash} reverted`)
      return { hash, blockNumber: BigInt(receipt.blockNumber) }
    }
    if (performance.now() > deadline) throw new Error(`transaction ${hash} not mined within ${receiptTimeoutMs / 1000} s`)
    await sleep(250)
  }
}
