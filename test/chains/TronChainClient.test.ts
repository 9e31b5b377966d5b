/**
 * The TRON client's own traps (docs/tron.md), beyond the chain client contract (contract/TronContract.test.ts), on
 * the java-tron HTTP API stand-in: what tronweb 6.5.1 reads from that stand-in (so its shapes are the ones tronweb
 * expects of java-tron), credentials in the URL's userinfo, no URL in any message, java-tron's broadcast codes
 * sorted into accepted / try again / refused (decisions.md "Sending on real networks"), a TRC-20 call that runs
 * out of energy (included, failed, fee_limit burned), int64 amounts beyond 2^53, expiry that is only reported once
 * provable, and the genesis block as the chain's identity.
 */
import { assert, describe, it } from "@effect/vitest"
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Effect, Redacted } from "effect"
import { TronWeb } from "tronweb"
import { afterAll, beforeAll } from "vitest"
import { loadCatalogFile } from "../../src/catalog/Catalog.ts"
import type { SignedWithdrawal } from "../../src/chains/ChainClient.ts"
import { makeNodeClient } from "../../src/chains/NodeClients.ts"
import { makeTronChainClient, type TronChainClient } from "../../src/chains/tron/TronChainClient.ts"
import { funderAddress, startTronNode, type TronNode, tronParameters } from "../support/TronNode.ts"

const usdtContract = "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
const usdt = "TRON_NILE_USDT"
const trx = "TRON_NILE_TRX"
const secret = "s3cret-api-key"

let node: TronNode
let client: TronChainClient

const makeClient = (url: string) =>
  makeTronChainClient({
    networkKey: "TRON_NILE",
    rpcUrl: Redacted.make(url),
    nativeAssetId: trx,
    tokens: [{ assetId: usdt, contract: usdtContract }],
    timeoutMillis: 3_000,
    sending: { feeRateCap: 100_000_000n }
  })

const freshKey = () => {
  const privateKey = bytesToHex(secp256k1.utils.randomSecretKey())
  return { privateKey, address: TronWeb.address.fromPrivateKey(privateKey) as string }
}

const signed = (tx: { readonly txId: string; readonly hex: string }, from: string, to: string): SignedWithdrawal => ({
  withdrawalId: tx.txId,
  from,
  to,
  assetId: trx,
  amount: 1n,
  raw: tx.hex,
  txHash: tx.txId,
  networkFee: 0n
})

beforeAll(async () => {
  node = await startTronNode({
    tokens: [{ contract: usdtContract, supply: 10n ** 15n }],
    credentials: { user: "key", password: secret }
  })
  client = makeClient(node.url)
})
afterAll(() => node.stop())

