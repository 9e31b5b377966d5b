/** P2WPKH spends signed offline with a bitcoinjs PSBT (chains.md section 4; accepted by a real node there). */
import * as ecc from "@bitcoinerlab/secp256k1"
import * as bitcoin from "bitcoinjs-lib"
import { ECPairFactory } from "ecpair"
import { bitcoinNetworks } from "../chains/BitcoinNetwork.ts"
import type { DerivedKey } from "../chains/Derivation.ts"
import type { KeySource } from "./KeySource.ts"
import type { BtcTransfer, SignedTransaction } from "./TransactionRequest.ts"

const ECPair = ECPairFactory(ecc)

/** BIP-125 opt-in replace-by-fee: a stuck withdrawal can be bumped. */
const replaceableSequence = 0xfffffffd

export const signBtcTransfer = async (keys: KeySource, request: BtcTransfer): Promise<SignedTransaction> => {
  const network = bitcoinNetworks[request.btcNetwork]
  if (request.inputs.length === 0 || request.outputs.length === 0) throw new Error("a BTC spend needs inputs and outputs")
  const inputTotal = request.inputs.reduce((sum, input) => sum + input.value, 0n)
  const outputTotal = request.outputs.reduce((sum, output) => sum + output.value, 0n)
  // The fee is implicit in Bitcoin: outputs above the inputs would be rejected, and equal ones would never confirm.
  if (outputTotal >= inputTotal) throw new RangeError(`BTC outputs ${outputTotal} leave no fee from inputs ${inputTotal}`)
  const derived: Array<DerivedKey> = []
  try {
    const psbt = new bitcoin.Psbt({ network })
    for (const input of request.inputs) {
      const key = keys(input.key, { family: "BTC", btcNetwork: request.btcNetwork })
      derived.push(key)
      const script = bitcoin.address.toOutputScript(key.address, network)
      psbt.addInput({
        hash: input.txid,
        index: input.vout,
        sequence: replaceableSequence,
        witnessUtxo: { script, value: input.value }
      })
    }
    for (const output of request.outputs) psbt.addOutput({ address: output.address, value: output.value })
    derived.forEach((key, index) => psbt.signInput(index, ECPair.fromPrivateKey(key.privateKey, { network })))
    const valid = psbt.validateSignaturesOfAllInputs((publicKey, hash, signature) =>
      ECPair.fromPublicKey(publicKey).verify(hash, signature)
    )
    if (!valid) throw new Error("a BTC input signature does not verify")
    psbt.finalizeAllInputs()
    const transaction = psbt.extractTransaction()
    return { family: "BTC", from: derived[0]!.address, txHash: transaction.getId(), raw: transaction.toHex() }
  } finally {
    for (const key of derived) key.privateKey.fill(0)
  }
}
