/**
 * The one postings module (src/ledger/Postings.ts) against the audit's independent statement of the same rules
 * (src/ledger/ExpectedEntries.ts, from docs/ledger.md, docs/transfers.md, docs/deposits.md): for every movement of
 * funds and every life-cycle end it can reach, the entries the pipelines write are exactly the entries the audit
 * (`npm run ledger:check`) expects, each balanced (the rules sql/0003_ledger.sql enforces), with no zero posting.
 */
import { assert, describe, it } from "@effect/vitest"
import { type BookedTransaction, describePosting, expectedEntries, expectedSendFee } from "../../src/ledger/ExpectedEntries.ts"
import { assertBalanced, type EntryKind } from "../../src/ledger/Ledger.ts"
import { type Entry, entryRequest, Postings } from "../../src/ledger/Postings.ts"
import { sendCost, type SendPurpose } from "../../src/sending/OutgoingSends.ts"

const payer = "0190a000-0000-7000-8000-000000000001"
const recipient = "0190a000-0000-7000-8000-000000000002"
const tenantId = "0190a000-0000-7000-8000-0000000000aa"
const id = "0190a000-0000-7000-8000-0000000000bb"
const usdt = "ETH_SEPOLIA_USDT"
const eth = "ETH_SEPOLIA_ETH"

const transaction = (fields: Partial<BookedTransaction> & Pick<BookedTransaction, "kind" | "status">): BookedTransaction => ({
  id,
  subStatus: null,
  assetId: usdt,
  amount: 1_000n,
  fee: null,
  networkFee: null,
  networkFeeAssetId: null,
  sourceWalletId: null,
  destinationWalletId: null,
  ...fields
})

/** The written entries by kind, each as the sorted lines the audit compares. */
const written = (entries: ReadonlyArray<Entry | undefined>) =>
  new Map(entries.filter((entry) => entry !== undefined).map((entry) => {
    assertBalanced(entryRequest(tenantId, id, entry))
    return [entry.kind, entry.postings.map((posting) => describePosting({
      accountKind: posting.account.kind,
      walletId: posting.account.kind === "WALLET" ? posting.account.walletId : null,
      assetId: posting.assetId,
      bucket: posting.bucket,
      amount: posting.amount
    })).sort()] as const
  }))

const expected = (booked: BookedTransaction, kinds: ReadonlyArray<EntryKind>) => {
  const expectation = expectedEntries(booked, new Set(kinds))
  assert.strictEqual(expectation._tag, "Entries")
  return expectation._tag === "Entries"
    ? new Map([...expectation.entries].map(([kind, postings]) => [kind, postings.map(describePosting).sort()] as const))
    : new Map()
}

const agree = (booked: BookedTransaction, entries: ReadonlyArray<Entry | undefined>) => {
  const have = written(entries)
  assert.deepStrictEqual(have, expected(booked, [...have.keys()]))
}

