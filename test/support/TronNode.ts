/**
 * A strict stand-in of a java-tron full node's HTTP API (no TRON node runs here: chains.md section 5), in process on
 * a free loopback port. docs/tron.md lists which behaviours follow TRON's documentation and which are assumptions.
 *
 * Strict where the service could get TRON wrong: every broadcast transaction is decoded from its protobuf bytes
 * (not from any JSON beside them); its id must be sha256(raw_data), its signature must recover to the owner of its
 * contract, its TAPoS reference (ref_block_bytes/ref_block_hash) must name a block of the current chain, and its
 * expiration must lie after the head block's time and within 24 h of it. Balances are kept: TRX per account, and
 * TRC-20 balances of the contracts the node hosts (only `transfer(address,uint256)` runs, no TVM). Bandwidth is
 * paid from the account's free allowance or burned (1,000 sun a byte), creating an account costs 1.1 TRX, and a
 * TRC-20 call burns energy up to its fee_limit: a transfer beyond the sender's balance is included as REVERT, one
 * whose energy exceeds the fee_limit as OUT_OF_ENERGY, both charged.
 *
 * Time is the node's own: block 1 carries the start time, every block 3 s more; blocks are made on demand
 * (`mine`). A block is solidified 19 blocks below the head (TRON: 19 of the 27 super representatives built on it).
 * `reorg` replaces unsolidified top blocks by a longer fork: their transactions leave the chain and the balances
 * return to what the block below held (each block keeps a copy of the state after it).
 */
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { keccak_256 } from "@noble/hashes/sha3.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { TronWeb, utils as tronUtils } from "tronweb"
import { tronAddressBytes } from "../../src/chains/TronAddress.ts"
import {
  decodeTronTransaction,
  protoBytes,
  protoVarint,
  readProtoFields,
  type TronTransactionBytes
} from "../../src/chains/tron/TronTransactionBytes.ts"

/** Chain parameters (wallet/getchainparameters), mainnet's values in 2025 unless said otherwise. */
export const tronParameters = {
  /** Sun burned per byte of bandwidth beyond the free allowance. */
  transactionFee: 1_000n,
  /** Sun per unit of energy (mainnet lowered it from 420 to 210 in 2024). */
  energyFee: 210n,
  /** Burned instead of bandwidth by a transaction that creates an account. */
  createAccountFee: 100_000n,
  /** Charged by a TRX transfer that creates its recipient's account. */
  createNewAccountFeeInSystemContract: 1_000_000n,
  /** Bytes of free bandwidth per account (a day's allowance; it does not recover on this node). */
  freeNetLimit: 600n,
  /** The highest fee_limit a transaction may set. */
  maxFeeLimit: 15_000_000_000n
} as const

/** Energy a TRC-20 transfer takes here: to a holder with a balance, to one without, and up to a revert. */
export const trc20Energy = { toHolder: 31_895n, toNewHolder: 64_895n, revert: 9_000n } as const

/** java-tron adds this many bytes (the result) to a transaction's size for bandwidth. */
const resultBytes = 64n
const blockIntervalMillis = 3_000n
const solidifyDepth = 19n
const maxExpirationMillis = 24n * 3_600_000n
const transferSelector = "a9059cbb"
const balanceOfSelector = "70a08231"
const transferTopic = bytesToHex(keccak_256(new TextEncoder().encode("Transfer(address,address,uint256)")))

/** TRON Nile's block 0 (its last 4 bytes are Nile's JSON-RPC chain id 0xcd8690dc, per TRON's documentation). */
export const nileGenesisBlockId = "0000000000000000d698d4192c56cb6be724a558448e2684802de4d6cd8690dc"

/** The harness's rich account: a fixed test key, never used anywhere else. */
export const funderPrivateKey = bytesToHex(sha256(new TextEncoder().encode("coffer TRON stand-in funder")))
export const funderAddress = TronWeb.address.fromPrivateKey(funderPrivateKey) as string

interface Account {
  balance: bigint
  freeNetUsed: bigint
}

interface State {
  readonly accounts: Map<string, Account>
  /** contract hex (41…) → holder hex → balance. */
  readonly tokens: Map<string, Map<string, bigint>>
}

const cloneState = (state: State): State => ({
  accounts: new Map([...state.accounts].map(([address, account]) => [address, { ...account }])),
  tokens: new Map([...state.tokens].map(([contract, holders]) => [contract, new Map(holders)]))
})

type Json = unknown

interface PoolTransaction {
  readonly txId: string
  readonly hex: string
  readonly decoded: TronTransactionBytes
  readonly owner: string
  readonly contractType: "TransferContract" | "TriggerSmartContract"
  /** The contract's parameter value as java-tron prints it (hex addresses). */
  readonly value: Record<string, Json>
}

interface Executed {
  readonly tx: PoolTransaction
  readonly contractRet: string
  /** gettransactioninfobyid's fields other than id, blockNumber and blockTimeStamp. */
  readonly info: Record<string, Json>
}

