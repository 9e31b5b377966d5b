/**
 * The simulated chain's side of a withdrawal (ChainClient's WithdrawalChain): whether the hot wallet covers it, the
 * network fee, the parameters the signer needs per family, and the broadcast. A broadcast records the signed bytes
 * by hash, debits the hot wallet once, and puts the transfer from the hot address in the next block; the same bytes
 * broadcast again are accepted without a second debit, and put back in the mempool when a reorganization dropped
 * their block.
 */
import { base58 } from "@scure/base"
import { Effect, Schema } from "effect"
import { createHash } from "node:crypto"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../catalog/Catalog.ts"
import { decodeFirstRow, decodeSingleRow, Nullable, Numeric, Text, Timestamp } from "../../db/RowSchemas.ts"
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
const broadcastRow = decodeFirstRow(Schema.Struct({ raw: Text }), "SimulatedWithdrawalChain.broadcast")
const inclusionRow = decodeFirstRow(
  Schema.Struct({ block_height: Nullable(Numeric) }),
  "SimulatedWithdrawalChain.inclusion"
)

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

      const broadcast = (signed: SignedWithdrawal) =>
        sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          const at = yield* now
          const known = yield* sql`
            SELECT raw FROM devnet_broadcasts WHERE network_key = ${networkKey} AND tx_hash = ${signed.txHash} FOR UPDATE`
            .pipe(Effect.flatMap(broadcastRow))
          // Bytes the network already accepted stay accepted; only a new transaction can be rejected.
          if (known === undefined && (yield* networkSettings(networkKey)).broadcastFails) {
            return yield* new BroadcastRejected({ networkKey, message: "the simulated network rejects broadcasts" })
          }
          if (known !== undefined) {
            if (known.raw !== signed.raw) {
              return yield* Effect.die(new Error(`transaction ${signed.txHash} broadcast again with other bytes`))
            }
            yield* sql`UPDATE devnet_broadcasts SET broadcasts = broadcasts + 1
              WHERE network_key = ${networkKey} AND tx_hash = ${signed.txHash}`
          } else {
            const balances = yield* hotWalletBalances(networkKey)
            const needs = hotWalletNeeds(signed, signed.networkFee)
            for (const [assetId, need] of needs) {
              if ((balances[assetId] ?? 0n) < need) {
                return yield* new ChainUnavailable({ networkKey, message: `hot wallet cannot pay ${need} ${assetId}` })
              }
            }
            for (const [assetId, need] of needs) {
              yield* sql`
                INSERT INTO devnet_hot_wallet_balances (network_key, asset_id, balance)
                VALUES (${networkKey}, ${assetId}, ${((balances[assetId] ?? 0n) - need).toString()})
                ON CONFLICT (network_key, asset_id) DO UPDATE SET balance = EXCLUDED.balance`
            }
            yield* sql`INSERT INTO devnet_broadcasts (network_key, tx_hash, raw, broadcasts, created_at)
              VALUES (${networkKey}, ${signed.txHash}, ${signed.raw}, 1, ${at})`
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

      return { hotWalletCovers, networkFee, withdrawalParameters, broadcast, inclusion }
    }

    return withdrawalChain
  })
