/**
 * The EVM chain client against a real local node (anvil): what `head`, `block` and `transactionState` report for
 * native and ERC-20 transfers, reverted transactions, reorganizations, and a node that is down, hangs or answers
 * nonsense (docs/deposits.md, "EVM over JSON-RPC").
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Redacted } from "effect"
import { createServer, type Server } from "node:http"
import { createServer as createTcpServer } from "node:net"
import { encodeFunctionData, type Hex, parseEther } from "viem"
import { beforeAll } from "vitest"
import { ChainUnavailable } from "../../src/chains/ChainClient.ts"
import { makeEvmChainClient } from "../../src/chains/evm/EvmChainClient.ts"
import { anvilAccounts, deployToken, erc20Artifact, freePortSync, startAnvil } from "../support/Anvil.ts"

const anvil = startAnvil()
const { client: node } = anvil
const sender = anvilAccounts[0]
/** A plain address nobody on the node holds a key for. */
const recipient = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed" as Hex
let token: Hex

beforeAll(() => Effect.runPromise(Effect.gen(function*() {
  yield* anvil.ready
  token = yield* deployToken(anvil, 10n ** 24n)
})))

const clientFor = (url: string, options: { readonly finalityDepthBlocks?: bigint; readonly rpcTimeoutMillis?: number } = {}) =>
  makeEvmChainClient({
    networkKey: "ANVIL",
    rpcUrl: Redacted.make(url),
    nativeAssetId: "ANVIL_ETH",
    tokens: [{ assetId: "ANVIL_TST", contract: token.toUpperCase().replace("0X", "0x") }],
    ...options
  })

const promise = <A>(run: () => Promise<A>) => Effect.promise(run)

const transferToken = (from: Hex, to: Hex, amount: bigint, gas?: bigint) =>
  promise(() =>
    node.sendTransaction({
      account: from,
      to: token,
      data: encodeFunctionData({ abi: erc20Artifact.abi, functionName: "transfer", args: [to, amount] }),
      ...(gas === undefined ? {} : { gas })
    })
  )

const mine = (blocks = 1) =>
  promise(async () => {
    await node.mine({ blocks })
    return node.getBlockNumber()
  })

const failure = <A>(effect: Effect.Effect<A, ChainUnavailable>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(effect)
    assert.isTrue(Exit.isFailure(exit), "expected a failure")
    const error = yield* Effect.flip(effect)
    assert.instanceOf(error, ChainUnavailable)
    return error
  })

describe("EvmChainClient on anvil", () => {
  it.live("head: height and hash of the latest block; finalized from the node's `finalized` tag", () =>
    Effect.gen(function*() {
      const height = yield* mine(100)
      // A fallback depth of 10 would say height - 10: anvil's tag says 64 blocks behind.
      const head = yield* clientFor(anvil.url, { finalityDepthBlocks: 10n }).head
      const latest = yield* promise(() => node.getBlock({ blockNumber: height }))
      assert.deepStrictEqual(head, { height, hash: latest.hash, finalizedHeight: height - 64n })
    }))

  it.live("a block carries successful native and catalog-token transfers with exact amounts and indices; reverted ones are absent", () =>
    Effect.gen(function*() {
      const client = clientFor(anvil.url)
      const ethAmount = parseEther("1.5") + 7n
      const tokenAmount = 1_234_567_890_123_456_789n
      const native = yield* promise(() => node.sendTransaction({ account: sender, to: recipient, value: ethAmount }))
      const tokenTx = yield* transferToken(sender, recipient, tokenAmount)
      // Value sent to the token contract, which has no payable fallback: mined, reverted, no coin moved.
      const revertedNative = yield* promise(() =>
        node.sendTransaction({ account: sender, to: token, value: parseEther("2"), gas: 100_000n })
      )
      // A transfer from an account without tokens: reverted, so no Transfer log.
      const revertedToken = yield* transferToken(anvilAccounts[1], recipient, 5n, 100_000n)
      const height = yield* mine()

      const receipts = yield* Effect.forEach([native, tokenTx, revertedNative, revertedToken], (hash) =>
        promise(() => node.getTransactionReceipt({ hash })))
      assert.deepStrictEqual(receipts.map((receipt) => [receipt.blockNumber, receipt.status]), [
        [height, "success"],
        [height, "success"],
        [height, "reverted"],
        [height, "reverted"]
      ])
      const logIndex = receipts[1]!.logs[0]!.logIndex

      const block = yield* client.block(height)
      assert.isDefined(block)
      const onNode = yield* promise(() => node.getBlock({ blockNumber: height }))
      assert.strictEqual(block!.hash, onNode.hash)
      assert.strictEqual(block!.parentHash, (yield* client.block(height - 1n))!.hash)
      assert.deepStrictEqual(block!.transfers, [
        { txHash: native, outputIndex: 0, from: sender, to: recipient, assetId: "ANVIL_ETH", amount: ethAmount },
        { txHash: tokenTx, outputIndex: logIndex, from: sender, to: recipient, assetId: "ANVIL_TST", amount: tokenAmount }
      ])
      assert.isUndefined(yield* client.block(height + 1n), "above the head: no block yet")
    }))

  it.live("a token outside the catalog list is not read", () =>
    Effect.gen(function*() {
      const tokenTx = yield* transferToken(sender, recipient, 99n)
      const height = yield* mine()
      const withoutTokens = makeEvmChainClient({
        networkKey: "ANVIL",
        rpcUrl: Redacted.make(anvil.url),
        nativeAssetId: "ANVIL_ETH",
        tokens: []
      })
      assert.deepStrictEqual((yield* withoutTokens.block(height))!.transfers, [])
      assert.deepStrictEqual((yield* clientFor(anvil.url).block(height))!.transfers.map((t) => t.txHash), [tokenTx])
    }))

  it.live("transactionState: INCLUDED once mined, PENDING while in the pool, UNKNOWN for a hash the node never saw", () =>
    Effect.gen(function*() {
      const client = clientFor(anvil.url)
      const pending = yield* promise(() => node.sendTransaction({ account: sender, to: recipient, value: 1n }))
      assert.strictEqual(yield* client.transactionState(pending), "PENDING")
      yield* mine()
      assert.strictEqual(yield* client.transactionState(pending), "INCLUDED")
      assert.strictEqual(yield* client.transactionState(`0x${"ab".repeat(32)}`), "UNKNOWN")
    }))

  it.live("a reorganization gives the height a new hash and drops the transfer it carried", () =>
    Effect.gen(function*() {
      const client = clientFor(anvil.url)
      const deposit = yield* promise(() => node.sendTransaction({ account: sender, to: recipient, value: 10n ** 18n }))
      const height = yield* mine()
      yield* mine(2)
      const before = yield* client.block(height)
      assert.deepStrictEqual(before!.transfers.map((transfer) => transfer.txHash), [deposit])
      // Replace the last three blocks with three empty ones.
      yield* promise(() => node.request({ method: "anvil_reorg" as any, params: [3, []] as any }))
      const after = yield* client.block(height)
      assert.isDefined(after)
      assert.notStrictEqual(after!.hash, before!.hash)
      assert.strictEqual(after!.parentHash, before!.parentHash, "the fork point stays")
      assert.deepStrictEqual(after!.transfers, [])
      assert.strictEqual(yield* client.transactionState(deposit), "UNKNOWN")
    }))
})