interface Block {
  readonly number: bigint
  readonly blockID: string
  readonly parentHash: string
  readonly timestamp: bigint
  readonly txTrieRoot: string
  readonly transactions: ReadonlyArray<Executed>
  readonly stateAfter: State
}

class Refused extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

export interface TronNodeOptions {
  /** HTTP Basic credentials the node demands (a provider's API key in the URL's userinfo). */
  readonly credentials?: { readonly user: string; readonly password: string } | undefined
  /** TRC-20 contracts the node hosts (base58), the funder holding `supply` of each. */
  readonly tokens?: ReadonlyArray<{ readonly contract: string; readonly supply: bigint }> | undefined
  /** Salt of the blocks' hashes, so two nodes can be on different chains. */
  readonly chainName?: string | undefined
  /** Block 0's id; default Nile's (the catalogs' TRON_NILE genesisHash), so the stand-in passes the identity check. */
  readonly genesisBlockId?: string | undefined
  /** Block 1's time, ms since the epoch; default the start time. */
  readonly startMillis?: number | undefined
  /** Paths this node does not serve (404), like an older java-tron or a FullNode port without the solidity API. */
  readonly without?: ReadonlyArray<string> | undefined
}

export interface TronNode {
  /** The node's URL, with the credentials in the userinfo when it demands them. */
  readonly url: string
  readonly genesisBlockId: string
  readonly stop: () => Promise<void>
  readonly head: () => { readonly number: bigint; readonly blockID: string; readonly timestamp: bigint }
  readonly solidified: () => bigint
  /** Makes `count` blocks; the first takes every transaction waiting. */
  readonly mine: (count?: number) => void
  /** Drops the top `depth` blocks (not below the solidified one) and makes `depth + 1` others in their place. */
  readonly reorg: (depth: number, options?: { readonly keepTransactions?: boolean }) => void
  /** wallet/broadcasthex, as a client would call it: the node's answer. */
  readonly broadcastHex: (hex: string) => { readonly result: boolean; readonly code: string; readonly message: string }
  /** The funder sends TRX (or a hosted token) to `to`, mined in a block made now. */
  readonly fund: (to: string, amount: bigint, token?: string) => Promise<{ readonly txHash: string; readonly height: bigint }>
  /** Signs a transfer with `privateKey` on the head as reference block; not broadcast. */
  readonly sign: (
    privateKey: string,
    to: string,
    amount: bigint,
    options?: { readonly token?: string; readonly feeLimit?: bigint; readonly expirationMillis?: number }
  ) => Promise<{ readonly txId: string; readonly hex: string }>
  readonly trxBalance: (address: string) => bigint
  readonly tokenBalance: (contract: string, holder: string) => bigint
  /** The ids of the transactions in the current chain whose contract's owner is `address`, oldest first. */
  readonly sentBy: (address: string) => ReadonlyArray<string>
  /** Forgets the transactions waiting for a block, as a restarted node does. */
  readonly dropPending: () => number
  /** Whether a transaction waits for a block now (java-tron's gettransactionfrompending). */
  readonly isPending: (txId: string) => boolean
  /** Like USDT's addBlackList / removeBlackList: transfers from a blacklisted holder revert. */
  readonly blacklist: (contract: string, holder: string, listed: boolean) => void
  /** gettransactioninfobyid of the current chain, as the node answers it. */
  readonly transactionInfo: (txId: string) => Record<string, Json>
  /** How many times each path was asked. */
  readonly calls: Map<string, number>
}

const hexOf = (address: string): string => {
  const bytes = tronAddressBytes(address)
  if (bytes === undefined) throw new Error(`not a TRON address: ${address}`)
  return bytesToHex(bytes)
}

/** An address as a request names it: base58 (visible) or 41-hex. */
const requestAddress = (value: unknown): string | undefined => {
  if (typeof value !== "string") return undefined
  if (/^41[0-9a-fA-F]{40}$/.test(value)) return value.toLowerCase()
  const bytes = tronAddressBytes(value)
  return bytes === undefined ? undefined : bytesToHex(bytes)
}

const validAddressBytes = (bytes: Uint8Array) => bytes.length === 21 && bytes[0] === 0x41

const recoverOwner = (signature: Uint8Array, hash: Uint8Array): string | undefined => {
  if (signature.length !== 65) return undefined
  const v = signature[64]! >= 27 ? signature[64]! - 27 : signature[64]!
  if (v > 1) return undefined
  try {
    const publicKey = secp256k1.Signature.fromBytes(signature.slice(0, 64), "compact")
      .addRecoveryBit(v)
      .recoverPublicKey(hash)
      .toBytes(false)
    return `41${bytesToHex(keccak_256(publicKey.slice(1)).slice(-20))}`
  } catch {
    return undefined
  }
}

/** JSON as java-tron prints protobuf: int64 as JSON numbers (exact, even beyond 2^53). */
const stringify = (value: Json): string =>
  JSON.stringify(value, (_key, entry) => (typeof entry === "bigint" ? (JSON as any).rawJSON(entry.toString()) : entry))

