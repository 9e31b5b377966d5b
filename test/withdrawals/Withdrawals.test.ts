/**
 * On-chain withdrawals end to end on the simulated chain (spec sections 2-4.4 and 6, decisions.md "Withdrawal life
 * cycle", operator-interface.md approvals and developer chain): POST /v1/transactions to an external address, the
 * withdrawal entity taking it through QUEUED, PENDING_SIGNATURE and CONFIRMING, blocks mined through /ops/devnet up
 * to COMPLETED, with the frozen funds, the ledger, the events and the signed bytes checked on the way.
 */
import { assert, describe, layer } from "@effect/vitest"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { base58 } from "@scure/base"
import { Keypair, Transaction as SolTransaction } from "@solana/web3.js"
import * as bitcoin from "bitcoinjs-lib"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { keccak256, parseTransaction, recoverTransactionAddress } from "viem"
import { hotWalletBalanceDefault } from "../../src/chains/simulated/SimulatedChain.ts"
import { broadcastClaimGraceDefaultMillis as broadcastClaimGraceMillis } from "../../src/Config.ts"
import { WithdrawalProcessor } from "../../src/withdrawals/WithdrawalProcessor.ts"
import { makeTestAppLayer, opsClient, provisionTenant } from "../support/TestApp.ts"
import { decodeTronRaw } from "../support/TronRaw.ts"
import {
  balance,
  call,
  devnet,
  entryCount,
  expectError,
  fund,
  getTransaction,
  hotAddress,
  mine,
  settings,
  signedOf,
  statusEvents,
  tenantAccount,
  waitFor,
  walletOf,
  withdraw
} from "./WithdrawalHelpers.ts"

/** The hash an explorer shows, recomputed from the raw bytes alone. */
const hashOfRaw: Record<string, (raw: string) => string> = {
  EVM: (raw) => keccak256(raw as `0x${string}`),
  BTC: (raw) => bitcoin.Transaction.fromHex(raw).getId(),
  SOL: (raw) => base58.encode(SolTransaction.from(Buffer.from(raw, "base64")).signature!),
  TRON: (raw) => bytesToHex(sha256(decodeTronRaw(raw).rawData))
}

const families = [
  {
    family: "EVM",
    networkKey: "ETH_SEPOLIA",
    assetId: "ETH_SEPOLIA_ETH",
    to: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
    amount: 10n ** 16n,
    fee: 10n ** 15n,
    // 12 confirmations: the including block is the first.
    blocksToComplete: 12
  },
  {
    family: "BTC",
    networkKey: "BTC_TESTNET",
    assetId: "BTC_TESTNET_BTC",
    to: "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx",
    amount: 100_000n,
    fee: 20_000n,
    blocksToComplete: 2
  },
  {
    family: "SOL",
    networkKey: "SOL_DEVNET",
    assetId: "SOL_DEVNET_SOL",
    to: Keypair.fromSeed(new Uint8Array(32).fill(7)).publicKey.toBase58(),
    amount: 100_000_000n,
    fee: 5_000_000n,
    // Finalized: 32 blocks behind the head.
    blocksToComplete: 33
  },
  {
    family: "TRON",
    networkKey: "TRON_NILE",
    assetId: "TRON_NILE_TRX",
    to: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    amount: 20_000_000n,
    // Above the dynamic floor (fee rule 3: the simulated 1.1 TRX network fee × 1.2), so rule 1 charges this fee.
    fee: 2_000_000n,
    // Solidified: 19 blocks behind the head.
    blocksToComplete: 20
  }
] as const

const eth = "ETH_SEPOLIA_ETH"
// Above the dynamic floor (fee rule 3: the network's cost × 1.2), so the tenant's fee is what is charged (rule 1).
const tenantFee = 10n ** 15n
const ethTo = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"

