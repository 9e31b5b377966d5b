/**
 * Token withdrawals end to end on the simulated chain (docs/transfers.md "On-chain withdrawals"): ERC-20, TRC-20 and
 * SPL. POST /v1/transactions to an external address, the entity takes it to CONFIRMING, blocks are mined to
 * COMPLETED. The broadcast bytes are decoded independently of the signing code (as test/signer/TransactionSigning
 * does): a token transfer of exactly the amount to the destination, signed by the platform HOT address. The payer's
 * token is frozen then consumed, the withdrawal fee goes to FEES in the token, and the network fee is paid and booked
 * in the network's NATIVE coin (NETWORK_FEES), never in the token.
 */
import { assert, describe, layer } from "@effect/vitest"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { base58 } from "@scure/base"
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  decodeTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID
} from "@solana/spl-token"
import { Keypair, PublicKey, Transaction as SolTransaction } from "@solana/web3.js"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { utils as tronUtils, TronWeb } from "tronweb"
import { decodeFunctionData, erc20Abi, keccak256, parseTransaction, recoverTransactionAddress } from "viem"
import { makeTestAppLayer, provisionTenant } from "../support/TestApp.ts"
import {
  balance,
  devnet,
  entryCount,
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
import { decodeTronRaw, recoverTronAddress } from "../support/TronRaw.ts"

interface Decoded {
  readonly from: string
  readonly to: string
  readonly amount: bigint
  readonly txHash: string
  /** The fee the transaction itself commits to, where the bytes carry one (EVM: gas × maxFeePerGas). */
  readonly networkFee?: bigint
}

/** Decodes a token transfer from the raw bytes alone; asserts it is a call of the token's contract or program. */
const decoders: Record<string, (raw: string, contract: string) => Effect.Effect<Decoded>> = {
  EVM: (raw, contract) =>
    Effect.gen(function*() {
      const serialized = raw as `0x02${string}`
      const parsed = parseTransaction(serialized)
      assert.strictEqual(parsed.type, "eip1559")
      assert.strictEqual(parsed.chainId, 11_155_111)
      assert.strictEqual(parsed.to?.toLowerCase(), contract.toLowerCase(), "a call of the token contract")
      assert.strictEqual(parsed.value ?? 0n, 0n, "no native value moves with a token transfer")
      assert.strictEqual(parsed.gas, 65_000n)
      const call = decodeFunctionData({ abi: erc20Abi, data: parsed.data! })
      assert.strictEqual(call.functionName, "transfer")
      const from = (yield* Effect.promise(() => recoverTransactionAddress({ serializedTransaction: serialized }))).toLowerCase()
      return {
        from,
        to: String(call.args![0]).toLowerCase(),
        amount: call.args![1] as bigint,
        txHash: keccak256(serialized),
        networkFee: parsed.gas! * parsed.maxFeePerGas!
      }
    }),
  TRON: (raw, contract) =>
    Effect.sync(() => {
      const { rawData, signatures } = decodeTronRaw(raw)
      const hash = sha256(rawData)
      assert.lengthOf(signatures, 1)
      const decoded = tronUtils.deserializeTx.deserializeTransaction("TriggerSmartContract", bytesToHex(rawData)) as any
      assert.lengthOf(decoded.contract, 1)
      const value = decoded.contract[0].parameter.value
      assert.strictEqual(TronWeb.address.fromHex(value.contract_address), contract, "a call of the TRC-20 contract")
      assert.strictEqual(String(value.call_value ?? 0), "0")
      // docs/transfers.md: a 100 TRX fee limit for tokens.
      assert.strictEqual(String(decoded.fee_limit), "100000000")
      const call = decodeFunctionData({ abi: erc20Abi, data: `0x${String(value.data).toLowerCase()}` })
      assert.strictEqual(call.functionName, "transfer")
      const from = recoverTronAddress(signatures[0]!, hash)
      assert.strictEqual(TronWeb.address.fromHex(value.owner_address), from, "the owner is the signer")
      return {
        from,
        to: TronWeb.address.fromHex(`41${(call.args[0] as string).slice(2)}`),
        amount: call.args[1] as bigint,
        txHash: bytesToHex(hash)
      }
    }),
  SOL: (raw, contract) =>
    Effect.sync(() => {
      const transaction = SolTransaction.from(Buffer.from(raw, "base64"))
      assert.isTrue(transaction.verifySignatures(), "every required signature verifies")
      assert.lengthOf(transaction.signatures, 1)
      const owner = transaction.feePayer!
      const mint = new PublicKey(contract)
      assert.lengthOf(transaction.instructions, 2)
      const [createAccount, transfer] = transaction.instructions
      const decoded = decodeTransferCheckedInstruction(transfer!, TOKEN_PROGRAM_ID)
      assert.strictEqual(decoded.keys.mint.pubkey.toBase58(), contract)
      assert.strictEqual(decoded.keys.owner.pubkey.toBase58(), owner.toBase58())
      assert.strictEqual(
        decoded.keys.source.pubkey.toBase58(),
        getAssociatedTokenAddressSync(mint, owner).toBase58(),
        "from the owner's own token account"
      )
      assert.strictEqual(decoded.data.decimals, 6)
      // The destination token account must be the associated account of some wallet: find that wallet in the
      // account-creating instruction (accounts: payer, associated account, owner, mint, ...), and check both match.
      const reference = createAssociatedTokenAccountIdempotentInstruction(
        owner,
        decoded.keys.destination.pubkey,
        createAccount!.keys[2]!.pubkey,
        mint
      )
      assert.strictEqual(createAccount!.programId.toBase58(), reference.programId.toBase58())
      assert.deepStrictEqual(createAccount!.keys.map((key) => key.pubkey.toBase58()), reference.keys.map((key) => key.pubkey.toBase58()))
      assert.strictEqual(createAccount!.data.toString("hex"), reference.data.toString("hex"))
      const to = createAccount!.keys[2]!.pubkey
      assert.strictEqual(decoded.keys.destination.pubkey.toBase58(), getAssociatedTokenAddressSync(mint, to).toBase58())
      // And byte for byte what @solana/spl-token builds for the same transfer.
      const expected = createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(mint, owner),
        mint,
        getAssociatedTokenAddressSync(mint, to),
        owner,
        BigInt(decoded.data.amount),
        6
      )
      assert.strictEqual(transfer!.data.toString("hex"), expected.data.toString("hex"))
      return {
        from: owner.toBase58(),
        to: to.toBase58(),
        amount: BigInt(decoded.data.amount),
        txHash: base58.encode(transaction.signature!)
      }
    })
}

