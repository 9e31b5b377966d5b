/**
 * TRX and TRC-20 transfers built and signed offline with tronweb. tronweb builds transactions locally (protobuf);
 * its only network call, fetching the reference block, is skipped because the block header is passed in, so the
 * TronWeb instance below points at an address it never contacts (chains.md section 4). It is imported on the first
 * TRON signature: loading it costs about 250 ms, which every start would otherwise pay (chains/TronAddress.ts).
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import type { TronWeb } from "tronweb"
import { type KeySource, withKey } from "./KeySource.ts"
import {
  type SignedTransaction,
  tronExpirationAfterBlockMs,
  type TronReferenceBlock,
  type TronTransfer
} from "./TransactionRequest.ts"

let library: Promise<typeof import("tronweb")> | undefined
const tronweb = () => (library ??= import("tronweb"))
let builder: TronWeb | undefined
const offlineBuilder = async (): Promise<TronWeb> => {
  const { TronWeb } = await tronweb()
  return (builder ??= new TronWeb({ fullHost: "http://127.0.0.1:1" }))
}

/** TAPoS fields as tronweb computes them from `wallet/getblock`. */
const blockHeader = (block: TronReferenceBlock, expiration: number | undefined) => {
  if (!/^[0-9a-f]{64}$/.test(block.id)) throw new Error("TRON reference block id must be 64 lowercase hex characters")
  return {
    ref_block_bytes: block.number.toString(16).slice(-4).padStart(4, "0"),
    ref_block_hash: block.id.slice(16, 32),
    expiration: expiration ?? block.timestamp + tronExpirationAfterBlockMs,
    timestamp: block.timestamp
  }
}

/** tronweb takes TRX amounts as a JS number; refuse one it would round rather than sign a different amount. */
const sunAsNumber = (amount: bigint): number => {
  if (amount <= 0n || amount > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`TRX amount out of range: ${amount}`)
  return Number(amount)
}

export const signTronTransfer = (keys: KeySource, request: TronTransfer): Promise<SignedTransaction> =>
  withKey(keys, request.key, { family: "TRON" }, async (derived) => {
    const { TronWeb, utils: tronUtils } = await tronweb()
    const privateKey = bytesToHex(derived.privateKey)
    const from = derived.address
    if (TronWeb.address.fromPrivateKey(privateKey) !== from) throw new Error("TRON key and derived address disagree")
    const header = blockHeader(request.referenceBlock, request.expiration)
    const tron = await offlineBuilder()
    const unsigned = request.token === undefined
      ? await tron.transactionBuilder.sendTrx(request.to, sunAsNumber(request.amount), from, { blockHeader: header })
      : (await tron.transactionBuilder.triggerSmartContract(
        request.token,
        "transfer(address,uint256)",
        { feeLimit: sunAsNumber(requireFeeLimit(request.feeLimit)), txLocal: true, blockHeader: header },
        [{ type: "address", value: request.to }, { type: "uint256", value: request.amount.toString() }],
        from
      )).transaction
    const signed = tronUtils.crypto.signTransaction(privateKey, unsigned)
    // tronweb checks that txID is the hash of raw_data_hex and that raw_data_hex encodes raw_data.
    if (!tronUtils.transaction.txCheck(signed)) throw new Error("tronweb built an inconsistent TRON transaction")
    const message = tronUtils.transaction.txJsonToPb(signed)
    for (const signature of signed.signature ?? []) message.addSignature(Buffer.from(signature, "hex"))
    const raw = Buffer.from(message.serializeBinary()).toString("hex")
    return { family: "TRON", from, txHash: signed.txID, raw }
  })

const requireFeeLimit = (feeLimit: bigint | undefined): bigint => {
  if (feeLimit === undefined) throw new TypeError("feeLimit is required for a TRC-20 transfer")
  return feeLimit
}
