/**
 * The built-in simulated chain (operator-interface.md, "Developer chain"): every catalog network in development and
 * tests runs on it. Blocks and transfers live in PostgreSQL (sql/0006_chains.sql) so they survive a restart and every
 * process sees one chain. Nothing happens on its own: transfers wait for the next block, and blocks are mined only
 * when asked (POST /ops/devnet/{networkKey}/blocks), so tests decide exactly when a deposit confirms.
 *
 * Block hashes are random (from Entropy), so a block mined again after a reorg at the same height has a new hash,
 * as on a real chain.
 *
 * Withdrawals (sql/0008_withdrawals.sql): the platform hot wallet has a balance per asset (`hotWalletBalanceDefault`
 * until the operator sets one), each network a network fee per withdrawal and a switch that makes broadcasts fail.
 * A broadcast records the signed bytes by hash, debits the hot wallet once, and puts the transfer from the hot
 * address in the next block; the same bytes broadcast again are accepted without a second debit, and put back in
 * the mempool when a reorganization dropped their block.
 */
import { base58 } from "@scure/base"
import { Clock, Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { SqlClient } from "effect/sql"
import { Catalog } from "../../catalog/Catalog.ts"
import { Entropy } from "../../domain/Entropy.ts"
import { fromNumeric } from "../../domain/RawAmount.ts"
import {
  BroadcastRejected,
  type ChainBlock,
  type ChainClient,
  type ChainHead,
  ChainUnavailable,
  type SignedWithdrawal,
  type TransactionState,
  type WithdrawalChain,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../ChainClient.ts"
import type { ChainFamily } from "../ChainFamily.ts"

/** Blocks behind the head a network treats as final, as the real networks roughly do (TRON solidity, SOL roots). */
const finalityDepthBlocks: Readonly<Record<ChainFamily, bigint>> = { EVM: 64n, TRON: 19n, BTC: 6n, SOL: 32n }

/** One request mines at most this many blocks (operator-interface.md: `count` 1-1000). */
export const mineCountMax = 1000
/** One request rolls back at most this many blocks (operator-interface.md: `depth` 1-100). */
export const reorgDepthMax = 100

export interface SimulatedTransferRequest {
  readonly networkKey: string
  /** Normalized recipient address (the ops handler validates it for the network's family). */
  readonly to: string
  readonly assetId: string
  readonly amount: bigint
  readonly from?: string | undefined
}

export interface SimulatedChainState {
  readonly networkKey: string
  readonly height: bigint
  readonly hash: string
  readonly finalizedHeight: bigint
  readonly pendingTransfers: number
  readonly broadcastFails: boolean
  readonly networkFee: bigint
  /** Every catalog asset of the network. */
  readonly hotWalletBalance: Readonly<Record<string, bigint>>
}

export interface SimulatedChainSettings {
  readonly broadcastFails?: boolean | undefined
  readonly networkFee?: bigint | undefined
  /** Replaces the balance of the named assets; others keep theirs. */
  readonly hotWalletBalance?: Readonly<Record<string, bigint>> | undefined
}

/**
 * The hot wallet's balance of an asset the operator never set: plenty, so withdrawals in development and tests go
 * through unless a test lowers it (PATCH /ops/devnet/{networkKey} `hotWalletBalance`).
 */
export const hotWalletBalanceDefault = 10n ** 27n

/** A withdrawal's network fee until the operator sets one, in the native coin's base unit, near real networks'. */
const networkFeeDefault: Readonly<Record<ChainFamily, bigint>> = {
  EVM: 21_000n * 1_000_000_000n,
  TRON: 1_100_000n,
  BTC: 2_000n,
  SOL: 5_000n
}

/** EIP-155 chain ids of the simulated EVM networks (the real networks' ids, so signed bytes look like theirs). */
const evmChainIds: Readonly<Record<string, number>> = { ETH_SEPOLIA: 11_155_111, BSC_TESTNET: 97 }
const evmChainIdDefault = 1_337
const evmNativeGas = 21_000n
const evmTokenGas = 65_000n
const evmPriorityFeeMax = 1_000_000_000n
/** The most sun a TRC-20 call may burn (TRON feeLimit): 100 TRX. */
const tronFeeLimit = 100_000_000n
/** What the synthetic BTC input leaves over beyond amount and fee, paid back to the hot wallet as change. */
const btcChangeSatoshi = 10_000n

const bytesToHex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

export class SimulatedChain extends Context.Service<SimulatedChain, {
  /** A transfer that lands in the next block mined; returns its transaction hash. */
  readonly transfer: (request: SimulatedTransferRequest) => Effect.Effect<string>
  /** Mines `count` blocks (the first takes every pending transfer); returns the new height. */
  readonly mine: (networkKey: string, count: number) => Effect.Effect<bigint>
  /** Drops the last `depth` blocks and the transfers in them (never the genesis); returns the new height. */
  readonly reorg: (networkKey: string, depth: number) => Effect.Effect<bigint>
  readonly state: (networkKey: string) => Effect.Effect<SimulatedChainState>
  /** PATCH /ops/devnet/{networkKey}: broadcast failures, the network fee, the hot wallet's balances. */
  readonly configure: (networkKey: string, settings: SimulatedChainSettings) => Effect.Effect<SimulatedChainState>
  /** The ChainClient view of one network. */
  readonly client: (networkKey: string) => ChainClient
}>()("coffer/SimulatedChain") {
  static readonly layer = Layer.effect(
    SimulatedChain,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const entropy = yield* Entropy
      const catalog = yield* Catalog

      const familyOf = (networkKey: string): ChainFamily => {
        const network = catalog.network(networkKey)
        if (network === undefined) throw new Error(`no network ${networkKey} in the catalog`)
        return network.chainFamily
      }

      const randomHash = Effect.map(entropy.bytes(32), bytesToHex)

      /** A transaction hash in the family's usual notation. */
      const transactionHash = (family: ChainFamily) =>
        family === "SOL"
          ? Effect.map(entropy.bytes(64), (bytes) => base58.encode(bytes))
          : family === "EVM"
          ? Effect.map(randomHash, (hash) => `0x${hash}`)
          : randomHash

      /**
       * Serializes writers of one network's chain (mining, reorgs, transfers) across processes, for the
       * transaction; readers need no lock.
       */
      const lockNetwork = (networkKey: string) =>
        sql`SELECT pg_advisory_xact_lock(hashtextextended(${`coffer-devnet:${networkKey}`}, 0))`

      const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

      const ensureGenesis = (networkKey: string) =>
        Effect.gen(function*() {
          const hash = yield* randomHash
          yield* sql`
            INSERT INTO devnet_blocks (network_key, height, hash, parent_hash, created_at)
            VALUES (${networkKey}, 0, ${hash}, ${"0".repeat(64)}, ${yield* now})
            ON CONFLICT DO NOTHING`
        })

      const tip = (networkKey: string) =>
        Effect.gen(function*() {
          yield* ensureGenesis(networkKey)
          const [row] = yield* sql<{ height: string; hash: string }>`
            SELECT b.height::text AS height, b.hash FROM devnet_blocks b
            WHERE b.network_key = ${networkKey} ORDER BY b.height DESC LIMIT 1`
          return { height: BigInt(row!.height), hash: row!.hash }
        })

      const transfer = Effect.fn("SimulatedChain.transfer")(function*(request: SimulatedTransferRequest) {
        const txHash = yield* transactionHash(familyOf(request.networkKey))
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(request.networkKey)
          yield* sql`
            INSERT INTO devnet_transfers (network_key, tx_hash, output_index, from_address, to_address, asset_id,
              amount, block_height, created_at)
            VALUES (${request.networkKey}, ${txHash}, 0, ${request.from ?? null}, ${request.to}, ${request.assetId},
              ${request.amount.toString()}, NULL, ${yield* now})`
        })).pipe(Effect.orDie)
        return txHash
      })

      const mine = Effect.fn("SimulatedChain.mine")(function*(networkKey: string, count: number) {
        if (!Number.isSafeInteger(count) || count < 1 || count > mineCountMax) {
          return yield* Effect.die(new RangeError(`mine count must be 1-${mineCountMax}, got ${count}`))
        }
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          let { height, hash } = yield* tip(networkKey)
          const createdAt = yield* now
          for (let mined = 0; mined < count; mined++) {
            const next = yield* randomHash
            height += 1n
            yield* sql`
              INSERT INTO devnet_blocks (network_key, height, hash, parent_hash, created_at)
              VALUES (${networkKey}, ${height.toString()}, ${next}, ${hash}, ${createdAt})`
            if (mined === 0) {
              yield* sql`UPDATE devnet_transfers SET block_height = ${height.toString()}
                WHERE network_key = ${networkKey} AND block_height IS NULL`
            }
            hash = next
          }
          return height
        })).pipe(Effect.orDie)
      })

      const reorg = Effect.fn("SimulatedChain.reorg")(function*(networkKey: string, depth: number) {
        if (!Number.isSafeInteger(depth) || depth < 1 || depth > reorgDepthMax) {
          return yield* Effect.die(new RangeError(`reorg depth must be 1-${reorgDepthMax}, got ${depth}`))
        }
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          const { height } = yield* tip(networkKey)
          // The genesis stays: a chain always has a block.
          const newHeight = height - BigInt(depth) < 0n ? 0n : height - BigInt(depth)
          // Transfers in the dropped blocks go with them (ON DELETE CASCADE): "their transfers are gone".
          yield* sql`DELETE FROM devnet_blocks WHERE network_key = ${networkKey} AND height > ${newHeight.toString()}`
          return newHeight
        })).pipe(Effect.orDie)
      })

      const head = (networkKey: string): Effect.Effect<ChainHead> =>
        Effect.map(tip(networkKey), ({ height, hash }) => {
          const depth = finalityDepthBlocks[familyOf(networkKey)]
          return { height, hash, finalizedHeight: height > depth ? height - depth : 0n }
        }).pipe(Effect.orDie)

      const state = Effect.fn("SimulatedChain.state")(function*(networkKey: string) {
        const current = yield* head(networkKey)
        const [pending] = yield* sql<{ count: number }>`
          SELECT count(*)::int AS count FROM devnet_transfers WHERE network_key = ${networkKey} AND block_height IS NULL`
          .pipe(Effect.orDie)
        const settings = yield* networkSettings(networkKey)
        return {
          networkKey,
          height: current.height,
          hash: current.hash,
          finalizedHeight: current.finalizedHeight,
          pendingTransfers: pending!.count,
          broadcastFails: settings.broadcastFails,
          networkFee: settings.networkFee,
          hotWalletBalance: yield* hotWalletBalances(networkKey)
        }
      })

      const networkSettings = (networkKey: string) =>
        Effect.map(
          sql<{ broadcast_fails: boolean; network_fee: string | null }>`
            SELECT broadcast_fails, network_fee::text AS network_fee FROM devnet_networks WHERE network_key = ${networkKey}`,
          ([row]) => ({
            broadcastFails: row?.broadcast_fails ?? false,
            networkFee: row?.network_fee == null ? networkFeeDefault[familyOf(networkKey)] : BigInt(row.network_fee)
          })
        ).pipe(Effect.orDie)

      const hotWalletBalances = (networkKey: string) =>
        Effect.gen(function*() {
          const rows = yield* sql<{ asset_id: string; balance: string }>`
            SELECT asset_id, balance::text AS balance FROM devnet_hot_wallet_balances WHERE network_key = ${networkKey}`
            .pipe(Effect.orDie)
          const set = new Map(rows.map((row) => [row.asset_id, BigInt(row.balance)]))
          const balances: Record<string, bigint> = {}
          for (const asset of catalog.assets) {
            if (asset.networkKey === networkKey) balances[asset.assetId] = set.get(asset.assetId) ?? hotWalletBalanceDefault
          }
          return balances
        })

      const configure = Effect.fn("SimulatedChain.configure")(function*(
        networkKey: string,
        settings: SimulatedChainSettings
      ) {
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* lockNetwork(networkKey)
          yield* sql`INSERT INTO devnet_networks (network_key) VALUES (${networkKey}) ON CONFLICT DO NOTHING`
          if (settings.broadcastFails !== undefined) {
            yield* sql`UPDATE devnet_networks SET broadcast_fails = ${settings.broadcastFails} WHERE network_key = ${networkKey}`
          }
          if (settings.networkFee !== undefined) {
            yield* sql`UPDATE devnet_networks SET network_fee = ${settings.networkFee.toString()} WHERE network_key = ${networkKey}`
          }
          for (const [assetId, balance] of Object.entries(settings.hotWalletBalance ?? {})) {
            yield* sql`
              INSERT INTO devnet_hot_wallet_balances (network_key, asset_id, balance)
              VALUES (${networkKey}, ${assetId}, ${balance.toString()})
              ON CONFLICT (network_key, asset_id) DO UPDATE SET balance = EXCLUDED.balance`
          }
        })).pipe(Effect.orDie)
        return yield* state(networkKey)
      })

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
                const [row] = yield* sql<{ nonce: string }>`
                  INSERT INTO devnet_nonces (network_key, address, next_nonce) VALUES (${networkKey}, ${transfer.from}, 1)
                  ON CONFLICT (network_key, address) DO UPDATE SET next_nonce = devnet_nonces.next_nonce + 1
                  RETURNING (next_nonce - 1)::text AS nonce`
                return {
                  family,
                  chainId: evmChainIds[networkKey] ?? evmChainIdDefault,
                  nonce: Number(row!.nonce),
                  gas,
                  maxFeePerGas,
                  maxPriorityFeePerGas: maxFeePerGas < evmPriorityFeeMax ? maxFeePerGas : evmPriorityFeeMax,
                  networkFee: fee
                }
              }
              case "TRON": {
                const head = yield* tip(networkKey)
                const [row] = yield* sql<{ created_at: Date }>`
                  SELECT created_at FROM devnet_blocks WHERE network_key = ${networkKey} AND height = ${head.height.toString()}`
                return {
                  family,
                  referenceBlock: { number: head.height, id: head.hash, timestamp: row!.created_at.getTime() },
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
            const [known] = yield* sql<{ raw: string }>`
              SELECT raw FROM devnet_broadcasts WHERE network_key = ${networkKey} AND tx_hash = ${signed.txHash} FOR UPDATE`
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

        const inclusionHeight = (txHash: string) =>
          Effect.map(
            sql<{ block_height: string | null }>`
              SELECT block_height::text AS block_height FROM devnet_transfers
              WHERE network_key = ${networkKey} AND tx_hash = ${txHash} LIMIT 1`,
            ([row]) => (row?.block_height == null ? undefined : BigInt(row.block_height))
          ).pipe(Effect.orDie)

        return { hotWalletCovers, networkFee, withdrawalParameters, broadcast, inclusionHeight }
      }

      const block = (networkKey: string, height: bigint): Effect.Effect<ChainBlock | undefined> =>
        Effect.gen(function*() {
          const [row] = yield* sql<{ hash: string; parent_hash: string }>`
            SELECT hash, parent_hash FROM devnet_blocks WHERE network_key = ${networkKey} AND height = ${height.toString()}`
          if (row === undefined) return undefined
          const transfers = yield* sql<{
            tx_hash: string
            output_index: number
            from_address: string | null
            to_address: string
            asset_id: string
            amount: string
          }>`
            SELECT tx_hash, output_index, from_address, to_address, asset_id, amount::text AS amount
            FROM devnet_transfers WHERE network_key = ${networkKey} AND block_height = ${height.toString()}
            ORDER BY created_at, tx_hash, output_index`
          return {
            height,
            hash: row.hash,
            parentHash: row.parent_hash,
            transfers: transfers.map((transfer) => ({
              txHash: transfer.tx_hash,
              outputIndex: transfer.output_index,
              from: transfer.from_address,
              to: transfer.to_address,
              assetId: transfer.asset_id,
              amount: fromNumeric(transfer.amount)
            }))
          }
        }).pipe(Effect.orDie)

      const transactionState = (networkKey: string, txHash: string): Effect.Effect<TransactionState> =>
        Effect.map(
          sql<{ block_height: string | null }>`
            SELECT block_height::text AS block_height FROM devnet_transfers
            WHERE network_key = ${networkKey} AND tx_hash = ${txHash} LIMIT 1`,
          ([row]) => (row === undefined ? "UNKNOWN" : row.block_height === null ? "PENDING" : "INCLUDED")
        ).pipe(Effect.orDie)

      const client = (networkKey: string): ChainClient => ({
        networkKey,
        startFromGenesis: true,
        head: head(networkKey),
        block: (height) => block(networkKey, height),
        transactionState: (txHash) => transactionState(networkKey, txHash),
        withdrawals: withdrawalChain(networkKey)
      })

      return SimulatedChain.of({ transfer, mine, reorg, state, configure, client })
    })
  )
}