const tokens = [
  {
    family: "EVM",
    standard: "ERC-20",
    networkKey: "ETH_SEPOLIA",
    assetId: "ETH_SEPOLIA_USDT",
    nativeAssetId: "ETH_SEPOLIA_ETH",
    contract: "0xaa8e23fb1079ea71e0a56f48a2aa51851d8433d0",
    to: "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
    amount: 25_000_000n,
    fee: 3_000_000n,
    blocksToComplete: 12
  },
  {
    family: "TRON",
    standard: "TRC-20",
    networkKey: "TRON_NILE",
    assetId: "TRON_NILE_USDT",
    nativeAssetId: "TRON_NILE_TRX",
    contract: "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf",
    to: "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
    amount: 25_000_000n,
    fee: 2_000_000n,
    blocksToComplete: 20
  },
  {
    family: "SOL",
    standard: "SPL",
    networkKey: "SOL_DEVNET",
    assetId: "SOL_DEVNET_USDC",
    nativeAssetId: "SOL_DEVNET_SOL",
    contract: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
    to: Keypair.fromSeed(new Uint8Array(32).fill(7)).publicKey.toBase58(),
    amount: 25_000_000n,
    fee: 1_000_000n,
    blocksToComplete: 33
  }
] as const

layer(makeTestAppLayer(), { excludeTestServices: true })("token withdrawals", (it) => {
  describe("end to end on the simulated chain", () => {
    for (const token of tokens) {
      it.effect(`${token.standard} (${token.assetId}): a token transfer of the amount from HOT to the destination; token frozen then consumed, fee to FEES, network fee in ${token.nativeAssetId}`, () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const tenant = yield* provisionTenant()
          yield* settings(tenant, { withdrawFees: { [token.assetId]: token.fee.toString() } })
          const payer = yield* walletOf(tenant, "tina", token.networkKey)
          const funded = token.amount * 4n
          yield* fund(tenant, payer.walletId, token.assetId, funded)
          const hot = yield* hotAddress(token.networkKey)
          const before = yield* devnet(token.networkKey)

          const response = yield* withdraw(tenant, payer.walletId, token.assetId, token.to, token.amount, `t-${token.family}`)
          assert.strictEqual(response.status, 202, response.text)
          const id = response.json.transactionId
          assert.deepStrictEqual(
            [response.json.settlement, response.json.assetId, response.json.amountRaw, response.json.feeRaw, response.json.reservedRaw],
            ["ON_CHAIN", token.assetId, token.amount.toString(), token.fee.toString(), (token.amount + token.fee).toString()]
          )
          const frozen = { available: (funded - token.amount - token.fee).toString(), frozen: (token.amount + token.fee).toString() }
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, token.assetId), frozen)
          // The payer holds no native coin and is charged none: the network fee is the platform's.
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, token.nativeAssetId), { available: "0", frozen: "0" })

          const confirming = yield* waitFor(tenant, id, "CONFIRMING")
          const signed = yield* signedOf(id)
          assert.strictEqual(confirming.txHash, signed.signed_tx_hash)
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, token.assetId), frozen, "frozen until a terminal state")

          // The bytes broadcast, decoded without the signing code.
          const decoded = yield* decoders[token.family]!(signed.signed_raw, token.contract)
          assert.strictEqual(decoded.from, hot, "signed by the platform HOT address")
          assert.strictEqual(decoded.to, token.to)
          assert.strictEqual(decoded.amount, token.amount)
          assert.strictEqual(decoded.txHash, confirming.txHash, "the txHash is the hash of the bytes")
          const [broadcast] = yield* sql<{ raw: string }>`
            SELECT raw FROM devnet_broadcasts WHERE network_key = ${token.networkKey} AND tx_hash = ${confirming.txHash}`
          assert.strictEqual(broadcast?.raw, signed.signed_raw, "the stored bytes are the broadcast bytes")
          const onChain = yield* sql<{ from_address: string; to_address: string; asset_id: string; amount: string }>`
            SELECT from_address, to_address, asset_id, amount::text AS amount FROM devnet_transfers
            WHERE network_key = ${token.networkKey} AND tx_hash = ${confirming.txHash}`
          assert.deepStrictEqual(onChain, [{ from_address: hot, to_address: token.to, asset_id: token.assetId, amount: token.amount.toString() }])

          // The hot wallet paid the token amount, and the network fee in the native coin.
          const after = yield* devnet(token.networkKey)
          const networkFee = BigInt(before.hotWalletBalance[token.nativeAssetId]!) - BigInt(after.hotWalletBalance[token.nativeAssetId]!)
          assert.isTrue(networkFee > 0n, "the native coin paid the network fee")
          assert.strictEqual(BigInt(before.hotWalletBalance[token.assetId]!) - BigInt(after.hotWalletBalance[token.assetId]!), token.amount)
          if (decoded.networkFee !== undefined) assert.strictEqual(networkFee, decoded.networkFee, "what the signed bytes commit to")
          else assert.strictEqual(networkFee, BigInt(before.networkFeeRaw))

          yield* mine(token.networkKey, token.blocksToComplete - 1)
          assert.strictEqual((yield* getTransaction(tenant, id)).status, "CONFIRMING", "one block short of the rule")
          yield* mine(token.networkKey)
          const completed = yield* getTransaction(tenant, id)
          assert.deepStrictEqual([completed.status, completed.subStatus, completed.txHash], ["COMPLETED", null, confirming.txHash])
          assert.strictEqual(completed.assetId, token.assetId)
          assert.strictEqual(completed.networkFeeRaw, networkFee.toString())
          assert.strictEqual(completed.networkFeeAssetId, token.nativeAssetId, "the network fee is in the native coin")

          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, token.assetId), {
            available: (funded - token.amount - token.fee).toString(),
            frozen: "0"
          })
          assert.deepStrictEqual(yield* balance(tenant, payer.walletId, token.nativeAssetId), { available: "0", frozen: "0" })
          assert.strictEqual(yield* tenantAccount(tenant, "FEES", token.assetId), token.fee.toString())
          assert.strictEqual(yield* tenantAccount(tenant, "FEES", token.nativeAssetId), "0")
          assert.strictEqual(yield* tenantAccount(tenant, "NETWORK_FEES", token.nativeAssetId), (-networkFee).toString())
          assert.strictEqual(yield* tenantAccount(tenant, "NETWORK_FEES", token.assetId), "0", "never booked in the token")
          // The ledger entries: frozen once, settled once, the network fee once, nothing released.
          const entries = yield* sql<{ kind: string }>`SELECT kind FROM ledger_entries WHERE reference_id = ${id} ORDER BY created_at, id`
          assert.deepStrictEqual(entries.map((entry) => entry.kind), ["WITHDRAWAL_FREEZE", "WITHDRAWAL_SETTLE", "NETWORK_FEE"])
          // Each entry in one asset: the settlement in the token, the network fee in the native coin.
          const assets = yield* sql<{ kind: string; asset_id: string }>`
            SELECT DISTINCT e.kind, a.asset_id FROM ledger_postings p JOIN ledger_entries e ON e.id = p.entry_id
            JOIN ledger_accounts a ON a.id = p.account_id WHERE e.reference_id = ${id} ORDER BY e.kind`
          assert.deepStrictEqual(assets.map((row) => [row.kind, row.asset_id]), [
            ["NETWORK_FEE", token.nativeAssetId],
            ["WITHDRAWAL_FREEZE", token.assetId],
            ["WITHDRAWAL_SETTLE", token.assetId]
          ])
          assert.deepStrictEqual(yield* statusEvents(tenant, id), [
            "CREATED:SUBMITTED/",
            "UPDATED:QUEUED/",
            "UPDATED:PENDING_SIGNATURE/",
            "UPDATED:CONFIRMING/",
            "UPDATED:COMPLETED/"
          ])
          yield* mine(token.networkKey, 2)
          assert.strictEqual(yield* entryCount(id, "WITHDRAWAL_SETTLE"), 1)
          assert.strictEqual((yield* signedOf(id)).broadcasts, 1)
        }))
    }
  })
})
