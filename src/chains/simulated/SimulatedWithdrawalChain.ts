/**
 * The simulated chain's side of a withdrawal (ChainClient's WithdrawalChain): whether the hot wallet covers it, the
 * network fee, the parameters the signer needs per family, and the broadcast. A broadcast records the signed bytes
 * by hash, debits the hot wallet once, and puts the transfer from the hot address in the next block; the same bytes
 * broadcast again are accepted without a second debit, and put back in the mempool when a reorganization dropped
 * their block.
 *
 * EVM nonces are kept as a real node's mempool keeps them (issue 33, sql/0031): a transaction with the sender and
 * nonce of a pending one and both fee fields at least 10 % higher displaces it (out of the mempool, its debit
 * returned; it can only come back if the slot is free again, after a reorganization took its replacement out), one
 * with lower fees is refused for now ("replacement transaction underpriced"), and a nonce already in a block refuses
 * every other transaction ("nonce too low"); one the node forgot (its block reorganized away) is displaced by any
 * transaction of its slot. So a sending pipeline may replace a stuck transaction here (`nonceReplacement`) and the
 * chain never includes both, nor debits the hot wallet for both.
 */
import { base58 } from "@scure/base"
import { Effect, Schema } from "effect"
import { createHash } from "node:crypto"
import { SqlClient } from "effect/sql"
// From viem/utils, not viem: its package index (its clients) is kept out of a start (test/e2e/StartupModules.test.ts).
import { parseTransaction } from "viem/utils"
import { Catalog } from "../../catalog/Catalog.ts"
import { decodeFirstRow, decodeRows, decodeSingleRow, Nullable, Numeric, Text, Timestamp } from "../../db/RowSchemas.ts"
import {
  BroadcastRejected,
  ChainUnavailable,
  type Inclusion,
  type SignedWithdrawal,
  type WithdrawalChain,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../ChainClient.ts"
import type { DevnetBlocks } from "./DevnetBlocks.ts"
import {
  btcChangeSatoshi,
  evmChainIdDefault,
  evmChainIds,
  evmNativeGas,
  evmPriorityFeeMax,
  evmReplacementBumpPercent,
  evmTokenGas,
  tronFeeLimit
} from "./DevnetParameters.ts"
import type { DevnetSettings } from "./DevnetSettings.ts"

// Compiled once (db/RowSchemas.ts): each query's rows decoded at this edge, a mismatch a defect naming it.
const nonceRow = decodeSingleRow(Schema.Struct({ nonce: Text }), "SimulatedWithdrawalChain.withdrawalParameters (nonce)")
const tipCreatedRow = decodeSingleRow(
  Schema.Struct({ created_at: Timestamp }),
  "SimulatedWithdrawalChain.withdrawalParameters (reference block)"
)
const broadcastRow = decodeFirstRow(
  Schema.Struct({ raw: Text, replaced_by: Nullable(Text) }),
  "SimulatedWithdrawalChain.broadcast"
)
const slotHolderRows = decodeRows(
  Schema.Struct({
    tx_hash: Text,
    raw: Text,
    asset_id: Text,
    amount: Numeric,
    network_fee: Numeric,
    pending: Schema.Boolean,
    block_height: Nullable(Numeric)
  }),
  "SimulatedWithdrawalChain.broadcast (nonce slot)"
)
const inclusionRow = decodeFirstRow(
  Schema.Struct({ block_height: Nullable(Numeric) }),
  "SimulatedWithdrawalChain.inclusion"
)

/** The nonce slot and fee fields of signed EVM bytes; undefined for bytes that are not an EVM transaction (untracked). */
const evmSlot = (raw: string) => {
  try {
    const parsed = parseTransaction(raw as `0x${string}`)
    if (parsed.nonce === undefined) return undefined
    const maxFeePerGas = parsed.maxFeePerGas ?? parsed.gasPrice ?? 0n
    return { nonce: BigInt(parsed.nonce), maxFeePerGas, maxPriorityFeePerGas: parsed.maxPriorityFeePerGas ?? maxFeePerGas }
  } catch {
    return undefined
  }
}

/** Whether `next` may displace `held` in the mempool: both fee fields raised by the bump at least (geth's rule). */
const outbids = (next: NonNullable<ReturnType<typeof evmSlot>>, held: NonNullable<ReturnType<typeof evmSlot>>) =>
  next.maxFeePerGas * 100n >= held.maxFeePerGas * (100n + evmReplacementBumpPercent) &&
  next.maxPriorityFeePerGas * 100n >= held.maxPriorityFeePerGas * (100n + evmReplacementBumpPercent)

export const makeSimulatedWithdrawalChain = (
  { familyOf, lockNetwork, now, tip }: DevnetBlocks,
  { hotWalletBalances, networkSettings }: DevnetSettings
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const catalog = yield* Catalog

    /** What the hot wallet must hold for a transfer: the amount of its asset and the fee in the native coin. */
    const hotWalletNeeds = (transfer: WithdrawalTransfer, networkFee: bigint) => {
      const nativeAssetId = catalog.network(catalog.asset(transfer.assetId)!.networkKey)!.nativeAssetId
      const needs = new Map<string, bigint>([[transfer.assetId, transfer.amount]])
      needs.set(nativeAssetId, (needs.get(nativeAssetId) ?? 0n) + networkFee)
      return needs
    }

    const withdrawalChain = (networkKey: string): WithdrawalChain => {
      const family = familyOf(networkKey)
      const hotWalletCovers = (transfer: WithdrawalTransfer, networkFee: bigint) =>
        Effect.map(hotWalletBalances(networkKey), (balances) =>
          [...hotWalletNeeds(transfer, networkFee)].every(([assetId, need]) => (balances[assetId] ?? 0n) >= need))

      const networkFee = (assetId: string) =>
        Effect.map(networkSettings(networkKey), (settings) => {
          if (family !== "EVM") return settings.networkFee
          const gas = catalog.asset(assetId)?.kind === "TOKEN" ? evmTokenGas : evmNativeGas
          // The signed transaction pays gas * maxFeePerGas at most; the fee is rounded up to a whole price.
          return gas * ((settings.networkFee + gas - 1n) / gas)
        })

      const withdrawalParameters = (transfer: WithdrawalTransfer): Effect.Effect<WithdrawalParameters> =>
        Effect.gen(function*() {
          const fee = yield* networkFee(transfer.assetId)
          switch (family) {
            case "EVM": {
              const gas = catalog.asset(transfer.assetId)?.kind === "TOKEN" ? evmTokenGas : evmNativeGas
              const maxFeePerGas = fee / gas
              // Nonces are handed out once each, in order, per sending address (a crash before the signature is
              // stored leaves a gap, which the simulated chain does not mind; a real client reads the pending
              // nonce from its node).
              const row = yield* sql`
                INSERT INTO devnet_nonces (network_key, address, next_nonce) VALUES (${networkKey}, ${transfer.from}, 1)
                ON CONFLICT (network_key, address) DO UPDATE SET next_nonce = devnet_nonces.next_nonce + 1
                RETURNING (next_nonce - 1)::text AS nonce`.pipe(Effect.flatMap(nonceRow))
              return {
                family,
                chainId: evmChainIds[networkKey] ?? evmChainIdDefault,
                nonce: Number(row.nonce),
                gas,
                maxFeePerGas,
                maxPriorityFeePerGas: maxFeePerGas < evmPriorityFeeMax ? maxFeePerGas : evmPriorityFeeMax,
                networkFee: fee
              }
            }
            case "TRON": {
              const head = yield* tip(networkKey)
              const row = yield* sql`
                SELECT created_at FROM devnet_blocks WHERE network_key = ${networkKey} AND height = ${head.height.toString()}`
                .pipe(Effect.flatMap(tipCreatedRow))
              return {
                family,
                referenceBlock: { number: head.height, id: head.hash, timestamp: row.created_at.getTime() },
                feeLimit: tronFeeLimit,
                networkFee: fee
              }
            }
            case "BTC": {
              // One synthetic output of the hot wallet, named by the withdrawal, so the same withdrawal always
              // spends the same input.
              const txid = createHash("sha256").update(`coffer-devnet-utxo:${networkKey}:${transfer.withdrawalId}`).digest("hex")
              return { family, inputs: [{ txid, vout: 0, value: transfer.amount + fee + btcChangeSatoshi }], networkFee: fee }
            }
            case "SOL": {
              const head = yield* tip(networkKey)
              return { family, recentBlockhash: base58.encode(Buffer.from(head.hash, "hex")), networkFee: fee }
            }
          }
        }).pipe(Effect.orDie)

      /** Adds `sign` × each need to the hot wallet's balances (a debit refused while it cannot pay). */
      const moveHotWallet = (needs: ReadonlyMap<string, bigint>, sign: 1n | -1n) =>
        Effect.gen(function*() {
          const balances = yield* hotWalletBalances(networkKey)
          if (sign < 0n) {
            for (const [assetId, need] of needs) {
              if ((balances[assetId] ?? 0n) < need) {
                return yield* new ChainUnavailable({ networkKey, message: `hot wallet cannot pay ${need} ${assetId}` })
              }
            }
          }
          for (const [assetId, need] of needs) {
            yield* sql`
              INSERT INTO devnet_hot_wallet_balances (network_key, asset_id, balance)
              VALUES (${networkKey}, ${assetId}, ${((balances[assetId] ?? 0n) + sign * need).toString()})
              ON CONFLICT (network_key, asset_id) DO UPDATE SET balance = EXCLUDED.balance`
          }
        })

      /**
       * The nonce slot of EVM bytes: refused while another transaction holds it in a block ("nonce too low") or
       * pending with fees this one does not outbid; the others are displaced (out of the mempool, `replaced_by` set,
       * their debit returned): a pending one it outbids, and one the node forgot (a reorganization took its block).
       */
      const takeSlot = (signed: SignedWithdrawal, slot: NonNullable<ReturnType<typeof evmSlot>>) =>
        Effect.gen(function*() {
          const holders = yield* sql`
            SELECT b.tx_hash, b.raw, b.asset_id, b.amount::text AS amount, b.network_fee::text AS network_fee,
              t.tx_hash IS NOT NULL AS pending, t.block_height::text AS block_height
            FROM devnet_broadcasts b
              LEFT JOIN devnet_transfers t ON t.network_key = b.network_key AND t.tx_hash = b.tx_hash AND t.output_index = 0
            WHERE b.network_key = ${networkKey} AND b.from_address = ${signed.from} AND b.nonce = ${slot.nonce.toString()}
              AND b.tx_hash <> ${signed.txHash} AND b.replaced_by IS NULL
            ORDER BY b.tx_hash`.pipe(Effect.flatMap(slotHolderRows))
          if (holders.some((holder) => holder.block_height !== null)) {
            return yield* new BroadcastRejected({ networkKey, message: "nonce too low", nonceUsed: true })
          }
          for (const holder of holders) {
            const held = evmSlot(holder.raw)
            if (holder.pending && held !== undefined && !outbids(slot, held)) {
              return yield* new ChainUnavailable({ networkKey, message: "replacement transaction underpriced" })
            }
          }
          for (const holder of holders) {
            yield* sql`DELETE FROM devnet_transfers
              WHERE network_key = ${networkKey} AND tx_hash = ${holder.tx_hash} AND block_height IS NULL`
            yield* sql`UPDATE devnet_broadcasts SET replaced_by = ${signed.txHash}
              WHERE network_key = ${networkKey} AND tx_hash = ${holder.tx_hash}`
            yield* moveHotWallet(
              hotWalletNeeds({ ...signed, assetId: holder.asset_id, amount: holder.amount }, holder.network_fee),
              1n
            )
          }
        })

      const broadcast = (signed: SignedWithdrawal) =>
        sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          const at = yield* now
          const known = yield* sql`
            SELECT raw, replaced_by FROM devnet_broadcasts WHERE network_key = ${networkKey} AND tx_hash = ${signed.txHash} FOR UPDATE`
            .pipe(Effect.flatMap(broadcastRow))
          // Bytes the network already accepted stay accepted; only a new transaction can be rejected.
          if (known === undefined && (yield* networkSettings(networkKey)).broadcastFails) {
            return yield* new BroadcastRejected({ networkKey, message: "the simulated network rejects broadcasts" })
          }
          if (known !== undefined && known.raw !== signed.raw) {
            return yield* Effect.die(new Error(`transaction ${signed.txHash} broadcast again with other bytes`))
          }
          const slot = family === "EVM" ? evmSlot(signed.raw) : undefined
          if (slot !== undefined) yield* takeSlot(signed, slot)
          if (known !== undefined && known.replaced_by === null) {
            yield* sql`UPDATE devnet_broadcasts SET broadcasts = broadcasts + 1
              WHERE network_key = ${networkKey} AND tx_hash = ${signed.txHash}`
          } else {
            // New, or displaced before and back in a free slot: it pays again (its debit was returned).
            yield* moveHotWallet(hotWalletNeeds(signed, signed.networkFee), -1n)
            yield* sql`INSERT INTO devnet_broadcasts (network_key, tx_hash, raw, broadcasts, created_at, from_address,
                nonce, asset_id, amount, network_fee)
              VALUES (${networkKey}, ${signed.txHash}, ${signed.raw}, 1, ${at}, ${signed.from},
                ${slot?.nonce.toString() ?? null}, ${signed.assetId}, ${signed.amount.toString()},
                ${signed.networkFee.toString()})
              ON CONFLICT (network_key, tx_hash) DO UPDATE SET broadcasts = devnet_broadcasts.broadcasts + 1,
                replaced_by = NULL`
          }
          // Into the mempool, unless the chain has it already (a reorganization may have dropped it since).
          yield* sql`
            INSERT INTO devnet_transfers (network_key, tx_hash, output_index, from_address, to_address, asset_id,
              amount, block_height, created_at)
            VALUES (${networkKey}, ${signed.txHash}, 0, ${signed.from}, ${signed.to}, ${signed.assetId},
              ${signed.amount.toString()}, NULL, ${at})
            ON CONFLICT DO NOTHING`
        })).pipe(Effect.catchTag("SqlError", Effect.die))

      // The simulated chain never fails an included transaction, and charges exactly the fee that was signed for.
      const inclusion = (txHash: string) =>
        Effect.map(
          sql`
            SELECT block_height::text AS block_height FROM devnet_transfers
            WHERE network_key = ${networkKey} AND tx_hash = ${txHash} LIMIT 1`.pipe(Effect.flatMap(inclusionRow)),
          (row): Inclusion | undefined =>
            row?.block_height == null ? undefined : { height: row.block_height, succeeded: true, networkFee: undefined }
        ).pipe(Effect.orDie)

      // EVM: the mempool above replaces by nonce, so the sending pipeline may replace a stuck version here too.
      return {
        hotWalletCovers,
        networkFee,
        withdrawalParameters,
        broadcast,
        inclusion,
        ...(family === "EVM" ? { nonceReplacement: true } : {})
      }
    }

    return withdrawalChain
  })
