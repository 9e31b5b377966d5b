/**
 * The contract every chain client keeps (issue 11, "One contract for chain clients"): what the watcher, the sending
 * pipeline and the sweeps need from a client, stated once and run unchanged against the simulated chain and each
 * real client with its node. A client passes it before it is wired in (chains/NodeClients.ts). Where the simulator
 * and a real node disagree, the simulator is wrong.
 *
 * A family plugs in with a `ContractNode`: its client, a node it controls (pay, mine, reorganize) and the catalog
 * rows of its network. The suite signs withdrawals with the service's own Signer (development mnemonic) through
 * withdrawals/WithdrawalRequests.ts, exactly as the pipeline does, so the bytes a node accepts here are the bytes the
 * service would send.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import type { CatalogAsset, CatalogNetwork } from "../../../src/catalog/Catalog.ts"
import type {
  ChainBlock,
  ChainClient,
  SignedWithdrawal,
  WithdrawalChain,
  WithdrawalParameters,
  WithdrawalTransfer
} from "../../../src/chains/ChainClient.ts"
import { Signer } from "../../../src/signer/Signer.ts"
import { platformKey, type SigningKey } from "../../../src/signer/TransactionRequest.ts"
import { withdrawalRequest } from "../../../src/withdrawals/WithdrawalRequests.ts"
import { testMnemonic } from "../../support/TestApp.ts"

export interface ContractNode {
  /** Names the describe block: "simulated", "anvil", "litecoind regtest", ... */
  readonly name: string
  readonly network: CatalogNetwork
  /** The catalog assets of the network the node carries (native first); tokens exist on the node at their contract. */
  readonly assets: ReadonlyArray<CatalogAsset>
  /** Starts the node (and whatever it needs); resolved before any case runs. */
  readonly start: () => Promise<void>
  readonly stop: () => Promise<void>
  /** The client under test, on the started node. */
  readonly client: () => ChainClient
  /** A fresh address of the family, in the normalized form of chains/AddressValidation, that nobody spends from. */
  readonly freshAddress: () => Promise<string>
  /**
   * Pays `amount` of the asset to `to` from an account the harness controls and makes the block that holds it the
   * head (more blocks may follow: BTC's own coinbase maturity etc. are the harness's business).
   */
  readonly pay: (to: string, assetId: string, amount: bigint) => Promise<{ readonly txHash: string; readonly height: bigint }>
  /** Adds `count` blocks on top of the head (they may hold pending transactions). */
  readonly mine: (count: number) => Promise<void>
  /**
   * Replaces the top `depth` blocks by at least `depth + 1` others (a longer fork), so the heights of the removed
   * blocks carry new hashes. The removed blocks' transactions may come back in the new ones or stay out.
   */
  readonly reorg: (depth: number) => Promise<void>
  /**
   * Gives the platform HOT address of this network (development mnemonic) `amount` of the asset, on chain and
   * mined; the contract sends its withdrawals from there.
   */
  readonly fundHot: (assetId: string, amount: bigint) => Promise<void>
  /**
   * Where the family has them: a withdrawal the node includes but that fails (EVM a reverting token, TRON
   * contractRet not SUCCESS, SOL meta.err), as a transfer for `withdrawalParameters`. Absent for BTC.
   */
  readonly failingTransfer?: ((hot: string) => Promise<Omit<WithdrawalTransfer, "withdrawalId">>) | undefined
  /** An amount of each asset the contract may send in one withdrawal (well above dust, far below the funding). */
  readonly smallAmount: (assetId: string) => bigint
}

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect as Effect.Effect<A, never>)

const signerLayer = Signer.layerLocalHd(Redacted.make(testMnemonic))
const withSigner = <A, E>(effect: Effect.Effect<A, E, Signer>) => run(Effect.provide(effect, signerLayer))