describe("ledger/Postings.ts builds what ledger/ExpectedEntries.ts expects (docs/ledger.md)", () => {
  for (const fee of [0n, 7n]) {
    const payment = { walletId: payer, assetId: usdt, amount: 1_000n, fee }

    it(`internal transfer, fee ${fee}: TRANSFER at once; TRANSFER_FREEZE then TRANSFER_SETTLE or TRANSFER_RELEASE`, () => {
      const base = { kind: "INTERNAL_TRANSFER", fee, sourceWalletId: payer, destinationWalletId: recipient } as const
      agree(transaction({ ...base, status: "COMPLETED" }), [Postings.transfer(payment, recipient)])
      agree(transaction({ ...base, status: "PENDING_AUTHORIZATION" }), [Postings.transferFreeze(payment)])
      agree(transaction({ ...base, status: "COMPLETED" }), [
        Postings.transferFreeze(payment),
        Postings.transferSettle(payment, recipient)
      ])
      agree(transaction({ ...base, status: "REJECTED", subStatus: "REJECTED_BY_OPERATOR" }), [
        Postings.transferFreeze(payment),
        Postings.transferRelease(payment)
      ])
    })

    it(`withdrawal, fee ${fee}: frozen while open; released when FAILED/REJECTED/CANCELLED; settled (+ network fee) when COMPLETED`, () => {
      const base = { kind: "WITHDRAWAL", fee, sourceWalletId: payer } as const
      agree(transaction({ ...base, status: "QUEUED" }), [Postings.withdrawalFreeze(payment)])
      for (const status of ["FAILED", "REJECTED", "CANCELLED"] as const) {
        agree(transaction({ ...base, status }), [Postings.withdrawalFreeze(payment), Postings.withdrawalRelease(payment)])
      }
      agree(transaction({ ...base, status: "COMPLETED", networkFee: 0n, networkFeeAssetId: eth }), [
        Postings.withdrawalFreeze(payment),
        Postings.withdrawalSettle(payment),
        Postings.networkFee(eth, 0n)
      ])
      agree(transaction({ ...base, status: "COMPLETED", networkFee: 21_000n, networkFeeAssetId: eth }), [
        Postings.withdrawalFreeze(payment),
        Postings.withdrawalSettle(payment),
        Postings.networkFee(eth, 21_000n)
      ])
    })

    it(`deposit, fee ${fee}: credited net of the fee (by the watcher or the operator), reversed as the credit negated`, () => {
      const deposited = { walletId: recipient, assetId: usdt, amount: 1_000n }
      const base = { kind: "DEPOSIT", fee, destinationWalletId: recipient } as const
      agree(transaction({ ...base, status: "COMPLETED" }), [Postings.depositCredit(deposited, fee)])
      agree(transaction({ ...base, status: "COMPLETED" }), [Postings.manualDepositCredit(deposited, fee)])
      agree(transaction({ ...base, status: "REVERSED" }), [
        Postings.depositCredit(deposited, fee),
        Postings.depositReversal(deposited, fee)
      ])
    })
  }

  it("a send's network fee: what markFinal books (sendCost, SEND_NETWORK_FEE) is what the audit expects of the send", () => {
    const finals: ReadonlyArray<readonly [SendPurpose, "PAYLOAD" | "FILL", "CONFIRMED" | "REVERTED" | "REJECTED"]> = [
      ["WITHDRAWAL", "PAYLOAD", "CONFIRMED"],
      ["WITHDRAWAL", "PAYLOAD", "REVERTED"],
      ["WITHDRAWAL", "FILL", "REJECTED"],
      ["SWEEP", "PAYLOAD", "CONFIRMED"],
      ["SWEEP", "PAYLOAD", "REVERTED"],
      ["SWEEP", "FILL", "REJECTED"],
      ["TOP_UP", "PAYLOAD", "CONFIRMED"],
      ["TOP_UP", "PAYLOAD", "REVERTED"]
    ]
    for (const [purpose, kind, state] of finals) {
      for (const fee of [0n, 21_000n]) {
        // An account the send created (SOL rent) is booked on the send even when its withdrawal books the fee.
        for (const accountCost of [0n, 2_039_280n]) {
          const entry = Postings.sendNetworkFee(eth, sendCost(purpose, { kind, networkFee: fee, accountCost }))
          const have = entry === undefined ? [] : (written([entry]).get("SEND_NETWORK_FEE") ?? [])
          const want = expectedSendFee({ id, purpose, state, networkFee: fee, accountCost, nativeAssetId: eth })
            .map(describePosting).sort()
          assert.deepStrictEqual(have, want, `${purpose} ${kind} ${state} fee ${fee} account cost ${accountCost}`)
        }
      }
    }
  })

  it("a deposit fee outside [0, amount) is a defect, never an entry", () => {
    const deposited = { walletId: recipient, assetId: usdt, amount: 10n }
    assert.throws(() => Postings.depositCredit(deposited, 10n), RangeError)
    assert.throws(() => Postings.depositCredit(deposited, -1n), RangeError)
  })
})
