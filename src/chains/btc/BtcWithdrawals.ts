/**
 * The sending side of a BTC node (ChainClient's WithdrawalChain; docs/btc.md): fee rate, coin selection with
 * reservations, the broadcast with the node's answers sorted, and the inclusion with the fee read from the chain.
 *
 * - Fee rate: `estimatesmartfee 6` in sat/vB (rounded up), at least `feeRateFloorSatPerVb` (also what is used when
 *   the node has no estimate: "Insufficient data" on a fresh node or regtest). Above the catalog's `feeRateCap`
 *   nothing is signed: ChainUnavailable, the withdrawal waits, as on EVM.
 * - Coin selection: credited deposit outputs first, oldest first (BTC has no sweeps: withdrawals are what moves
 *   them), then HOT's outputs, largest first, until amount + fee are covered. HOT's outputs are found with
 *   `scantxoutset` on HOT's script (`raw(<hex>)`, not `addr()`: a regtest node would not parse a testnet address):
 *   confirmed outputs only, so HOT's change is spendable once mined. Deposit outputs are checked with `gettxout`
 *   (unspent, mempool included, and the deposit address's script). The choice is reserved in PostgreSQL
 *   (BtcOutputBook.ts) before the parameters are returned; losing a race to another withdrawal means choosing again.
 * - Change under `changeDustSatoshis` is not made: it goes to the fee (a dust output would be refused).
 * - The fee a transaction paid is its inputs minus its outputs, read from the chain (`inclusion`).
 * - Replace-by-fee (`replacementParameters`): after `replaceAfterBlocks` blocks unincluded, the same inputs with a
 *   fee of at least 125 % of the previous one, the previous plus 1 sat/vB (BIP 125 rule 4), and the current
 *   estimate, taken from the change; never above the cap, never leaving dust change (then no change at all), and
 *   never when the inputs cannot pay it (the version keeps waiting).
 * - Conflicts (`conflicted`): an input spent in a final block by a transaction that is none of the send's versions
 *   means no version can ever be included; the pipeline then rejects the send (docs/btc.md).
 */
import * as bitcoin from "bitcoinjs-lib"
import { Effect, Schedule, Semaphore } from "effect"
import {
  BroadcastRejected,
  type ChainHead,
  type ChainUnavailable,
  type Inclusion,
  type SignedWithdrawal,
  type WithdrawalChain,
  type WithdrawalParameters,
  type WithdrawalTransfer
} from "../ChainClient.ts"
import type { SigningKey } from "../../signer/TransactionRequest.ts"
import { type BtcOutputBook, type BtcOutputRef, outputKey } from "./BtcOutputBook.ts"
import { type BtcRpc, type RpcError, satoshis } from "./BtcRpc.ts"

/** The lowest fee rate signed, sat/vB: Bitcoin Core's default minimum relay fee is 1; 2 keeps a margin. */
export const feeRateFloorSatPerVb = 2n
/** The confirmation target asked of `estimatesmartfee`, in blocks (about an hour on mainnet). */
export const feeEstimateTargetBlocks = 6
/** Change below this is left to the fee: 546 is Bitcoin Core's dust limit for the costliest standard output. */
export const changeDustSatoshis = 546n
/** Deposit outputs examined per selection, and inputs per transaction at most (its size and fee stay bounded). */
export const depositOutputsConsidered = 20
export const inputsMax = 50
/** `scantxoutset` walks the whole UTXO set (about a minute on mainnet). */
export const scanTimeoutMillis = 180_000

/**
 * Blocks a version may wait unincluded before it is replaced by fee (BIP 125): about an hour on mainnet, where a
 * fee estimated for 6 blocks has then proven too low.
 */
export const replaceAfterBlocks = 6n
/** A replacement pays at least this much more than the version it replaces (and Bitcoin Core's 1 sat/vB more). */
export const replacementBumpPerMille = 1250n
const incrementalRelaySatPerVb = 1n