/** Signs a transfer with the chain's parameters the way OutgoingSends does (HOT's key unless another is given). */
export const signWithdrawal = (
  node: ContractNode,
  transfer: WithdrawalTransfer,
  parameters: WithdrawalParameters,
  key: SigningKey = platformKey("HOT")
): Promise<SignedWithdrawal> =>
  withSigner(Effect.gen(function*() {
    const signer = yield* Signer
    const asset = node.assets.find((candidate) => candidate.assetId === transfer.assetId)!
    const signed = yield* signer.signTransaction(withdrawalRequest(node.network, asset, transfer, parameters, key))
    return { ...transfer, raw: signed.raw, txHash: signed.txHash, networkFee: parameters.networkFee }
  }))

export const hotAddress = (network: CatalogNetwork): Promise<string> =>
  withSigner(Effect.gen(function*() {
    const signer = yield* Signer
    const derived = yield* signer.platformAddress({
      role: "HOT",
      family: network.chainFamily,
      btcNetwork: network.btcNetwork ?? undefined
    })
    return derived.address
  }))

let freshIndex = 0
/**
 * A fresh address of the network's family, in normalized form: a wallet key of the development mnemonic on an index
 * no test uses (tenant 7777), so each call gives another address and nobody sends from it.
 */
export const freshWalletAddress = (network: CatalogNetwork): Promise<string> =>
  withSigner(Effect.gen(function*() {
    const signer = yield* Signer
    freshIndex++
    const derived = yield* signer.deriveAddress({
      family: network.chainFamily,
      btcNetwork: network.btcNetwork ?? undefined,
      tenantIndex: 7777,
      userIndex: process.pid % 100_000,
      walletIndex: freshIndex
    })
    return derived.address
  }))

const blocksFrom = (client: ChainClient, from: bigint, to: bigint) =>
  run(Effect.gen(function*() {
    const blocks: Array<ChainBlock> = []
    for (let height = from; height <= to; height++) {
      const block = yield* client.block(height)
      assert.isDefined(block, `block ${height} exists up to the head`)
      blocks.push(block!)
    }
    return blocks
  }))

const assertLinked = (blocks: ReadonlyArray<ChainBlock>) => {
  for (let index = 1; index < blocks.length; index++) {
    assert.strictEqual(blocks[index]!.parentHash, blocks[index - 1]!.hash, `block ${blocks[index]!.height} links to its parent`)
    assert.strictEqual(blocks[index]!.height, blocks[index - 1]!.height + 1n)
  }
}

/** A hash no transaction of any family has: 32 bytes, in the family's own spelling. */
const unknownHash = (family: CatalogNetwork["chainFamily"]) => {
  switch (family) {
    case "EVM":
      return `0x${"ab".repeat(32)}`
    case "SOL":
      // base58 of 64 bytes: a signature nobody made.
      return "5".repeat(87)
    default:
      return "ab".repeat(32)
  }
}

/**
 * The chain's parameters for one signature, as OutgoingSends completes them: where nonces are the service's own
 * sequence (`accountNonce`), the sequence is seeded from the node's pending count; the contract sends one at a time.
 */
const parametersFor = async (chain: WithdrawalChain, transfer: WithdrawalTransfer): Promise<WithdrawalParameters> => {
  const parameters = await run(chain.withdrawalParameters(transfer))
  if (parameters.family !== "EVM" || chain.accountNonce === undefined) return parameters
  return { ...parameters, nonce: Number(await run(chain.accountNonce(transfer.from))) }
}

const waitIncluded = async (client: ChainClient, node: ContractNode, txHash: string) => {
  const chain = client.withdrawals!
  for (let attempt = 0; attempt < 20; attempt++) {
    const inclusion = await run(chain.inclusion(txHash))
    if (inclusion !== undefined) return inclusion
    await node.mine(1)
  }
  throw new Error(`${txHash} not included after 20 blocks`)
}