describe("EvmChainClient when the node fails", () => {
  const servers: Array<Server | ReturnType<typeof createTcpServer>> = []
  const listen = <S extends Server | ReturnType<typeof createTcpServer>>(server: S) =>
    promise(() =>
      new Promise<number>((resolve) => {
        servers.push(server)
        server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port))
      })
    )
  const closeAll = promise(async () => {
    for (const server of servers.splice(0)) {
      if ("closeAllConnections" in server) server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it.live("nobody listening: ChainUnavailable from every call, and the URL's secret is not in the message", () =>
    Effect.gen(function*() {
      const client = clientFor(`http://127.0.0.1:${freePortSync()}/secret-api-key`)
      for (const call of [client.head, client.block(1n), client.transactionState(`0x${"cd".repeat(32)}`)]) {
        const error = yield* failure(call as Effect.Effect<unknown, ChainUnavailable>)
        assert.strictEqual(error.networkKey, "ANVIL")
        assert.notInclude(error.message, "secret-api-key")
      }
    }))

  it.live("credentials in the URL's userinfo go as HTTP Basic authorization (fetch refuses such a URL), and never into a message", () =>
    Effect.gen(function*() {
      let seen: string | undefined
      // A front that checks the credentials and passes the call on to anvil.
      const port = yield* listen(createServer((request, response) => {
        seen = request.headers.authorization
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        request.on("end", () => {
          if (seen !== `Basic ${Buffer.from("rpc user:p@ss word").toString("base64")}`) {
            response.writeHead(401).end()
            return
          }
          fetch(anvil.url, { method: "POST", headers: { "content-type": "application/json" }, body: Buffer.concat(chunks) })
            .then(async (answer) => response.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text()))
        })
      }))
      const client = clientFor(`http://rpc%20user:p%40ss%20word@127.0.0.1:${port}/`)
      const head = yield* client.head
      assert.isAbove(Number(head.height), -1)
      assert.strictEqual(yield* client.chainId, 31337)
      const wrong = clientFor(`http://rpc%20user:wrong-secret@127.0.0.1:${port}/`)
      const error = yield* failure(wrong.head)
      assert.notInclude(error.message, "wrong-secret")
      yield* closeAll
    }))

  it.live("a node that accepts and never answers: ChainUnavailable after the per-call timeout", () =>
    Effect.gen(function*() {
      // Holds every connection open without a byte in answer; destroyed at the end so the server can close.
      const held: Array<import("node:net").Socket> = []
      const port = yield* listen(createTcpServer((socket) => void held.push(socket)))
      const started = Date.now()
      const error = yield* failure(clientFor(`http://127.0.0.1:${port}`, { rpcTimeoutMillis: 300 }).head)
      const elapsed = Date.now() - started
      assert.isBelow(elapsed, 3_000, error.message)
      assert.include(error.message, "eth_getBlockByNumber(latest)")
      for (const socket of held) socket.destroy()
      yield* closeAll
    }))

  it.live("a node answering nonsense: ChainUnavailable, never a defect", () =>
    Effect.gen(function*() {
      const port = yield* listen(createServer((_request, response) => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: { number: "not a number", hash: 42 } }))
      }))
      const client = clientFor(`http://127.0.0.1:${port}`)
      yield* failure(client.head)
      yield* failure(client.block(5n))
      yield* closeAll
    }))
})