/** proto3 JSON printing leaves out fields holding their default (0, empty). */
const compact = (record: Record<string, Json>): Record<string, Json> =>
  Object.fromEntries(Object.entries(record).filter(([, value]) => value !== 0n && value !== "" && value !== undefined))

const word = (hex: string) => hex.padStart(64, "0")

export const startTronNode = async (options: TronNodeOptions = {}): Promise<TronNode> => {
  const calls = new Map<string, number>()
  const hosted = new Set((options.tokens ?? []).map((token) => hexOf(token.contract)))
  const funder = hexOf(funderAddress)
  const genesisState: State = {
    accounts: new Map([[funder, { balance: 10n ** 17n, freeNetUsed: 0n }]]),
    tokens: new Map((options.tokens ?? []).map((token) => [hexOf(token.contract), new Map([[funder, token.supply]])]))
  }
  // The contracts exist as accounts, as deployed contracts do.
  for (const contract of hosted) genesisState.accounts.set(contract, { balance: 0n, freeNetUsed: 0n })

  /** contract hex → holders whose transfers revert (USDT's addBlackList). */
  const blacklisted = new Map<string, Set<string>>()
  let forkSalt = 0
  const blockId = (number: bigint, parentHash: string, timestamp: bigint, txTrieRoot: string) => {
    const digest = bytesToHex(sha256(new TextEncoder().encode(
      `${options.chainName ?? "coffer-tron-standin"}|${number}|${parentHash}|${timestamp}|${txTrieRoot}|${forkSalt}`
    )))
    // java-tron: the first 8 bytes of a blockID are the block number.
    return number.toString(16).padStart(16, "0") + digest.slice(16)
  }
  const trieRoot = (transactions: ReadonlyArray<Executed>) =>
    bytesToHex(sha256(new TextEncoder().encode(transactions.map((executed) => executed.tx.txId).join(""))))

  const genesisRoot = trieRoot([])
  const genesisParent = bytesToHex(sha256(new TextEncoder().encode(`${options.chainName ?? ""} genesis parent`)))
  const chain: Array<Block> = [{
    number: 0n,
    blockID: options.genesisBlockId ?? nileGenesisBlockId,
    parentHash: genesisParent,
    // As on TRON's mainnet, the genesis block has time 0.
    timestamp: 0n,
    txTrieRoot: genesisRoot,
    transactions: [],
    stateAfter: genesisState
  }]
  let pool: Array<PoolTransaction> = []
  const startMillis = BigInt(options.startMillis ?? Date.now())

  const head = () => chain[chain.length - 1]!
  const solidified = () => (head().number > solidifyDepth ? head().number - solidifyDepth : 0n)

  /** The state the next transaction is checked against: the head's, with the waiting transactions applied. */
  const pendingState = () => {
    const state = cloneState(head().stateAfter)
    for (const tx of pool) execute(state, tx)
    return state
  }

  const account = (state: State, address: string) => state.accounts.get(address)

  /**
   * Charges the bandwidth (java-tron BandwidthProcessor): an account-creating transfer burns createAccountFee;
   * otherwise the free allowance when it covers all the bytes, else bytes × transactionFee burned.
   */
  const chargeBandwidth = (state: State, tx: PoolTransaction, createsAccount: boolean): Record<string, bigint> => {
    const owner = account(state, tx.owner)!
    const bytes = BigInt(tx.hex.length / 2) + resultBytes
    if (createsAccount) {
      if (owner.balance < tronParameters.createAccountFee) {
        throw new Refused("BANDWITH_ERROR", `account [${tx.owner}] has insufficient balance to create new account`)
      }
      owner.balance -= tronParameters.createAccountFee
      return { net_fee: tronParameters.createAccountFee }
    }
    if (owner.freeNetUsed + bytes <= tronParameters.freeNetLimit) {
      owner.freeNetUsed += bytes
      return { net_usage: bytes }
    }
    const fee = bytes * tronParameters.transactionFee
    if (owner.balance < fee) {
      throw new Refused("BANDWITH_ERROR", `Account resource insufficient error. Account [${tx.owner}] has insufficient bandwidth and balance to pay ${fee} sun`)
    }
    owner.balance -= fee
    return { net_fee: fee }
  }

  /** Applies one transaction to `state`; throws Refused when java-tron would not take it at all. */
  function execute(state: State, tx: PoolTransaction): { contractRet: string; info: Record<string, Json> } {
    const owner = account(state, tx.owner)
    if (tx.contractType === "TransferContract") {
      const to = tx.value.to_address as string
      const amount = tx.value.amount as bigint
      if (owner === undefined) throw new Refused("CONTRACT_VALIDATE_ERROR", "Validate TransferContract error, no OwnerAccount.")
      if (amount <= 0n) throw new Refused("CONTRACT_VALIDATE_ERROR", "Amount must be greater than 0.")
      if (to === tx.owner) throw new Refused("CONTRACT_VALIDATE_ERROR", "Cannot transfer TRX to yourself.")
      const createsAccount = account(state, to) === undefined
      const systemFee = createsAccount ? tronParameters.createNewAccountFeeInSystemContract : 0n
      // Bandwidth is paid first (java-tron BandwidthProcessor), then the actuator checks what is left.
      const receipt = chargeBandwidth(state, tx, createsAccount)
      if (owner.balance < amount + systemFee) {
        throw new Refused("CONTRACT_VALIDATE_ERROR", "Validate TransferContract error, balance is not sufficient.")
      }
      owner.balance -= amount + systemFee
      if (createsAccount) state.accounts.set(to, { balance: 0n, freeNetUsed: 0n })
      account(state, to)!.balance += amount
      return {
        contractRet: "SUCCESS",
        info: compact({ fee: (receipt.net_fee ?? 0n) + systemFee, contractResult: [""], receipt: compact(receipt) })
      }
    }
    // TriggerSmartContract on a hosted TRC-20.
    const contract = tx.value.contract_address as string
    if (owner === undefined) throw new Refused("CONTRACT_VALIDATE_ERROR", "Validate InternalTransfer error, no OwnerAccount.")
    if (!hosted.has(contract)) throw new Refused("CONTRACT_VALIDATE_ERROR", "No contract or not a smart contract")
    const feeLimit = tx.decoded.feeLimit
    if (feeLimit < 0n || feeLimit > tronParameters.maxFeeLimit) {
      throw new Refused("CONTRACT_VALIDATE_ERROR", `feeLimit must be >= 0 and <= ${tronParameters.maxFeeLimit}`)
    }
    const callValue = (tx.value.call_value as bigint | undefined) ?? 0n
    if (callValue > owner.balance) throw new Refused("CONTRACT_VALIDATE_ERROR", "validateForSmartContract failure, not enough balance")
    const receipt = chargeBandwidth(state, tx, false)
    const energyLimit = [feeLimit, owner.balance - callValue].reduce((a, b) => (a < b ? a : b)) / tronParameters.energyFee
    const holders = state.tokens.get(contract)!
    const data = (tx.value.data as string | undefined) ?? ""
    let outcome: { readonly ret: string; readonly energy: bigint; readonly log?: Record<string, Json> }
    const decodedTransfer = data.length === 8 + 128 && data.startsWith(transferSelector) && /^0{24}/.test(data.slice(8, 72))
      ? { to: `41${data.slice(32, 72)}`, amount: BigInt(`0x${data.slice(72)}`) }
      : undefined
    const spend = (energy: bigint, ret: string, log?: Record<string, Json>) =>
      energy > energyLimit ? { ret: "OUT_OF_ENERGY", energy: energyLimit } : { ret, energy, ...(log === undefined ? {} : { log }) }
    if (decodedTransfer === undefined || callValue > 0n) {
      outcome = spend(trc20Energy.revert, "REVERT")
    } else if ((holders.get(tx.owner) ?? 0n) < decodedTransfer.amount || blacklisted.get(contract)?.has(tx.owner) === true) {
      outcome = spend(trc20Energy.revert, "REVERT")
    } else {
      const energy = (holders.get(decodedTransfer.to) ?? 0n) > 0n ? trc20Energy.toHolder : trc20Energy.toNewHolder
      outcome = spend(energy, "SUCCESS", {
        // java-tron prints a log's address without the 41 prefix.
        address: contract.slice(2),
        topics: [transferTopic, word(tx.owner.slice(2)), word(decodedTransfer.to.slice(2))],
        data: word(decodedTransfer.amount.toString(16))
      })
      if (outcome.ret === "SUCCESS") {
        holders.set(tx.owner, holders.get(tx.owner)! - decodedTransfer.amount)
        holders.set(decodedTransfer.to, (holders.get(decodedTransfer.to) ?? 0n) + decodedTransfer.amount)
      }
    }
    const energyFee = outcome.energy * tronParameters.energyFee
    owner.balance -= energyFee
    const failed = outcome.ret !== "SUCCESS"
    return {
      contractRet: outcome.ret,
      info: compact({
        fee: (receipt.net_fee ?? 0n) + energyFee,
        contractResult: [""],
        contract_address: contract,
        receipt: compact({ ...receipt, energy_usage_total: outcome.energy, energy_fee: energyFee, result: outcome.ret }),
        log: outcome.log === undefined ? undefined : [outcome.log],
        result: failed ? "FAILED" : undefined,
        resMessage: failed
          ? bytesToHex(new TextEncoder().encode(outcome.ret === "REVERT" ? "REVERT opcode executed" : "Not enough energy"))
          : undefined
      })
    }
  }

  /** TAPoS (java-tron Manager.validateTapos): the block whose number ends in ref_block_bytes must carry that hash. */
  const taposValid = (decoded: TronTransactionBytes) => {
    if (decoded.refBlockBytes.length !== 2 || decoded.refBlockHash.length !== 8) return false
    const suffix = bytesToHex(decoded.refBlockBytes)
    for (let index = chain.length - 1; index >= 0 && index >= chain.length - 65_536; index--) {
      const block = chain[index]!
      if (block.number.toString(16).padStart(16, "0").slice(-4) === suffix) {
        return block.blockID.slice(16, 32) === bytesToHex(decoded.refBlockHash)
      }
    }
    return false
  }

  const expirationValid = (decoded: TronTransactionBytes) =>
    decoded.expiration > head().timestamp && decoded.expiration <= head().timestamp + maxExpirationMillis

  /** What the node makes of a transaction's bytes, or Refused with java-tron's response code. */
  const admit = (hex: string): PoolTransaction => {
    let decoded: TronTransactionBytes
    try {
      decoded = decodeTronTransaction(hex)
    } catch (error) {
      throw new Refused("OTHER_ERROR", `cannot parse transaction: ${(error as Error).message}`)
    }
    if (decoded.contracts.length !== 1) throw new Refused("CONTRACT_VALIDATE_ERROR", "one contract per transaction")
    if (chain.some((block) => block.transactions.some((executed) => executed.tx.txId === decoded.txId)) ||
      pool.some((tx) => tx.txId === decoded.txId)) {
      throw new Refused("DUP_TRANSACTION_ERROR", "dup transaction")
    }
    const contract = decoded.contracts[0]!
    const fields = readProtoFields(contract.value)
    const ownerBytes = protoBytes(fields, 1)
    if (!validAddressBytes(ownerBytes)) throw new Refused("CONTRACT_VALIDATE_ERROR", "Invalid ownerAddress!")
    const owner = bytesToHex(ownerBytes)
    let contractType: PoolTransaction["contractType"]
    let value: Record<string, Json>
    if (contract.type === 1 && contract.typeUrl === "type.googleapis.com/protocol.TransferContract") {
      const to = protoBytes(fields, 2)
      if (!validAddressBytes(to)) throw new Refused("CONTRACT_VALIDATE_ERROR", "Invalid toAddress!")
      contractType = "TransferContract"
      value = { amount: protoVarint(fields, 3), owner_address: owner, to_address: bytesToHex(to) }
    } else if (contract.type === 31 && contract.typeUrl === "type.googleapis.com/protocol.TriggerSmartContract") {
      const target = protoBytes(fields, 2)
      if (!validAddressBytes(target)) throw new Refused("CONTRACT_VALIDATE_ERROR", "Invalid contract address")
      contractType = "TriggerSmartContract"
      value = compact({
        data: bytesToHex(protoBytes(fields, 4)),
        owner_address: owner,
        contract_address: bytesToHex(target),
        call_value: protoVarint(fields, 3)
      })
    } else {
      throw new Refused("CONTRACT_VALIDATE_ERROR", `contract type ${contract.type} is not supported by this stand-in`)
    }
    // One signature by the owner (no multi-signature permissions here).
    if (decoded.signatures.length !== 1 || recoverOwner(decoded.signatures[0]!, hexToBytes(decoded.txId)) !== owner) {
      throw new Refused("SIGERROR", "Validate signature error: signature does not match the owner address")
    }
    if (!taposValid(decoded)) {
      throw new Refused("TAPOS_ERROR", `Tapos check error: ref block ${bytesToHex(decoded.refBlockBytes)} not found or hash mismatch`)
    }
    if (!expirationValid(decoded)) {
      throw new Refused("TRANSACTION_EXPIRATION_ERROR", `Transaction expiration, transaction expiration time is ${decoded.expiration}, but the head block time is ${head().timestamp}`)
    }
    return { txId: decoded.txId, hex: hex.toLowerCase(), decoded, owner, contractType, value }
  }

  const broadcastHex = (hex: string) => {
    try {
      const tx = admit(hex)
      // Checked against the state the waiting transactions leave (java-tron's pending state).
      execute(pendingState(), tx)
      pool.push(tx)
      return { result: true, code: "SUCCESS", message: "", txid: tx.txId }
    } catch (error) {
      if (!(error instanceof Refused)) throw error
      return { result: false, code: error.code, message: error.message }
    }
  }

  const mineOne = () => {
    const parent = head()
    let state = cloneState(parent.stateAfter)
    const number = parent.number + 1n
    const timestamp = number === 1n ? startMillis - (startMillis % blockIntervalMillis) : parent.timestamp + blockIntervalMillis
    const executed: Array<Executed> = []
    for (const tx of pool) {
      // Checked again for this block: expired or no longer valid transactions are dropped.
      if (tx.decoded.expiration <= parent.timestamp || !taposValid(tx.decoded)) continue
      const trial = cloneState(state)
      try {
        const result = execute(trial, tx)
        state = trial
        executed.push({ tx, contractRet: result.contractRet, info: result.info })
      } catch (error) {
        if (!(error instanceof Refused)) throw error
      }
    }
    pool = []
    const txTrieRoot = trieRoot(executed)
    chain.push({
      number,
      blockID: blockId(number, parent.blockID, timestamp, txTrieRoot),
      parentHash: parent.blockID,
      timestamp,
      txTrieRoot,
      transactions: executed,
      stateAfter: state
    })
  }

  const mine = (count = 1) => {
    for (let index = 0; index < count; index++) mineOne()
  }

  const reorg = (depth: number, reorgOptions: { readonly keepTransactions?: boolean } = {}) => {
    if (depth < 1 || head().number - BigInt(depth) < solidified()) throw new Error(`cannot reorganize ${depth} blocks: solidified blocks never change`)
    const removed = chain.splice(chain.length - depth, depth)
    pool = reorgOptions.keepTransactions === true ? removed.flatMap((block) => block.transactions.map((executed) => executed.tx)) : []
    forkSalt++
    mine(depth + 1)
  }

  // JSON views as java-tron prints them (visible=false: addresses in 41-hex).
  const transactionJson = (tx: PoolTransaction, contractRet: string | undefined) => ({
    ...(contractRet === undefined ? {} : { ret: [{ contractRet }] }),
    signature: tx.decoded.signatures.map(bytesToHex),
    txID: tx.txId,
    raw_data: compact({
      contract: [{
        parameter: { value: tx.value, type_url: `type.googleapis.com/protocol.${tx.contractType}` },
        type: tx.contractType
      }],
      ref_block_bytes: bytesToHex(tx.decoded.refBlockBytes),
      ref_block_hash: bytesToHex(tx.decoded.refBlockHash),
      expiration: tx.decoded.expiration,
      fee_limit: tx.decoded.feeLimit,
      timestamp: tx.decoded.timestamp
    }),
    raw_data_hex: bytesToHex(tx.decoded.rawData)
  })

  const witness = `41${bytesToHex(sha256(new TextEncoder().encode("witness")).slice(0, 20))}`
  const blockJson = (block: Block, detail = true) => ({
    blockID: block.blockID,
    block_header: {
      raw_data: compact({
        number: block.number,
        txTrieRoot: block.txTrieRoot,
        witness_address: witness,
        parentHash: block.parentHash,
        version: 31n,
        timestamp: block.timestamp
      }),
      witness_signature: bytesToHex(sha256(hexToBytes(block.blockID))).repeat(2) + "00"
    },
    // An empty block has no `transactions` key at all.
    ...(detail && block.transactions.length > 0
      ? { transactions: block.transactions.map((executed) => transactionJson(executed.tx, executed.contractRet)) }
      : {})
  })

  const findExecuted = (txId: string) => {
    for (const block of chain) {
      const executed = block.transactions.find((candidate) => candidate.tx.txId === txId)
      if (executed !== undefined) return { block, executed }
    }
    return undefined
  }

  const infoJson = (block: Block, executed: Executed) => ({
    id: executed.tx.txId,
    ...executed.info,
    blockNumber: block.number,
    blockTimeStamp: block.timestamp
  })

  const transactionInfo = (txId: string) => {
    const found = findExecuted(txId)
    return found === undefined ? {} : infoJson(found.block, found.executed)
  }

  const accountJson = (block: Block, body: Record<string, any>) => {
    const address = requestAddress(body.address)
    if (address === undefined) throw new HttpError(400, "invalid address")
    const found = account(block.stateAfter, address)
    return found === undefined ? {} : compact({ address, balance: found.balance, create_time: 1n, free_net_usage: found.freeNetUsed })
  }

  const blockByNum = (value: unknown) => {
    const number = typeof value === "number" || typeof value === "string" ? BigInt(value) : -1n
    return number >= 0n && number < BigInt(chain.length) ? chain[Number(number)]! : undefined
  }

  const routes: Record<string, (body: Record<string, any>) => Json> = {
    "/wallet/getnowblock": () => blockJson(head()),
    "/walletsolidity/getnowblock": () => blockJson(chain[Number(solidified())]!),
    "/wallet/getblockbynum": (body) => {
      const block = blockByNum(body.num)
      return block === undefined ? {} : blockJson(block)
    },
    "/wallet/getblockbyid": (body) => {
      const block = chain.find((candidate) => candidate.blockID === body.value)
      return block === undefined ? {} : blockJson(block)
    },
    // tronweb's reference block: wallet/getblock with detail false is the head's header.
    "/wallet/getblock": (body) => {
      const block = body.id_or_num === undefined ? head() : (blockByNum(body.id_or_num) ?? chain.find((candidate) => candidate.blockID === body.id_or_num))
      return block === undefined ? {} : blockJson(block, body.detail === true)
    },
    "/wallet/broadcasthex": (body) => {
      if (typeof body.transaction !== "string") return { result: false, code: "OTHER_ERROR", message: "transaction is required" }
      const answer = broadcastHex(body.transaction)
      if (!answer.result) return { ...answer, txid: safeTxId(body.transaction) }
      // The transaction comes back as a JSON string (tronweb's sendHexTransaction parses it).
      const tx = pool.find((candidate) => candidate.txId === answer.txid)!
      return { ...answer, transaction: stringify(transactionJson(tx, undefined)) }
    },
    // The JSON form: java-tron rebuilds the protobuf from raw_data; here raw_data_hex is what counts.
    "/wallet/broadcasttransaction": (body) => {
      if (typeof body.raw_data_hex !== "string" || !Array.isArray(body.signature)) {
        return { result: false, code: "OTHER_ERROR", message: bytesToHex(new TextEncoder().encode("raw_data_hex and signature are required")) }
      }
      const answer = broadcastHex(encodeTransaction(body.raw_data_hex, body.signature))
      // broadcasttransaction prints its message as hex (the protobuf bytes field), unlike broadcasthex.
      return answer.result
        ? { result: true, txid: answer.txid }
        : { code: answer.code, txid: safeTxId(encodeTransaction(body.raw_data_hex, body.signature)), message: bytesToHex(new TextEncoder().encode(answer.message)) }
    },
    "/wallet/gettransactionbyid": (body) => {
      const found = typeof body.value === "string" ? findExecuted(body.value) : undefined
      return found === undefined ? {} : transactionJson(found.executed.tx, found.executed.contractRet)
    },
    "/wallet/gettransactionfrompending": (body) => {
      const tx = pool.find((candidate) => candidate.txId === body.value)
      return tx === undefined ? {} : transactionJson(tx, undefined)
    },
    "/wallet/gettransactioninfobyid": (body) => (typeof body.value === "string" ? transactionInfo(body.value) : {}),
    // tronweb reads transaction infos from the solidity API: only solidified blocks' transactions are there.
    "/walletsolidity/gettransactioninfobyid": (body) => {
      const found = typeof body.value === "string" ? findExecuted(body.value) : undefined
      return found === undefined || found.block.number > solidified() ? {} : infoJson(found.block, found.executed)
    },
    "/wallet/gettransactioninfobyblocknum": (body) => {
      const block = blockByNum(body.num)
      return block === undefined ? [] : block.transactions.map((executed) => infoJson(block, executed))
    },
    "/wallet/getaccount": (body) => accountJson(head(), body),
    // The solidity API answers from the solidified block's state (tronweb's getBalance reads it).
    "/walletsolidity/getaccount": (body) => accountJson(chain[Number(solidified())]!, body),
    "/wallet/getchainparameters": () => ({
      chainParameter: [
        { key: "getMaintenanceTimeInterval", value: 21_600_000n },
        { key: "getCreateAccountFee", value: tronParameters.createAccountFee },
        { key: "getTransactionFee", value: tronParameters.transactionFee },
        { key: "getFreeNetLimit", value: tronParameters.freeNetLimit },
        { key: "getCreateNewAccountFeeInSystemContract", value: tronParameters.createNewAccountFeeInSystemContract },
        { key: "getEnergyFee", value: tronParameters.energyFee },
        { key: "getMaxFeeLimit", value: tronParameters.maxFeeLimit },
        { key: "getAllowTvmTransferTrc10" }
      ]
    }),
    "/wallet/triggerconstantcontract": (body) => {
      const owner = requestAddress(body.owner_address)
      const contract = requestAddress(body.contract_address)
      if (contract === undefined || owner === undefined) throw new HttpError(400, "invalid address")
      if (!hosted.has(contract)) {
        return { result: { code: "CONTRACT_VALIDATE_ERROR", message: bytesToHex(new TextEncoder().encode("Smart contract is not exist.")) } }
      }
      const selector = typeof body.function_selector === "string"
        ? bytesToHex(keccak_256(new TextEncoder().encode(body.function_selector)).slice(0, 4))
        : undefined
      const parameter = typeof body.parameter === "string" ? body.parameter.toLowerCase() : ""
      const data = selector === undefined ? String(body.data ?? "") : selector + parameter
      const holders = head().stateAfter.tokens.get(contract)!
      if (data.startsWith(balanceOfSelector) && data.length === 8 + 64) {
        const holder = `41${data.slice(32)}`
        return { result: { result: true }, energy_used: 935n, constant_result: [word((holders.get(holder) ?? 0n).toString(16))] }
      }
      if (data.startsWith(transferSelector) && data.length === 8 + 128) {
        const to = `41${data.slice(32, 72)}`
        const amount = BigInt(`0x${data.slice(72)}`)
        if ((holders.get(owner) ?? 0n) < amount || blacklisted.get(contract)?.has(owner) === true) {
          return {
            result: { code: "CONTRACT_EXE_ERROR", message: bytesToHex(new TextEncoder().encode("REVERT opcode executed")) },
            energy_used: trc20Energy.revert,
            transaction: { ret: [{ ret: "FAILED" }] }
          }
        }
        const energy = (holders.get(to) ?? 0n) > 0n ? trc20Energy.toHolder : trc20Energy.toNewHolder
        return { result: { result: true }, energy_used: energy, constant_result: [word("1")], transaction: { ret: [{}] } }
      }
      return { result: { code: "CONTRACT_EXE_ERROR", message: bytesToHex(new TextEncoder().encode("REVERT opcode executed")) } }
    }
  }

  const server: Server = createServer((request, response) => {
    void handle(request, response)
  })
  const expectedAuthorization = options.credentials === undefined
    ? undefined
    : `Basic ${Buffer.from(`${options.credentials.user}:${options.credentials.password}`).toString("base64")}`

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const send = (status: number, body: string) => {
      response.writeHead(status, { "content-type": "application/json" })
      response.end(body)
    }
    try {
      const chunks: Array<Buffer> = []
      for await (const chunk of request) chunks.push(chunk as Buffer)
      if (expectedAuthorization !== undefined && request.headers.authorization !== expectedAuthorization) {
        return send(401, stringify({ Error: "unauthorized" }))
      }
      const path = new URL(request.url ?? "/", "http://node").pathname
      calls.set(path, (calls.get(path) ?? 0) + 1)
      const route = options.without?.includes(path) === true ? undefined : routes[path]
      if (route === undefined) return send(404, "")
      const text = Buffer.concat(chunks).toString("utf8")
      const body = text.trim() === "" ? {} : JSON.parse(text)
      return send(200, stringify(route(body)))
    } catch (error) {
      if (error instanceof HttpError) return send(error.status, stringify({ Error: error.message }))
      // java-tron answers a request it cannot parse with 200 and an Error field.
      return send(200, stringify({ Error: String(error) }))
    }
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  const userinfo = options.credentials === undefined
    ? ""
    : `${encodeURIComponent(options.credentials.user)}:${encodeURIComponent(options.credentials.password)}@`
  // Block 1 carries a real time: transactions refer to it, and expire 60 s after their reference block.
  mine(1)

  const builder = new TronWeb({ fullHost: "http://127.0.0.1:1" })
  const sign: TronNode["sign"] = async (privateKey, to, amount, signOptions = {}) => {
    const from = TronWeb.address.fromPrivateKey(privateKey) as string
    const reference = head()
    const blockHeader = {
      ref_block_bytes: reference.number.toString(16).slice(-4).padStart(4, "0"),
      ref_block_hash: reference.blockID.slice(16, 32),
      expiration: Number(reference.timestamp) + (signOptions.expirationMillis ?? 60_000),
      timestamp: Number(reference.timestamp)
    }
    const unsigned = signOptions.token === undefined
      ? await builder.transactionBuilder.sendTrx(to, Number(amount), from, { blockHeader })
      : (await builder.transactionBuilder.triggerSmartContract(
        signOptions.token,
        "transfer(address,uint256)",
        { feeLimit: Number(signOptions.feeLimit ?? 100_000_000n), txLocal: true, blockHeader },
        [{ type: "address", value: to }, { type: "uint256", value: amount.toString() }],
        from
      )).transaction
    const signed = tronUtils.crypto.signTransaction(privateKey, unsigned)
    return { txId: signed.txID, hex: encodeTransaction(signed.raw_data_hex, signed.signature ?? []) }
  }

  return {
    url: `http://${userinfo}127.0.0.1:${port}`,
    genesisBlockId: chain[0]!.blockID,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
    head: () => ({ number: head().number, blockID: head().blockID, timestamp: head().timestamp }),
    solidified,
    mine,
    reorg,
    broadcastHex: (hex) => {
      const { code, message, result } = broadcastHex(hex)
      return { result, code, message }
    },
    fund: async (to, amount, token) => {
      const signed = await sign(funderPrivateKey, to, amount, token === undefined ? {} : { token })
      const answer = broadcastHex(signed.hex)
      if (!answer.result) throw new Error(`funding refused: ${answer.code} ${answer.message}`)
      mine(1)
      return { txHash: signed.txId, height: head().number }
    },
    sign,
    trxBalance: (address) => account(head().stateAfter, hexOf(address))?.balance ?? 0n,
    tokenBalance: (contract, holder) => head().stateAfter.tokens.get(hexOf(contract))?.get(hexOf(holder)) ?? 0n,
    transactionInfo,
    sentBy: (address) =>
      chain.flatMap((block) => block.transactions.filter((executed) => executed.tx.owner === hexOf(address)).map((executed) => executed.tx.txId)),
    isPending: (txId) => pool.some((tx) => tx.txId === txId),
    dropPending: () => {
      const dropped = pool.length
      pool = []
      return dropped
    },
    blacklist: (contract, holder, listed) => {
      const holders = blacklisted.get(hexOf(contract)) ?? new Set<string>()
      if (listed) holders.add(hexOf(holder))
      else holders.delete(hexOf(holder))
      blacklisted.set(hexOf(contract), holders)
    },
    calls
  }
}

class HttpError extends Error {
  readonly status: number
  constructor(status: number, message: string) {
    super(message)
    this.status = status
  }
}

const safeTxId = (hex: string) => {
  try {
    return decodeTronTransaction(hex).txId
  } catch {
    return undefined
  }
}

/** A protobuf `Transaction` from raw_data's hex and the signatures (fields 1 and 2, length-delimited). */
const encodeTransaction = (rawDataHex: string, signatures: ReadonlyArray<string>): string => {
  const field = (number: number, hex: string) => {
    let length = hex.length / 2
    const lengthBytes: Array<number> = []
    do {
      lengthBytes.push((length & 0x7f) | (length > 0x7f ? 0x80 : 0))
      length >>>= 7
    } while (length > 0)
    return ((number << 3) | 2).toString(16).padStart(2, "0") + bytesToHex(new Uint8Array(lengthBytes)) + hex
  }
  return field(1, rawDataHex) + signatures.map((signature) => field(2, signature)).join("")
}