export const chainClientContract = (node: ContractNode) =>
  describe(`chain client contract: ${node.name}`, () => {
    let client: ChainClient
    let hot: string
    const native = node.network.nativeAssetId
    const tokens = node.assets.filter((asset) => asset.kind === "TOKEN").map((asset) => asset.assetId)

    beforeAll(async () => {
      await node.start()
      client = node.client()
      hot = await hotAddress(node.network)
    }, 120_000)
    afterAll(() => node.stop(), 60_000)

    it("follows the head: heights grow by the blocks made, the final height never passes the head", async () => {
      const before = await run(client.head)
      assert.isTrue(before.height >= 0n)
      assert.isTrue(before.finalizedHeight <= before.height)
      assert.isAbove(before.hash.length, 0)
      await node.mine(2)
      const after = await run(client.head)
      assert.isTrue(after.height >= before.height + 2n, `head ${after.height} after ${before.height} + 2 blocks`)
      assert.isTrue(after.finalizedHeight >= before.finalizedHeight, "the final height never goes back")
      assert.isTrue(after.finalizedHeight <= after.height)
      assert.notStrictEqual(after.hash, before.hash)
    }, 60_000)

    it("reads blocks: the head's block has the head's hash, each block links to its parent, above the head is none", async () => {
      const head = await run(client.head)
      const from = head.height >= 3n ? head.height - 3n : 0n
      const blocks = await blocksFrom(client, from, head.height)
      assertLinked(blocks)
      assert.strictEqual(blocks[blocks.length - 1]!.hash, head.hash)
      assert.isUndefined(await run(client.block(head.height + 1000n)))
    }, 60_000)

    for (const assetId of [native, ...tokens]) {
      it(`a payment of ${assetId} is a transfer in its block, to the normalized address, for the exact amount`, async () => {
        const to = await node.freshAddress()
        const amount = node.smallAmount(assetId)
        const paid = await node.pay(to, assetId, amount)
        const block = await run(client.block(paid.height))
        assert.isDefined(block)
        const found = block!.transfers.filter((transfer) => transfer.txHash === paid.txHash && transfer.to === to)
        assert.strictEqual(found.length, 1, `one transfer of ${paid.txHash} to ${to} in block ${paid.height}`)
        assert.strictEqual(found[0]!.assetId, assetId)
        assert.strictEqual(found[0]!.amount, amount)
        assert.isTrue(Number.isInteger(found[0]!.outputIndex) && found[0]!.outputIndex >= 0)
        assert.strictEqual(await run(client.transactionState(paid.txHash)), "INCLUDED")
      }, 60_000)
    }

    it("a transaction nobody sent is UNKNOWN, and has no inclusion", async () => {
      assert.strictEqual(await run(client.transactionState(unknownHash(node.network.chainFamily))), "UNKNOWN")
      if (client.withdrawals !== undefined) {
        assert.isUndefined(await run(client.withdrawals.inclusion(unknownHash(node.network.chainFamily))))
      }
    }, 30_000)

    it("sees a reorganization: the replaced heights get new hashes that link up from below the fork", async () => {
      const to = await node.freshAddress()
      const paid = await node.pay(to, native, node.smallAmount(native))
      const before = await run(client.head)
      const old = await run(client.block(paid.height))
      const depth = Number(before.height - paid.height) + 1
      await node.reorg(depth)
      const after = await run(client.head)
      assert.isTrue(after.height > before.height, "the fork is longer")
      assert.isTrue(after.finalizedHeight < paid.height, "a block that was reorganized was never final")
      const blocks = await blocksFrom(client, paid.height - 1n, after.height)
      assertLinked(blocks)
      assert.notStrictEqual(blocks[1]!.hash, old!.hash, "the height of the payment carries a new block")
      // The payment is in at most one block of the new chain, and its state agrees with where it is.
      const holding = blocks.filter((block) => block.transfers.some((transfer) => transfer.txHash === paid.txHash))
      assert.isAtMost(holding.length, 1)
      const state = await run(client.transactionState(paid.txHash))
      assert.strictEqual(state === "INCLUDED", holding.length === 1, `state ${state} agrees with the new chain`)
    }, 90_000)

    describe("withdrawals", () => {
      const chain = (): WithdrawalChain => {
        assert.isDefined(client.withdrawals, `${node.name} sends`)
        return client.withdrawals!
      }

      for (const assetId of [native, ...tokens]) {
        it(`a withdrawal of ${assetId} from HOT: parameters, signature, broadcast (twice), inclusion with the fee the chain took`, async () => {
          const amount = node.smallAmount(assetId)
          await node.fundHot(assetId, amount * 10n)
          if (assetId !== native) await node.fundHot(native, node.smallAmount(native) * 10n)
          const to = await node.freshAddress()
          const transfer: WithdrawalTransfer = { withdrawalId: `contract-${assetId}-${to}`, from: hot, to, assetId, amount }
          const fee = await run(chain().networkFee(assetId))
          assert.isTrue(fee > 0n, "a withdrawal costs a network fee")
          assert.isTrue(await run(chain().hotWalletCovers(transfer, fee)), "HOT was funded")
          assert.isFalse(await run(chain().hotWalletCovers({ ...transfer, amount: 10n ** 40n }, fee)), "HOT cannot pay 10^40")
          const parameters = await parametersFor(chain(), transfer)
          assert.strictEqual(parameters.family, node.network.chainFamily)
          assert.isTrue(parameters.networkFee > 0n)
          const signed = await signWithdrawal(node, transfer, parameters)
          await run(chain().broadcast(signed))
          // The same bytes again are harmless: the network knows them by their hash.
          await run(chain().broadcast(signed))
          const state = await run(client.transactionState(signed.txHash))
          assert.include(["PENDING", "INCLUDED"], state)
          const inclusion = await waitIncluded(client, node, signed.txHash)
          assert.isTrue(inclusion.succeeded)
          const head = await run(client.head)
          assert.isTrue(inclusion.height <= head.height)
          if (inclusion.networkFee !== undefined) {
            // TRON is the exception: a TRX transfer paid from the sender's free bandwidth costs nothing (docs/tron.md).
            if (node.network.chainFamily !== "TRON") assert.isTrue(inclusion.networkFee > 0n, "the chain took a fee")
            assert.isTrue(inclusion.networkFee >= 0n)
            assert.isTrue(inclusion.networkFee <= parameters.networkFee, `fee ${inclusion.networkFee} within the signed ${parameters.networkFee}`)
          }
          const block = await run(client.block(inclusion.height))
          const paid = block!.transfers.filter((entry) => entry.txHash === signed.txHash && entry.to === to)
          assert.strictEqual(paid.length, 1, "the recipient's transfer is in the block")
          assert.strictEqual(paid[0]!.amount, amount)
          assert.strictEqual(paid[0]!.assetId, assetId)
          if (chain().balance !== undefined) assert.strictEqual(await run(chain().balance!(to, assetId)), amount)
        }, 120_000)
      }

      // Registered only where the family has such transactions (no skipped tests: CI counts them as failures).
      if (node.failingTransfer !== undefined) it("a transaction included but failed: succeeded false, the burned fee read from the chain", async () => {
        await node.fundHot(native, node.smallAmount(native) * 10n)
        const failing = await node.failingTransfer!(hot)
        const transfer: WithdrawalTransfer = { withdrawalId: "contract-failing", ...failing }
        const parameters = await parametersFor(chain(), transfer)
        const signed = await signWithdrawal(node, transfer, parameters)
        await run(chain().broadcast(signed))
        const inclusion = await waitIncluded(client, node, signed.txHash)
        assert.isFalse(inclusion.succeeded)
        if (inclusion.networkFee !== undefined) assert.isTrue(inclusion.networkFee > 0n)
        const block = await run(client.block(inclusion.height))
        assert.isFalse(block!.transfers.some((entry) => entry.txHash === signed.txHash), "a failed transaction moved nothing")
      }, 120_000)
    })
  })