/** vsize of a transaction's fixed part with the segwit marker, and of one P2WPKH input with its witness (rounded up). */
const overheadVbytes = 11n
const p2wpkhInputVbytes = 68n
const outputVbytes = (script: Uint8Array) => 9n + BigInt(script.length)

/** The parameters' nominal size for `networkFee`: two P2WPKH inputs, a P2WPKH payment and change. */
const nominalVbytes = overheadVbytes + 2n * p2wpkhInputVbytes + 2n * 31n

export interface BtcSendingOptions {
  readonly networkKey: string
  readonly network: bitcoin.Network
  readonly nativeAssetId: string
  /** Most sat/vB signed (catalog `feeRateCap`). */
  readonly feeRateCap: bigint
  readonly book: BtcOutputBook
}

export interface BtcNode {
  readonly call: (method: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown, ChainUnavailable>
  readonly rpc: BtcRpc
  readonly unavailable: (message: string) => ChainUnavailable
  readonly rawTransaction: (txid: string) => Effect.Effect<
    { readonly vin?: ReadonlyArray<{ readonly txid?: unknown; readonly vout?: unknown; readonly coinbase?: unknown }>; readonly vout?: ReadonlyArray<{ readonly value?: unknown; readonly n?: unknown }>; readonly blockhash?: unknown; readonly confirmations?: unknown } | undefined,
    ChainUnavailable
  >
}

interface Spendable extends BtcOutputRef {
  readonly value: bigint
  /** Absent: HOT's key. */
  readonly key?: SigningKey | undefined
}

/** Answers of `sendrawtransaction` (Bitcoin Core's reject reasons; Litecoin Core words them the same). */
const alreadyKnown = /already in (the )?block ?chain|txn-already-in-mempool|txn-already-known|already have transaction/i
/** The inputs are spent: by this very transaction mined earlier, by a version of it, or by something else. */
const inputsSpent = /missing ?inputs|missingorspent|txn-mempool-conflict|bad-txns-spends-conflicting-tx/i
/** Not now, maybe later: fees, a full mempool, a long unconfirmed chain. */
const tryAgain = /insufficient fee|min relay fee not met|mempool min fee not met|mempool full|too-long-mempool-chain|too many unconfirmed/i
const rpcVerifyError = -25
const rpcVerifyRejected = -26
const rpcVerifyAlreadyInChain = -27
const rpcDeserializationError = -22

export const makeBtcWithdrawals = (node: BtcNode, options: BtcSendingOptions): WithdrawalChain & {
  readonly feeRate: Effect.Effect<bigint, ChainUnavailable>
} => {
  const { book, feeRateCap, nativeAssetId, network, networkKey } = options
  const { call, unavailable } = node

  const feeRate = Effect.gen(function*() {
    const estimate = (yield* call("estimatesmartfee", [feeEstimateTargetBlocks])) as { readonly feerate?: unknown } | null
    // BTC per 1000 vB; absent with `errors` when the node has no data.
    const perKvB = satoshis(estimate?.feerate)
    const estimated = perKvB === undefined ? 0n : (perKvB + 999n) / 1000n
    const rate = estimated > feeRateFloorSatPerVb ? estimated : feeRateFloorSatPerVb
    if (rate > feeRateCap) {
      return yield* unavailable(`fees are above the network's cap: ${rate} sat/vB > ${feeRateCap}; waiting`)
    }
    return rate
  })

  const scriptOf = (address: string) => bitcoin.address.toOutputScript(address, network)
  const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

  /**
   * A node runs one `scantxoutset` at a time and refuses a second ("Scan already in progress"): this client's scans
   * take turns, and one refused because of another process's scan is asked again shortly.
   */
  const scanLock = Semaphore.makeUnsafe(1)
  const scan = (script: Uint8Array) =>
    scanLock.withPermit(
      node.rpc.call("scantxoutset", ["start", [`raw(${hex(script)})`]], { timeoutMillis: scanTimeoutMillis }).pipe(
        Effect.retry({
          while: (error) => error._tag === "RpcError" && /in progress/i.test(error.message),
          schedule: Schedule.spaced("500 millis"),
          times: 20
        })
      )
    ).pipe(Effect.catchTag("RpcError", (error: RpcError) => Effect.fail(unavailable(`scantxoutset: node error ${error.code} (${error.message})`))))

  /** HOT's confirmed outputs (see the module's comment). */
  /**
   * The last scan per script, with the block it was taken at: the UTXO set changes only with the chain's tip, so
   * while `getbestblockhash` still names that block the scan is still exact (a withdrawal's cover check and its
   * parameters ask one after the other; on mainnet a scan takes a minute). Bounded: HOT is the only script scanned.
   */
  const scans = new Map<string, { readonly bestblock: string; readonly outputs: ReadonlyArray<Spendable> }>()
  const scansKept = 16

  const hotOutputs = (hot: string) =>
    Effect.gen(function*() {
      const script = scriptOf(hot)
      const cached = scans.get(hex(script))
      if (cached !== undefined && (yield* call("getbestblockhash", [])) === cached.bestblock) return cached.outputs
      const scanned = (yield* scan(script)) as {
          readonly success?: unknown
          readonly bestblock?: unknown
          readonly unspents?: ReadonlyArray<{ readonly txid?: unknown; readonly vout?: unknown; readonly amount?: unknown }>
        } | null
      if (scanned?.success !== true || !Array.isArray(scanned.unspents)) return yield* unavailable("scantxoutset: malformed answer")
      const outputs: Array<Spendable> = []
      for (const unspent of scanned.unspents) {
        const value = satoshis(unspent.amount)
        if (typeof unspent.txid !== "string" || !/^[0-9a-f]{64}$/.test(unspent.txid) || typeof unspent.vout !== "number" || value === undefined) {
          return yield* unavailable("scantxoutset: malformed output")
        }
        outputs.push({ txid: unspent.txid, vout: unspent.vout, value })
      }
      if (typeof scanned.bestblock === "string") {
        if (scans.size >= scansKept) scans.delete(scans.keys().next().value!)
        scans.set(hex(script), { bestblock: scanned.bestblock, outputs })
      }
      return outputs
    })

  /** Credited deposit outputs not held by others, still unspent on the node, with their values. */
  const depositOutputs = (held: ReadonlySet<string>) =>
    Effect.gen(function*() {
      const candidates = yield* book.depositOutputs(networkKey, depositOutputsConsidered)
      const outputs: Array<Spendable> = []
      for (const candidate of candidates) {
        if (held.has(outputKey(candidate))) continue
        const out = (yield* call("gettxout", [candidate.txid, candidate.vout, true])) as {
          readonly value?: unknown
          readonly scriptPubKey?: { readonly hex?: unknown }
        } | null
        // Spent (in a block or by a transaction in the mempool): not ours to choose any more.
        if (out === null) continue
        const value = satoshis(out.value)
        if (value === undefined || out.scriptPubKey?.hex !== hex(scriptOf(candidate.address))) {
          return yield* unavailable(`gettxout(${candidate.txid}:${candidate.vout}): not the deposit's output`)
        }
        outputs.push({ txid: candidate.txid, vout: candidate.vout, value, key: candidate.key })
      }
      return outputs
    })

  const candidatesFor = (transfer: WithdrawalTransfer) =>
    Effect.gen(function*() {
      const held = yield* book.heldByOthers(networkKey, transfer.withdrawalId)
      const deposits = yield* depositOutputs(held)
      const hot = (yield* hotOutputs(transfer.from))
        .filter((output) => !held.has(outputKey(output)))
        .toSorted((a, b) => (a.value === b.value ? 0 : a.value > b.value ? -1 : 1))
      return [...deposits, ...hot]
    })

  const vbytes = (inputs: number, outputs: ReadonlyArray<Uint8Array>) =>
    overheadVbytes + BigInt(inputs) * p2wpkhInputVbytes + outputs.reduce((sum, script) => sum + outputVbytes(script), 0n)

  /** The inputs and fee for `transfer` at `rate`, or undefined when the candidates do not cover it. */
  const select = (transfer: WithdrawalTransfer, candidates: ReadonlyArray<Spendable>, rate: bigint) => {
    const payment = scriptOf(transfer.to)
    const change = scriptOf(transfer.from)
    const chosen: Array<Spendable> = []
    let total = 0n
    for (const candidate of candidates) {
      if (chosen.length >= inputsMax) break
      chosen.push(candidate)
      total += candidate.value
      const feeWithChange = rate * vbytes(chosen.length, [payment, change])
      if (total < transfer.amount + feeWithChange) continue
      const left = total - transfer.amount - feeWithChange
      // Dust change is not made: it goes to the fee, which is then exactly inputs minus the payment.
      const networkFee = left < changeDustSatoshis ? total - transfer.amount : feeWithChange
      return { inputs: chosen, networkFee }
    }
    return undefined
  }

  const networkFee = (_assetId: string) => Effect.map(feeRate, (rate) => rate * nominalVbytes)

  const hotWalletCovers = (transfer: WithdrawalTransfer, fee: bigint) =>
    Effect.map(candidatesFor(transfer), (candidates) =>
      candidates.slice(0, inputsMax).reduce((sum, output) => sum + output.value, 0n) >= transfer.amount + fee)

  const withdrawalParameters = (transfer: WithdrawalTransfer): Effect.Effect<WithdrawalParameters, ChainUnavailable> =>
    Effect.gen(function*() {
      if (transfer.assetId !== nativeAssetId) return yield* unavailable(`${transfer.assetId} is not this network's coin`)
      const rate = yield* feeRate
      // Another withdrawal may reserve an output between the reading and the reservation: choose again.
      for (let attempt = 0; attempt < 3; attempt++) {
        const selected = select(transfer, yield* candidatesFor(transfer), rate)
        if (selected === undefined) {
          return yield* unavailable(`the spendable outputs do not cover ${transfer.amount} satoshi and the fee; waiting for confirmed outputs`)
        }
        if (yield* book.reserve(networkKey, transfer.withdrawalId, selected.inputs)) {
          return {
            family: "BTC" as const,
            inputs: selected.inputs.map((input) => ({
              txid: input.txid,
              vout: input.vout,
              value: input.value,
              ...(input.key === undefined ? {} : { key: input.key })
            })),
            networkFee: selected.networkFee
          }
        }
      }
      return yield* unavailable("the chosen outputs were taken by other withdrawals three times; will choose again")
    })

  const broadcast = (signed: SignedWithdrawal): Effect.Effect<void, ChainUnavailable | BroadcastRejected> =>
    node.rpc.call("sendrawtransaction", [signed.raw]).pipe(
      Effect.asVoid,
      Effect.catchTag("RpcError", (error: RpcError): Effect.Effect<void, ChainUnavailable | BroadcastRejected> => {
        const message = `sendrawtransaction: node error ${error.code} (${error.message})`
        if (error.code === rpcVerifyAlreadyInChain || alreadyKnown.test(error.message)) return Effect.void
        if (tryAgain.test(error.message)) return Effect.fail(unavailable(message))
        // Spent inputs look the same whether this transaction (or another version of it) was mined meanwhile or
        // someone else spent them: the sending pipeline checks its own versions first (like an EVM nonce taken).
        if (inputsSpent.test(error.message)) return Effect.fail(new BroadcastRejected({ networkKey, message, nonceUsed: true }))
        if (error.code === rpcVerifyError || error.code === rpcVerifyRejected || error.code === rpcDeserializationError) {
          return Effect.fail(new BroadcastRejected({ networkKey, message }))
        }
        return Effect.fail(unavailable(message))
      })
    )

  /**
   * Fees of included transactions, by txid: a fee is a property of the bytes, and reading it costs one call per
   * input, on every check until the send is final. Bounded; the oldest entry goes first.
   */
  const fees = new Map<string, bigint>()
  const feesKept = 1_000

  const feeOf = (txHash: string, tx: { readonly vin?: ReadonlyArray<{ readonly txid?: unknown; readonly vout?: unknown }>; readonly vout?: ReadonlyArray<{ readonly value?: unknown }> }) =>
    Effect.gen(function*() {
      const known = fees.get(txHash)
      if (known !== undefined) return known
      // Inputs minus outputs, each input's value read from the transaction that made it.
      let inputs = 0n
      for (const input of tx.vin ?? []) {
        if (typeof input.txid !== "string" || typeof input.vout !== "number") return yield* unavailable(`${txHash}: malformed input`)
        const previous = yield* node.rawTransaction(input.txid)
        const value = satoshis(previous?.vout?.find((output) => output.n === input.vout)?.value)
        if (value === undefined) return yield* unavailable(`${txHash}: input ${input.txid}:${input.vout} not found`)
        inputs += value
      }
      let outputs = 0n
      for (const output of tx.vout ?? []) {
        const value = satoshis(output.value)
        if (value === undefined) return yield* unavailable(`${txHash}: malformed output`)
        outputs += value
      }
      if (fees.size >= feesKept) fees.delete(fees.keys().next().value!)
      fees.set(txHash, inputs - outputs)
      return inputs - outputs
    })

  const inclusion = (txHash: string): Effect.Effect<Inclusion | undefined, ChainUnavailable> =>
    Effect.gen(function*() {
      const tx = yield* node.rawTransaction(txHash)
      if (tx === undefined || typeof tx.confirmations !== "number" || tx.confirmations < 1) return undefined
      const header = (yield* call("getblockheader", [tx.blockhash])) as { readonly height?: unknown; readonly confirmations?: unknown } | null
      if (typeof header?.height !== "number") return yield* unavailable(`getblockheader of ${txHash}'s block: malformed answer`)
      if (typeof header.confirmations !== "number" || header.confirmations < 1) return undefined
      return { height: BigInt(header.height), succeeded: true, networkFee: yield* feeOf(txHash, tx) }
    })

  const replacementParameters = (previous: WithdrawalParameters, blocksWaited: bigint) =>
    Effect.gen(function*() {
      if (previous.family !== "BTC" || previous.inputs.length === 0 || blocksWaited < replaceAfterBlocks) return undefined
      const send = yield* book.sendOf(networkKey, previous.inputs[0]!)
      if (send === undefined) return undefined
      // An input spent in a block while no version of ours is included (the pipeline looked first) was spent by
      // somebody else: a replacement could never be valid either.
      for (const input of previous.inputs) {
        if ((yield* call("gettxout", [input.txid, input.vout, false])) === null) {
          yield* Effect.logWarning(`${networkKey}: ${input.txid}:${input.vout} is spent by a transaction that is not this send's; not replacing`)
          return undefined
        }
      }
      const rate = yield* feeRate
      const size = vbytes(previous.inputs.length, [scriptOf(send.to), scriptOf(send.from)])
      const candidates = [
        (previous.networkFee * replacementBumpPerMille + 999n) / 1000n,
        previous.networkFee + incrementalRelaySatPerVb * size,
        rate * size
      ]
      let fee = candidates.reduce((max, value) => (value > max ? value : max))
      const total = previous.inputs.reduce((sum, input) => sum + input.value, 0n)
      const left = total - send.amount - fee
      if (left < 0n) return undefined
      if (left < changeDustSatoshis) fee = total - send.amount
      if (fee > feeRateCap * size) return undefined
      return { family: "BTC" as const, inputs: previous.inputs, networkFee: fee } satisfies WithdrawalParameters
    })

  /** The node's tip, height and hash from one answer. */
  const tip = Effect.flatMap(call("getblockchaininfo", []), (info) => {
    const { bestblockhash, blocks } = (info ?? {}) as { readonly blocks?: unknown; readonly bestblockhash?: unknown }
    if (typeof blocks !== "number" || typeof bestblockhash !== "string") return Effect.fail(unavailable("getblockchaininfo: malformed answer"))
    return Effect.succeed<ChainHead>({ height: BigInt(blocks), hash: bestblockhash, finalizedHeight: 0n })
  })

  /**
   * Bitcoin Core has no "who spent this output" call: an input missing from the UTXO set at the tip (`gettxout`
   * without the mempool) whose maker is in a block was spent in a block of the current chain. Where that block
   * stands is found from the other end: the blocks that are not final yet (walked down from the tip) are read, and a
   * spend not among them is in a final block. Asked only while no version of the send is in a block.
   */
  const conflicted = (
    signed: SignedWithdrawal,
    versions: ReadonlyArray<string>,
    final: (head: ChainHead, height: bigint) => boolean
  ): Effect.Effect<boolean, ChainUnavailable> =>
    Effect.gen(function*() {
      const tx = yield* Effect.try({
        try: () => bitcoin.Transaction.fromHex(signed.raw),
        catch: () => unavailable(`${signed.txHash}: the stored bytes do not decode`)
      })
      const inputs = tx.ins.map((input) => ({ txid: Buffer.from(input.hash).reverse().toString("hex"), vout: input.index }))
      const at = yield* tip
      const spent: Array<BtcOutputRef> = []
      for (const input of inputs) {
        if ((yield* call("gettxout", [input.txid, input.vout, false])) !== null) continue
        // Its maker in no block (reorganized away) proves nothing: it may come back, and this send with it.
        const maker = yield* node.rawTransaction(input.txid)
        if (typeof maker?.confirmations !== "number" || maker.confirmations < 1) continue
        spent.push(input)
      }
      if (spent.length === 0) return false
      // The readings above belong to one tip; a block in between means reading again next time.
      if ((yield* tip).hash !== at.hash) return false
      const recent = new Map<string, string>()
      let hash: unknown = at.hash
      for (let height = at.height; height >= 0n && !final(at, height) && typeof hash === "string"; height--) {
        const block = (yield* call("getblock", [hash, 2])) as {
          readonly tx?: ReadonlyArray<{ readonly txid?: unknown; readonly vin?: ReadonlyArray<{ readonly txid?: unknown; readonly vout?: unknown }> }>
          readonly previousblockhash?: unknown
        } | null
        if (!Array.isArray(block?.tx)) return yield* unavailable(`getblock ${hash}: malformed answer`)
        for (const spender of block.tx) {
          for (const input of spender.vin ?? []) {
            if (typeof input.txid === "string" && typeof input.vout === "number" && typeof spender.txid === "string") {
              recent.set(`${input.txid}:${input.vout}`, spender.txid)
            }
          }
        }
        hash = block.previousblockhash
      }
      for (const input of spent) {
        const spender = recent.get(outputKey(input))
        // In a block a reorganization can still undo (or ours, mined since the pipeline looked): wait.
        if (spender !== undefined) {
          if (!versions.includes(spender)) {
            yield* Effect.logInfo(`${networkKey}: ${outputKey(input)} of ${signed.txHash} is spent by ${spender}, not final yet; waiting`)
          }
          continue
        }
        yield* Effect.logWarning(`${networkKey}: ${outputKey(input)} of ${signed.txHash} is spent in a final block by a transaction that is not this send's`)
        return true
      }
      return false
    })

  return { feeRate, hotWalletCovers, networkFee, withdrawalParameters, broadcast, inclusion, replacementParameters, conflicted }
}