layer(makeTestAppLayer(), { excludeTestServices: true })("on-chain withdrawals", (it) => {
  describe("happy path per family", () => {
    for (const case_ of families) {
      it.effect(`${case_.family}: SUBMITTED → QUEUED → PENDING_SIGNATURE → CONFIRMING → COMPLETED; frozen then consumed, fee to FEES, txHash of the signed bytes`, () =>
        Effect.gen(function*() {
          const tenant = yield* provisionTenant()
          yield* settings(tenant, { withdrawFees: { [case_.assetId]: case_.fee.toString() } })
          const payer = yield* walletOf(tenant, "alice", case_.networkKey)
          const funded = case_.amount * 10n
          yield* fund(tenant, payer.walletId, case_.assetId, funded)
          const before = yield* devnet(case_.networkKey)
          const networkFee = BigInt(before.networkFeeRaw)

          const response = yield* withdraw(tenant, payer.walletId, case_.assetId, case_.to, case_.amount, `w-${case_.family}`)
          assert.strictEqual(response.status, 202, response.text)
          const id = response.json.transactionId
          assert.deepStrictEqual(response.json, {
            settlement: "ON_CHAIN",
            withdrawalId: id,
            transactionId: id,
            status: "SUBMITTED",
            subStatus: null,
            state: "SUBMITTED",
            assetId: case_.assetId,
            amountRaw: case_.amount.toString(),
            feeRaw: case_.fee.toString(),
            reservedRaw: (case_.amount + case_.fee).toString(),
            destination: case_.to
          })
          const frozen = { available: (funded - case_.amount - case_.fee).toString(), frozen: (case_.amount + case_.fee).toString() }
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, case_.assetId), frozen)

          // Idempotent replay: the same bytes, no second freeze.
          const replay = yield* withdraw(tenant, payer.walletId, case_.assetId, case_.to, case_.amount, `w-${case_.family}`)
          assert.strictEqual(replay.status, 202)
          assert.strictEqual(replay.text, response.text)
          assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_FREEZE"), 1)

          const confirming = yield* waitFor(tenant, id, "CONFIRMING")
          const signed = yield* signedOf(id)
          assert.strictEqual(confirming.txHash, signed.signed_tx_hash)
          assert.strictEqual(hashOfRaw[case_.family]!(signed.signed_raw), confirming.txHash)
          assert.strictEqual(confirming.kind, "WITHDRAWAL")
          assert.deepStrictEqual(confirming.destination, { walletId: null, address: case_.to, customerRefId: null, uid: null })
          assert.isNull(confirming.networkFeeRaw)
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, case_.assetId), frozen, "frozen until a terminal state")
          // The hot wallet paid the amount (and, the asset being native, the network fee).
          const after = yield* devnet(case_.networkKey)
          assert.strictEqual(after.hotWalletBalance[case_.assetId], (BigInt(before.hotWalletBalance[case_.assetId]!) - case_.amount - networkFee).toString())

          // The transfer from the hot address lands in the next block.
          const hot = yield* hotAddress(case_.networkKey)
          const sql = yield* SqlClient.SqlClient
          const [onChain] = yield* sql<{ from_address: string; to_address: string; amount: string }>`
            SELECT from_address, to_address, amount::text AS amount FROM devnet_transfers
            WHERE network_key = ${case_.networkKey} AND tx_hash = ${confirming.txHash}`
          assert.deepStrictEqual(onChain, { from_address: hot, to_address: case_.to, amount: case_.amount.toString() })
          if (case_.family === "EVM") {
            const raw = signed.signed_raw as `0x02${string}`
            assert.strictEqual((yield* Effect.promise(() => recoverTransactionAddress({ serializedTransaction: raw }))).toLowerCase(), hot)
            const parsed = parseTransaction(raw)
            assert.deepStrictEqual([parsed.to, parsed.value, parsed.chainId], [case_.to, case_.amount, 11_155_111])
          }
          if (case_.family === "BTC") {
            const outputs = bitcoin.Transaction.fromHex(signed.signed_raw).outs.map((output) =>
              [bitcoin.address.fromOutputScript(output.script, bitcoin.networks.testnet), BigInt(output.value)])
            assert.deepStrictEqual(outputs[0], [case_.to, case_.amount])
            assert.strictEqual(outputs[1]![0], hot, "change back to the hot wallet")
          }

          yield* mine(case_.networkKey, case_.blocksToComplete - 1)
          assert.strictEqual((yield* getTransaction(tenant, id)).status, "CONFIRMING", "one block short of the rule")
          yield* mine(case_.networkKey)
          const completed = yield* getTransaction(tenant, id)
          assert.deepStrictEqual([completed.status, completed.subStatus], ["COMPLETED", null])
          assert.strictEqual(completed.networkFeeRaw, networkFee.toString())
          assert.strictEqual(completed.networkFeeAssetId, case_.assetId)
          assert.strictEqual(completed.txHash, confirming.txHash)
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, case_.assetId), {
            available: (funded - case_.amount - case_.fee).toString(),
            frozen: "0"
          })
          assert.strictEqual(yield* tenantAccount(tenant, "FEES", case_.assetId), case_.fee.toString())
          assert.strictEqual(yield* tenantAccount(tenant, "NETWORK_FEES", case_.assetId), (-networkFee).toString())
          assert.deepStrictEqual(yield* statusEvents(tenant, id), [
            "CREATED:SUBMITTED/",
            "UPDATED:QUEUED/",
            "UPDATED:PENDING_SIGNATURE/",
            "UPDATED:CONFIRMING/",
            "UPDATED:COMPLETED/"
          ])
          // Each event carries the transaction as the change left it (the UPDATE's own returned row): the last one is
          // what GET answers now.
          const [lastEvent] = yield* sql<{ data: unknown }>`
            SELECT data FROM outbox_events WHERE subject_id = ${id} AND dedupe_key = 'COMPLETED/'`
          assert.deepStrictEqual(lastEvent!.data, completed)
          // More blocks change nothing: settled once.
          yield* mine(case_.networkKey, 2)
          assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_SETTLE"), 1)
          assert.strictEqual(yield* entryCount(id, "NETWORK_FEE"), 1)
          const counted = yield* signedOf(id)
          assert.deepStrictEqual([counted.broadcasts, counted.sendBroadcasts], [1, 1])
          // The broadcast's claim was given back once the node took the bytes (by the CONFIRMING transition's count).
          assert.strictEqual(counted.claimsHeld, 0, "the broadcast claim given back")
        }))
    }
  })

  describe("cancel (spec 4.4, section 3)", () => {
    it.effect("QUEUED (INSUFFICIENT_FUNDS_PLATFORM), PENDING_AUTHORIZATION and SUBMITTED cancel with funds returned; after signing, or twice, 409", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { withdrawFees: { [eth]: tenantFee.toString() }, withdrawalApprovalAbove: { [eth]: (5n * 10n ** 16n).toString() } })
        const payer = yield* walletOf(tenant, "bob", "ETH_SEPOLIA")
        yield* fund(tenant, payer.walletId, eth, 10n ** 18n)
        const cancel = (id: string) => call(tenant, "POST", `/v1/transactions/${id}/cancel`)

        // PENDING_AUTHORIZATION: above withdrawalApprovalAbove.
        const pending = yield* withdraw(tenant, payer.walletId, eth, ethTo, 6n * 10n ** 16n, "c-pending")
        yield* waitFor(tenant, pending.json.transactionId, "PENDING_AUTHORIZATION")
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), {
          available: (10n ** 18n - 6n * 10n ** 16n - tenantFee).toString(),
          frozen: (6n * 10n ** 16n + tenantFee).toString()
        })
        const cancelled = yield* cancel(pending.json.transactionId)
        assert.strictEqual(cancelled.status, 200, cancelled.text)
        assert.deepStrictEqual(cancelled.json, {
          ...pending.json,
          status: "CANCELLED",
          subStatus: "CANCELLED_BY_USER",
          state: "CANCELLED"
        })
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), { available: (10n ** 18n).toString(), frozen: "0" })
        expectError(yield* cancel(pending.json.transactionId), 409, "INVALID_STATE", "withdrawal can no longer be cancelled")
        assert.deepStrictEqual(yield* statusEvents(tenant, pending.json.transactionId), [
          "CREATED:SUBMITTED/",
          "UPDATED:PENDING_AUTHORIZATION/",
          "UPDATED:CANCELLED/CANCELLED_BY_USER"
        ])
        // The operator can no longer approve it.
        const ops = yield* opsClient
        const late = yield* Effect.flip(ops.manual.approve({ params: { tenantId: tenant.tenantId, id: pending.json.transactionId } }))
        assert.strictEqual(late._tag, "InvalidState")

        // QUEUED with INSUFFICIENT_FUNDS_PLATFORM: the hot wallet is empty on this network.
        yield* devnet("ETH_SEPOLIA", { hotWalletBalance: { [eth]: 0n } })
        const queued = yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "c-queued")
        yield* waitFor(tenant, queued.json.transactionId, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
        const queuedCancel = yield* cancel(queued.json.transactionId)
        assert.strictEqual(queuedCancel.status, 200, queuedCancel.text)
        assert.strictEqual(queuedCancel.json.status, "CANCELLED")

        // SUBMITTED lasts only until the entity runs; the state is set by hand to cancel from it.
        const submitted = yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "c-submitted")
        yield* waitFor(tenant, submitted.json.transactionId, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE transactions SET status = 'SUBMITTED', sub_status = NULL WHERE id = ${submitted.json.transactionId}`
        assert.strictEqual((yield* cancel(submitted.json.transactionId)).status, 200)
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), { available: (10n ** 18n).toString(), frozen: "0" })
        yield* devnet("ETH_SEPOLIA", { hotWalletBalance: { [eth]: hotWalletBalanceDefault } })

        // Signed and broadcast: too late.
        const sent = yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "c-sent")
        yield* waitFor(tenant, sent.json.transactionId, "CONFIRMING")
        expectError(yield* cancel(sent.json.transactionId), 409, "INVALID_STATE", "withdrawal can no longer be cancelled")
        assert.strictEqual((yield* getTransaction(tenant, sent.json.transactionId)).status, "CONFIRMING")
        // Another tenant sees none of it.
        const other = yield* provisionTenant()
        expectError(yield* call(other, "POST", `/v1/transactions/${sent.json.transactionId}/cancel`), 404, "NOT_FOUND")
        expectError(yield* call(other, "GET", `/v1/transactions/${sent.json.transactionId}`), 404, "NOT_FOUND")
      }))
  })

  describe("approvals and policy", () => {
    it.effect("above withdrawalApprovalAbove: approve goes on to QUEUED and on chain; reject is REJECTED_BY_OPERATOR and released", () =>
      Effect.gen(function*() {
        const ops = yield* opsClient
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { withdrawFees: { [eth]: tenantFee.toString() }, withdrawalApprovalAbove: { [eth]: (10n ** 16n).toString() } })
        const payer = yield* walletOf(tenant, "carol", "ETH_SEPOLIA")
        yield* fund(tenant, payer.walletId, eth, 10n ** 18n)
        const atThreshold = yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "a-at")
        yield* waitFor(tenant, atThreshold.json.transactionId, "CONFIRMING")

        const approvedOne = yield* withdraw(tenant, payer.walletId, eth, ethTo, 2n * 10n ** 16n, "a-approve")
        const id = approvedOne.json.transactionId
        yield* waitFor(tenant, id, "PENDING_AUTHORIZATION")
        const approved = yield* ops.manual.approve({ params: { tenantId: tenant.tenantId, id } }).pipe(Effect.orDie)
        assert.strictEqual(approved.status, "QUEUED")
        yield* waitFor(tenant, id, "CONFIRMING")
        assert.deepStrictEqual(yield* statusEvents(tenant, id), [
          "CREATED:SUBMITTED/",
          "UPDATED:PENDING_AUTHORIZATION/",
          "UPDATED:QUEUED/",
          "UPDATED:PENDING_SIGNATURE/",
          "UPDATED:CONFIRMING/"
        ])
        const twice = yield* Effect.flip(ops.manual.approve({ params: { tenantId: tenant.tenantId, id } }))
        assert.strictEqual(twice._tag, "InvalidState")

        const rejectedOne = yield* withdraw(tenant, payer.walletId, eth, ethTo, 3n * 10n ** 16n, "a-reject")
        yield* waitFor(tenant, rejectedOne.json.transactionId, "PENDING_AUTHORIZATION")
        const availableBefore = BigInt((yield* balance(tenant, payer.walletId, eth)).available)
        const rejected = yield* ops.manual.reject({ params: { tenantId: tenant.tenantId, id: rejectedOne.json.transactionId } })
          .pipe(Effect.orDie)
        assert.deepStrictEqual([rejected.status, rejected.subStatus], ["REJECTED", "REJECTED_BY_OPERATOR"])
        assert.strictEqual(
          BigInt((yield* balance(tenant, payer.walletId, eth)).available),
          availableBefore + 3n * 10n ** 16n + tenantFee
        )
        // Another tenant's operator path names no such transaction.
        const other = yield* provisionTenant()
        const foreign = yield* Effect.flip(ops.manual.approve({ params: { tenantId: other.tenantId, id: rejectedOne.json.transactionId } }))
        assert.strictEqual(foreign._tag, "NotFound")
      }))

    it.effect("a blocked destination is no HTTP error: the withdrawal ends REJECTED / BLOCKED_BY_POLICY, unfrozen", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        yield* settings(tenant, { blockedAddresses: [ethTo] })
        const payer = yield* walletOf(tenant, "dave", "ETH_SEPOLIA")
        yield* fund(tenant, payer.walletId, eth, 10n ** 18n)
        const response = yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "b-1")
        assert.strictEqual(response.status, 202, response.text)
        assert.strictEqual(response.json.status, "SUBMITTED")
        yield* waitFor(tenant, response.json.transactionId, "REJECTED", "BLOCKED_BY_POLICY")
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, eth), { available: (10n ** 18n).toString(), frozen: "0" })
        assert.deepStrictEqual(yield* statusEvents(tenant, response.json.transactionId), [
          "CREATED:SUBMITTED/",
          "UPDATED:REJECTED/BLOCKED_BY_POLICY"
        ])
        assert.isUndefined((yield* signedOf(response.json.transactionId)).signed_raw ?? undefined)
      }))

    it.effect("more than the available balance: 422 INSUFFICIENT_BALANCE, nothing created", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "erin", "ETH_SEPOLIA")
        yield* fund(tenant, payer.walletId, eth, 10n ** 16n)
        expectError(yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "i-1"), 422, "INSUFFICIENT_BALANCE")
        const [count] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM transactions WHERE tenant_id = ${tenant.tenantId}`
        assert.strictEqual(count!.n, 0)
      }))
  })

  describe("the platform and the chain", () => {
    it.effect("the hot wallet short: QUEUED / INSUFFICIENT_FUNDS_PLATFORM, then on chain once PATCH hotWalletBalance covers it", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const bnb = "BSC_TESTNET_BNB"
        const payer = yield* walletOf(tenant, "fay", "BSC_TESTNET")
        yield* fund(tenant, payer.walletId, bnb, 10n ** 18n)
        const state = yield* devnet("BSC_TESTNET", { hotWalletBalance: { [bnb]: 10n ** 15n } })
        assert.strictEqual(state.hotWalletBalance[bnb], (10n ** 15n).toString())
        const response = yield* withdraw(tenant, payer.walletId, bnb, ethTo, 5n * 10n ** 16n, "h-1")
        const id = response.json.transactionId
        yield* waitFor(tenant, id, "QUEUED", "INSUFFICIENT_FUNDS_PLATFORM")
        assert.strictEqual((yield* devnet("BSC_TESTNET")).hotWalletBalance[bnb], (10n ** 15n).toString())
        yield* devnet("BSC_TESTNET", { hotWalletBalance: { [bnb]: 10n ** 18n } })
        const confirming = yield* waitFor(tenant, id, "CONFIRMING")
        assert.isString(confirming.txHash)
        const networkFee = BigInt((yield* devnet("BSC_TESTNET")).networkFeeRaw)
        assert.strictEqual((yield* devnet("BSC_TESTNET")).hotWalletBalance[bnb], (10n ** 18n - 5n * 10n ** 16n - networkFee).toString())
        assert.deepStrictEqual(yield* statusEvents(tenant, id), [
          "CREATED:SUBMITTED/",
          "UPDATED:QUEUED/",
          "UPDATED:QUEUED/INSUFFICIENT_FUNDS_PLATFORM",
          "UPDATED:PENDING_SIGNATURE/",
          "UPDATED:CONFIRMING/"
        ])
        yield* devnet("BSC_TESTNET", { hotWalletBalance: { [bnb]: hotWalletBalanceDefault } })
      }))

    it.effect("broadcastFails: FAILED / BROADCAST_FAILED with the funds returned; a custom networkFeeRaw is what completes", () =>
      Effect.gen(function*() {
        const tenant = yield* provisionTenant()
        const bnb = "BSC_TESTNET_BNB"
        const payer = yield* walletOf(tenant, "gus", "BSC_TESTNET")
        yield* fund(tenant, payer.walletId, bnb, 10n ** 18n)
        const state = yield* devnet("BSC_TESTNET", { broadcastFails: true, networkFeeRaw: 42_000_000_000_000n })
        assert.isTrue(state.broadcastFails)
        const failed = yield* withdraw(tenant, payer.walletId, bnb, ethTo, 5n * 10n ** 16n, "f-1")
        yield* waitFor(tenant, failed.json.transactionId, "FAILED", "BROADCAST_FAILED")
        assert.deepStrictEqual(yield* balance(tenant, payer.walletId, bnb), { available: (10n ** 18n).toString(), frozen: "0" })
        assert.deepStrictEqual(yield* statusEvents(tenant, failed.json.transactionId), [
          "CREATED:SUBMITTED/",
          "UPDATED:QUEUED/",
          "UPDATED:PENDING_SIGNATURE/",
          "UPDATED:FAILED/BROADCAST_FAILED"
        ])
        // Each broadcast is counted once: a refused one on its own, an accepted one by the CONFIRMING transition.
        assert.strictEqual((yield* signedOf(failed.json.transactionId)).broadcasts, 1)
        yield* devnet("BSC_TESTNET", { broadcastFails: false })
        const ok = yield* withdraw(tenant, payer.walletId, bnb, ethTo, 5n * 10n ** 16n, "f-2")
        yield* waitFor(tenant, ok.json.transactionId, "CONFIRMING")
        assert.strictEqual((yield* signedOf(ok.json.transactionId)).broadcasts, 1)
        yield* mine("BSC_TESTNET", 15)
        const completed = yield* getTransaction(tenant, ok.json.transactionId)
        assert.strictEqual(completed.status, "COMPLETED")
        assert.strictEqual(completed.networkFeeRaw, "42000000000000")
        yield* devnet("BSC_TESTNET", { networkFeeRaw: 21_000_000_000_000n })
      }))

    it.effect("TRON: identical withdrawals on one reference block are distinct transactions, all broadcast without a block between", () =>
      Effect.gen(function*() {
        // No nonce on TRON: the same HOT, recipient, asset and amount on one block would be one hash, and all but the
        // first waited a block each (sending/TronPayloadSpacing.ts).
        const tenant = yield* provisionTenant()
        const { walletId } = yield* walletOf(tenant, "twins", "TRON_NILE")
        yield* fund(tenant, walletId, "TRON_NILE_TRX", 500_000_000n)
        const ids: Array<string> = []
        for (let index = 0; index < 4; index++) {
          const created = yield* call(tenant, "POST", "/v1/transactions", {
            assetId: "TRON_NILE_TRX",
            source: { type: "WALLET", id: walletId },
            destination: { type: "ONE_TIME_ADDRESS", oneTimeAddress: { address: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7" } },
            amountRaw: "15000000",
            externalTxId: `tron-twin-${index}`
          })
          assert.strictEqual(created.status, 202, created.text)
          ids.push(created.json.withdrawalId as string)
        }
        const sent = yield* Effect.forEach(ids, (id) => waitFor(tenant, id, "CONFIRMING"))
        const hashes = new Set(sent.map((transaction) => transaction.txHash))
        assert.strictEqual(hashes.size, 4, JSON.stringify([...hashes]))
      }))

    it.effect("a crash between storing the signature and broadcasting: the handler run twice gives the same bytes to the node once (broadcast claim), never re-signs", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const processor = yield* WithdrawalProcessor
        const tenant = yield* provisionTenant()
        const payer = yield* walletOf(tenant, "hal", "ETH_SEPOLIA")
        yield* fund(tenant, payer.walletId, eth, 10n ** 18n)
        const response = yield* withdraw(tenant, payer.walletId, eth, ethTo, 10n ** 16n, "r-1")
        const id = response.json.transactionId
        yield* waitFor(tenant, id, "CONFIRMING")
        const signed = yield* signedOf(id)
        const hot = yield* hotAddress("ETH_SEPOLIA")
        const [nonceBefore] = yield* sql<{ next_nonce: string }>`
          SELECT next_nonce::text AS next_nonce FROM devnet_nonces WHERE network_key = 'ETH_SEPOLIA' AND address = ${hot}`
        // As if the process had died after storing the signature, before the broadcast's claim and its status change.
        const diedAt = (claim: "unclaimed" | "claimed now" | "claimed long ago") =>
          Effect.gen(function*() {
            yield* sql`UPDATE transactions SET status = 'PENDING_SIGNATURE', tx_hash = NULL WHERE id = ${id}`
            yield* sql`DELETE FROM devnet_transfers WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${signed.signed_tx_hash}`
            yield* sql`DELETE FROM devnet_broadcasts WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${signed.signed_tx_hash}`
            const claimedAt = claim === "unclaimed"
              ? null
              : new Date(Date.now() - (claim === "claimed now" ? 0 : broadcastClaimGraceMillis + 5_000))
            yield* sql`UPDATE outgoing_versions SET broadcast_claimed_at = ${claimedAt},
                broadcast_claims = ${claim === "unclaimed" ? 0 : 1}
              WHERE tx_hash = ${signed.signed_tx_hash}`
          })
        const nodeCalls = sql<{ broadcasts: number }>`
          SELECT broadcasts FROM devnet_broadcasts WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${signed.signed_tx_hash}`
          .pipe(Effect.map((rows) => rows[0]?.broadcasts ?? 0))
        yield* diedAt("unclaimed")
        // At-least-once delivery: the handler runs twice (concurrently, as on two runners after a freeze). One claims
        // the broadcast (sql/0029) and gives the bytes to the node; the other finds them claimed, asks the node, and
        // moves on when the node holds them, or waits (PENDING_SIGNATURE) when it asked before they got there.
        const outcomes = yield* Effect.all([processor.process(id), processor.process(id)], { concurrency: 2 })
        assert.include(outcomes, "CONFIRMING")
        for (const outcome of outcomes) assert.oneOf(outcome, ["CONFIRMING", "PENDING_SIGNATURE"])
        assert.strictEqual(yield* processor.process(id), "CONFIRMING")
        assert.strictEqual(yield* nodeCalls, 1, "the bytes went to the node once")
        const again = yield* signedOf(id)
        assert.strictEqual(again.signed_raw, signed.signed_raw)
        assert.strictEqual(again.signed_tx_hash, signed.signed_tx_hash)
        const [nonceAfter] = yield* sql<{ next_nonce: string }>`
          SELECT next_nonce::text AS next_nonce FROM devnet_nonces WHERE network_key = 'ETH_SEPOLIA' AND address = ${hot}`
        assert.strictEqual(nonceAfter!.next_nonce, nonceBefore!.next_nonce, "no new nonce: not signed again")
        const broadcasts = yield* sql<{ raw: string }>`
          SELECT raw FROM devnet_broadcasts WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${signed.signed_tx_hash}`
        assert.deepStrictEqual(broadcasts.map((row) => row.raw), [signed.signed_raw])
        const transfers = yield* sql`SELECT 1 FROM devnet_transfers WHERE network_key = 'ETH_SEPOLIA' AND tx_hash = ${signed.signed_tx_hash}`
        assert.strictEqual(transfers.length, 1)
        assert.strictEqual((yield* getTransaction(tenant, id)).txHash, signed.signed_tx_hash)
        // Died after claiming, before the node got the bytes: within the claim's grace nobody else sends them (the
        // claimer may be frozen, about to); once it is past, the next attempt asks the node, finds them unknown and
        // broadcasts them.
        yield* diedAt("claimed now")
        assert.strictEqual(yield* processor.process(id), "PENDING_SIGNATURE")
        assert.strictEqual(yield* nodeCalls, 0, "a fresh claim of another is left to it")
        yield* diedAt("claimed long ago")
        assert.strictEqual(yield* processor.process(id), "CONFIRMING")
        assert.strictEqual(yield* nodeCalls, 1, "a stale claim's bytes unknown to the node are broadcast again")
        // The node holds them: another attempt (a process waking up, its claim stale by now) sends nothing.
        yield* sql`UPDATE transactions SET status = 'PENDING_SIGNATURE', tx_hash = NULL WHERE id = ${id}`
        yield* sql`UPDATE outgoing_versions SET broadcast_claimed_at = ${new Date(Date.now() - broadcastClaimGraceMillis - 5_000)}
          WHERE tx_hash = ${signed.signed_tx_hash}`
        assert.strictEqual(yield* processor.process(id), "CONFIRMING")
        assert.strictEqual(yield* nodeCalls, 1, "held by the node: not sent again")
        // The signature columns can never change (the database refuses).
        const refused = yield* Effect.exit(sql`UPDATE withdrawals SET signed_raw = 'other' WHERE transaction_id = ${id}`)
        assert.strictEqual(refused._tag, "Failure")

        // A reorganization drops the block: still CONFIRMING, the same bytes go back to the chain, then it completes.
        yield* mine("ETH_SEPOLIA", 2)
        yield* Effect.flatMap(opsClient, (ops) => ops.devnet.reorg({ params: { networkKey: "ETH_SEPOLIA" }, payload: { depth: 2 } }))
          .pipe(Effect.orDie)
        assert.strictEqual((yield* getTransaction(tenant, id)).status, "CONFIRMING")
        const requeued = yield* sql<{ raw: string }>`
          SELECT b.raw FROM devnet_transfers t JOIN devnet_broadcasts b USING (network_key, tx_hash)
          WHERE t.network_key = 'ETH_SEPOLIA' AND t.tx_hash = ${signed.signed_tx_hash} AND t.block_height IS NULL`
        assert.deepStrictEqual(requeued.map((row) => row.raw), [signed.signed_raw])
        yield* mine("ETH_SEPOLIA", 12)
        assert.strictEqual((yield* getTransaction(tenant, id)).status, "COMPLETED")
        assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_SETTLE"), 1)
      }))
  })
})
