/**
 * EIP-1559 transfers of the native coin and of ERC-20 tokens, signed offline with a viem local account. The call data
 * and the hash come from ox (the encoding code viem itself uses), so signing loads `viem/accounts` but not viem's
 * client (chains/NodeClients.ts says why).
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import * as AbiFunction from "ox/AbiFunction"
import * as Hash from "ox/Hash"
import { privateKeyToAccount } from "viem/accounts"
import { type KeySource, withKey } from "./KeySource.ts"
import type { EvmTransfer, SignedTransaction } from "./TransactionRequest.ts"

const erc20Transfer = AbiFunction.from("function transfer(address to, uint256 amount) returns (bool)")

export const signEvmTransfer = (keys: KeySource, request: EvmTransfer): Promise<SignedTransaction> =>
  withKey(keys, request.key, { family: "EVM" }, async (derived) => {
    const account = privateKeyToAccount(`0x${bytesToHex(derived.privateKey)}`)
    // Checked, not assumed: a key that does not own the derived address would sign for somebody else's nonce.
    if (account.address.toLowerCase() !== derived.address) throw new Error("EVM key and derived address disagree")
    const token = request.token
    const raw = await account.signTransaction({
      type: "eip1559",
      chainId: request.chainId,
      nonce: request.nonce,
      gas: request.gas,
      maxFeePerGas: request.maxFeePerGas,
      maxPriorityFeePerGas: request.maxPriorityFeePerGas,
      ...(token === undefined
        ? { to: request.to as `0x${string}`, value: request.amount }
        : {
          to: token as `0x${string}`,
          value: 0n,
          data: AbiFunction.encodeData(erc20Transfer, [request.to as `0x${string}`, request.amount])
        })
    })
    return { family: "EVM", from: derived.address, txHash: Hash.keccak256(raw), raw }
  })
