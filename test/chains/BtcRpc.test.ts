/**
 * The BTC JSON-RPC call's failures as the service reports them (src/chains/btc/BtcRpc.ts): a node that never
 * answers is "no answer within N ms", one that cannot be reached is "node unreachable", a node error keeps its code,
 * and none of them names the URL (its credentials). Real sockets against a local server; the node's real answers are
 * the litecoind suites' (BtcChainClient, BtcWithdrawals).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeBtcRpc } from "../../src/chains/btc/BtcRpc.ts"
import { type LocalHttpServer, startLocalHttpServer } from "../support/LocalHttpServer.ts"

let server: LocalHttpServer

beforeAll(async () => {
  server = await startLocalHttpServer((request, response) => {
    const { method, id } = JSON.parse(request.body) as { method: string; id: number }
    if (method === "hang") return
    if (method === "fails") return void response.writeHead(500).end(JSON.stringify({ id, result: null, error: { code: -8, message: "bad" } }))
    response.writeHead(200).end(JSON.stringify({ id, result: 0.5, error: null }))
  })
})
afterAll(() => server.close())

describe("BtcRpc", () => {
  it.effect("answers the result, keeps the node's error code, and reports a silent node by its time limit", () =>
    Effect.gen(function*() {
      const rpc = makeBtcRpc({ networkKey: "BTC_TESTNET", url: `http://user:secret@127.0.0.1:${server.port}`, timeoutMillis: 300 })
      // Non-integer numbers stay their source text (the module's exact parsing).
      assert.strictEqual(yield* rpc.call("getbalance", []), "0.5")
      const failed = yield* Effect.flip(rpc.call("fails", []))
      assert.strictEqual(failed._tag, "RpcError")
      assert.strictEqual(failed._tag === "RpcError" ? failed.code : undefined, -8)
      const silent = yield* Effect.flip(rpc.call("hang", []))
      assert.strictEqual(silent.message, "hang: no answer within 300 ms")
      assert.notInclude(silent.message, "secret")
    }))

  it.effect("reports a node that cannot be reached without naming its URL", () =>
    Effect.gen(function*() {
      // A port that was just free: nothing listens on it.
      const closed = yield* Effect.promise(async () => {
        const probe = await startLocalHttpServer(() => undefined)
        await probe.close()
        return probe.port
      })
      const rpc = makeBtcRpc({ networkKey: "BTC_TESTNET", url: `http://user:secret@127.0.0.1:${closed}`, timeoutMillis: 2_000 })
      const error = yield* Effect.flip(rpc.call("getblockcount", []))
      assert.strictEqual(error.message, "getblockcount: node unreachable")
    }))
})