describe("TRON client on the java-tron HTTP API stand-in", () => {
  it("the stand-in answers in the shapes tronweb 6.5.1 reads: blocks, balances, constant calls, both broadcasts", async () => {
    // tronweb cannot send userinfo either: it gets the header itself.
    const url = new URL(node.url)
    const tronWeb = new TronWeb({
      fullHost: `http://${url.host}`,
      headers: { authorization: `Basic ${Buffer.from(`key:${secret}`).toString("base64")}` }
    })
    const current = await tronWeb.trx.getCurrentBlock()
    assert.strictEqual(current.blockID, node.head().blockID)
    const first = await tronWeb.trx.getBlockByNumber(1)
    assert.strictEqual(first.block_header.raw_data.number, 1)
    assert.strictEqual(await tronWeb.trx.getUnconfirmedBalance(funderAddress), Number(node.trxBalance(funderAddress)))
    const balanceOf = await tronWeb.transactionBuilder.triggerConstantContract(
      usdtContract,
      "balanceOf(address)",
      {},
      [{ type: "address", value: funderAddress }],
      funderAddress
    )
    assert.strictEqual(BigInt(`0x${balanceOf.constant_result[0]}`), node.tokenBalance(usdtContract, funderAddress))

    // Online building asks wallet/getblock for the reference block; the JSON broadcast rebuilds the protobuf.
    const sender = freshKey()
    await node.fund(sender.address, 10_000_000n)
    const recipient = freshKey().address
    const unsigned = await tronWeb.transactionBuilder.sendTrx(recipient, 1_000_000, sender.address)
    const signedTx = await tronWeb.trx.sign(unsigned, sender.privateKey)
    const sent = await tronWeb.trx.sendRawTransaction(signedTx)
    assert.isTrue(sent.result, JSON.stringify(sent))
    node.mine(1)
    const read = await tronWeb.trx.getTransaction(signedTx.txID)
    assert.strictEqual(read.ret[0]!.contractRet, "SUCCESS")
    // Transfers to a new account: 0.1 TRX instead of bandwidth plus 1 TRX for the account.
    assert.strictEqual(node.trxBalance(sender.address), 10_000_000n - 1_000_000n - 1_100_000n)

    const hex = await node.sign(sender.privateKey, recipient, 1_000n)
    const hexAnswer = await tronWeb.trx.sendHexTransaction(hex.hex)
    assert.isTrue(hexAnswer.result)
    assert.strictEqual((hexAnswer.transaction as { txID: string }).txID, hex.txId)
  }, 30_000)

  it.live("credentials travel as HTTP Basic from the URL's userinfo; a refused or absent node is ChainUnavailable, never naming the URL", () =>
    Effect.gen(function*() {
      const head = yield* client.head
      assert.strictEqual(head.height, node.head().number)
      assert.strictEqual(head.hash, node.head().blockID)
      const wrong = node.url.replace(secret, "wrong-key")
      const refused = yield* Effect.flip(makeClient(wrong).head)
      assert.strictEqual(refused._tag, "ChainUnavailable")
      assert.include(refused.message, "HTTP 401")
      const absent = yield* Effect.flip(makeClient(`http://key:${secret}@127.0.0.1:9/prefix`).block(1n))
      assert.strictEqual(absent._tag, "ChainUnavailable")
      for (const message of [refused.message, absent.message]) {
        assert.notInclude(message, secret)
        assert.notInclude(message, "wrong-key")
        assert.notInclude(message, "127.0.0.1")
      }
    }))

  it.live("block 0 is the chain's identity: a catalog genesis hash that differs refuses the start, naming both", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* client.genesisBlockId, node.genesisBlockId)
      const catalog = yield* loadCatalogFile("preproduction").pipe(Effect.orDie)
      const network = catalog.networks.find((candidate) => candidate.networkKey === "TRON_NILE")!
      const assets = catalog.assets.filter((asset) => asset.networkKey === "TRON_NILE")
      const input = (genesisHash: string | null) => ({ network: { ...network, genesisHash }, assets, rpcUrl: Redacted.make(node.url) })
      yield* makeNodeClient(input(node.genesisBlockId.toUpperCase()))
      yield* makeNodeClient(input(null))
      const other = "ab".repeat(32)
      const error = yield* Effect.flip(makeNodeClient(input(other)))
      assert.strictEqual(error._tag, "ConfigInvalid")
      assert.include(error.message, node.genesisBlockId)
      assert.include(error.message, other)
      assert.notInclude(error.message, secret)
    }))

  it.live("int64 fields beyond 2^53 are read exactly (java-tron prints them as JSON numbers)", () =>
    Effect.gen(function*() {
      const exact = node.trxBalance(funderAddress)
      assert.isAbove(Number(exact), Number.MAX_SAFE_INTEGER)
      assert.strictEqual(yield* client.withdrawals!.balance!(funderAddress, trx), exact)
      assert.strictEqual(yield* client.withdrawals!.balance!(funderAddress, usdt), node.tokenBalance(usdtContract, funderAddress))
      assert.strictEqual(yield* client.withdrawals!.balance!(freshKey().address, trx), 0n, "no account: 0")
    }))

  it.live("broadcast: a bad signature and a call to no contract are refused for good; no balance now, a reference block off the chain and an expired one are not", () =>
    Effect.gen(function*() {
      const chain = client.withdrawals!
      const sender = freshKey()
      yield* Effect.promise(() => node.fund(sender.address, 5_000_000n))
      const to = freshKey().address

      const good = yield* Effect.promise(() => node.sign(sender.privateKey, to, 1_000n))
      const tampered = { ...good, hex: good.hex.slice(0, -6) + (good.hex.slice(-6, -4) === "00" ? "01" : "00") + good.hex.slice(-4) }
      const badSignature = yield* Effect.flip(chain.broadcast(signed(tampered, sender.address, to)))
      assert.strictEqual(badSignature._tag, "BroadcastRejected")
      assert.include(badSignature.message, "SIGERROR")

      const noContract = yield* Effect.promise(() =>
        node.sign(sender.privateKey, to, 1n, { token: freshKey().address, feeLimit: 1_000_000n })
      )
      const refused = yield* Effect.flip(chain.broadcast(signed(noContract, sender.address, to)))
      assert.strictEqual(refused._tag, "BroadcastRejected")
      assert.include(refused.message, "CONTRACT_VALIDATE_ERROR")

      const tooMuch = yield* Effect.promise(() => node.sign(sender.privateKey, to, 50_000_000n))
      const poor = yield* Effect.flip(chain.broadcast(signed(tooMuch, sender.address, to)))
      assert.strictEqual(poor._tag, "ChainUnavailable", "more TRX may arrive before it expires")
      assert.include(poor.message, "balance is not sufficient")

      // Signed on a block that a reorganization then replaces: TAPoS fails.
      node.mine(1)
      const onFork = yield* Effect.promise(() => node.sign(sender.privateKey, to, 1_000n))
      node.reorg(1)
      const tapos = yield* Effect.flip(chain.broadcast(signed(onFork, sender.address, to)))
      assert.strictEqual(tapos._tag, "ChainUnavailable")
      assert.include(tapos.message, "TAPOS_ERROR")

      // The good one was never accepted (its signature was checked on the tampered copy only): now it is.
      yield* chain.broadcast(signed(good, sender.address, to))
      assert.strictEqual(yield* client.transactionState(good.txId), "PENDING")
      node.mine(1)
      assert.strictEqual(yield* client.transactionState(good.txId), "INCLUDED")
    }))

  it.live("expiry: refused once the head's time passes it, reported expired only once the solidified block's time has; never when included", () =>
    Effect.gen(function*() {
      const chain = client.withdrawals!
      const sender = freshKey()
      yield* Effect.promise(() => node.fund(sender.address, 5_000_000n))
      const to = freshKey().address
      const late = yield* Effect.promise(() => node.sign(sender.privateKey, to, 1_000n))
      const included = yield* Effect.promise(() => node.sign(sender.privateKey, to, 2_000n))
      yield* chain.broadcast(signed(included, sender.address, to))
      node.mine(1)
      assert.isFalse(yield* chain.expired(signed(late, sender.address, to)))
      // 60 s of blocks (3 s each) and one more: the head is past the expiration.
      node.mine(20)
      const refused = yield* Effect.flip(chain.broadcast(signed(late, sender.address, to)))
      assert.strictEqual(refused._tag, "ChainUnavailable")
      assert.include(refused.message, "TRANSACTION_EXPIRATION_ERROR")
      assert.isFalse(yield* chain.expired(signed(late, sender.address, to)), "the solidified block is still before it")
      node.mine(19)
      assert.isTrue(yield* chain.expired(signed(late, sender.address, to)))
      assert.isFalse(yield* chain.expired(signed(included, sender.address, to)), "included: not to be signed again")
      const notTron = yield* Effect.flip(chain.expired({ raw: "zz", txHash: late.txId }))
      assert.strictEqual(notTron._tag, "ChainUnavailable")
    }))

  it.live("a TRC-20 call whose fee_limit cannot pay its energy is included as OUT_OF_ENERGY: failed, fee_limit burned, nothing moved", () =>
    Effect.gen(function*() {
      const sender = freshKey()
      yield* Effect.promise(() => node.fund(sender.address, 50_000_000n))
      yield* Effect.promise(() => node.fund(sender.address, 5_000_000n, usdtContract))
      const to = freshKey().address
      const feeLimit = 1_000_000n
      const tx = yield* Effect.promise(() => node.sign(sender.privateKey, to, 1_000_000n, { token: usdtContract, feeLimit }))
      yield* client.withdrawals!.broadcast({ ...signed(tx, sender.address, to), assetId: usdt })
      node.mine(1)
      const inclusion = yield* client.withdrawals!.inclusion(tx.txId)
      assert.isDefined(inclusion)
      assert.isFalse(inclusion!.succeeded)
      // All the energy the fee_limit buys, burned; the bytes came from the free allowance.
      assert.strictEqual(inclusion!.networkFee, (feeLimit / tronParameters.energyFee) * tronParameters.energyFee)
      assert.strictEqual((node.transactionInfo(tx.txId).receipt as { result?: string }).result, "OUT_OF_ENERGY")
      const block = yield* client.block(inclusion!.height)
      assert.isFalse(block!.transfers.some((transfer) => transfer.txHash === tx.txId))
      assert.strictEqual(yield* client.withdrawals!.balance!(to, usdt), 0n)
    }))

  it.live("a node without gettransactionfrompending (before java-tron 4.4) says UNKNOWN for a pending transaction; one without the solidity API cannot give the head", () =>
    Effect.gen(function*() {
      const older = yield* Effect.promise(() => startTronNode({ without: ["/wallet/gettransactionfrompending"] }))
      const olderClient = makeClient(older.url)
      const sender = freshKey()
      yield* Effect.promise(() => older.fund(sender.address, 5_000_000n))
      const to = freshKey().address
      const tx = yield* Effect.promise(() => older.sign(sender.privateKey, to, 1_000n))
      yield* olderClient.withdrawals!.broadcast(signed(tx, sender.address, to))
      assert.strictEqual(yield* olderClient.transactionState(tx.txId), "UNKNOWN")
      older.mine(1)
      assert.strictEqual(yield* olderClient.transactionState(tx.txId), "INCLUDED")
      yield* Effect.promise(() => older.stop())

      const fullNodePort = yield* Effect.promise(() => startTronNode({ without: ["/walletsolidity/getnowblock"] }))
      const error = yield* Effect.flip(makeClient(fullNodePort.url).head)
      assert.strictEqual(error._tag, "ChainUnavailable")
      assert.include(error.message, "/walletsolidity/getnowblock: HTTP 404")
      yield* Effect.promise(() => fullNodePort.stop())
    }))

  it.live("a block is one call, and a second (its transaction infos) only when it holds a contract call", () =>
    Effect.gen(function*() {
      const infos = () => node.calls.get("/wallet/gettransactioninfobyblocknum") ?? 0
      const plain = yield* Effect.promise(() => node.fund(freshKey().address, 1_000_000n))
      const before = infos()
      const read = yield* client.block(plain.height)
      assert.strictEqual(read!.transfers.length, 1)
      assert.strictEqual(infos(), before, "TRX transfers only: no transaction infos asked")
      const token = yield* Effect.promise(() => node.fund(freshKey().address, 1_000_000n, usdtContract))
      const withCall = yield* client.block(token.height)
      assert.strictEqual(withCall!.transfers[0]!.assetId, usdt)
      assert.strictEqual(infos(), before + 1)
    }))
})
