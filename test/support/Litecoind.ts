/**
 * A regtest Litecoin Core 0.21 node (Debian `litecoind`; .ci/run installs it) as the BTC client's stand-in for
 * Bitcoin Core (chains.md 5.3, docs/btc.md): started when the test file is collected, on free loopback ports with a
 * temporary data directory, killed (SIGKILL) and its directory removed after the file. Blocks are made only when a
 * test asks.
 *
 * The harness pays from a legacy wallet of its own ("harness"), funded by mining 110 blocks to it (10 mature
 * coinbases). Its wallet transactions signal BIP 125 (`-walletrbf=1`), so `dropPayment` can replace one by a
 * conflicting spend: what a reorganization that un-confirms a payment looks like when it is double-spent.
 *
 * Addresses: the service spells the catalog's testnet addresses `tb1...`; the node spells the same scripts `rltc1...`.
 * `nodeAddress` converts through the output script, never by string surgery.
 */
import * as bitcoin from "bitcoinjs-lib"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { bitcoinNetworks } from "../../src/chains/BitcoinNetwork.ts"
import type { BtcNetwork } from "../../src/chains/ChainFamily.ts"
import { freePortSync } from "./AnvilBinary.ts"
import { litecoindBinary } from "./Prerequisites.ts"

/** Litecoin regtest's address prefixes (chains.md 5.3). */
export const litecoinRegtest: bitcoin.Network = {
  messagePrefix: "\x19Litecoin Signed Message:\n",
  bech32: "rltc",
  bip32: { public: 0x043587cf, private: 0x04358394 },
  pubKeyHash: 0x6f,
  scriptHash: 0x3a,
  wif: 0xef
}

const rpcUser = "coffer"
const rpcPassword = "regtest-password"

export interface Litecoind {
  /** The node's RPC URL with the credentials in the userinfo, as `CHAIN_RPC_URLS` takes it. */
  readonly url: string
  /** Resolves once the node answers and the harness wallet has mature coins. */
  readonly ready: Promise<void>
  /** A JSON-RPC call (plain JSON.parse: the harness does not read amounts back). */
  readonly rpc: <A = any>(method: string, params?: ReadonlyArray<unknown>, wallet?: string) => Promise<A>
  /** The node's spelling of a service address of `btcNetwork`. */
  readonly nodeAddress: (address: string, btcNetwork: BtcNetwork) => string
  /** Pays `satoshi` to a service address from the harness wallet and mines it; the payment's txid and block. */
  readonly pay: (to: string, btcNetwork: BtcNetwork, satoshi: bigint) => Promise<{ txHash: string; height: bigint }>
  /** As `pay`, without mining. */
  readonly send: (to: string, btcNetwork: BtcNetwork, satoshi: bigint) => Promise<string>
  readonly mine: (count: number) => Promise<void>
  readonly height: () => Promise<bigint>
  /**
   * Replaces the top `depth` blocks by `depth + 1` new ones. With `drop`, that payment (a harness wallet
   * transaction) is double-spent by a conflicting transaction first, so it is in none of the new blocks.
   */
  readonly reorg: (depth: number, drop?: string) => Promise<void>
  readonly stop: () => void
}

/** "0.00012345" for 12345 satoshi: amounts go to the node as decimal strings, never through a JS number. */
export const btcDecimal = (satoshi: bigint) => `${satoshi / 100_000_000n}.${(satoshi % 100_000_000n).toString().padStart(8, "0")}`

export const startLitecoind = (): Litecoind => {
  const rpcPort = freePortSync()
  const port = freePortSync()
  const datadir = mkdtempSync(join(tmpdir(), "coffer-litecoind-"))
  const child: ChildProcess = spawn(litecoindBinary, [
    `-datadir=${datadir}`,
    "-regtest",
    "-server",
    "-listen=0",
    "-txindex=1",
    "-fallbackfee=0.0002",
    "-walletrbf=1",
    // Litecoin Core turns BIP 125 replacement off by default (Bitcoin Core 0.21 has it on): the RBF of the
    // service's stuck withdrawals and `reorg(..., drop)` need it.
    "-mempoolreplacement=1",
    "-printtoconsole=0",
    `-port=${port}`,
    `-rpcport=${rpcPort}`,
    "-rpcbind=127.0.0.1",
    "-rpcallowip=127.0.0.1",
    `-rpcuser=${rpcUser}`,
    `-rpcpassword=${rpcPassword}`
  ], { stdio: ["ignore", "ignore", "inherit"] })
  const stop = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    rmSync(datadir, { recursive: true, force: true })
  }
  afterAll(stop)
  // A file that fails while it is collected never runs its afterAll: the worker's exit still takes the node along.
  process.once("exit", stop)

  const base = `http://127.0.0.1:${rpcPort}`
  const authorization = `Basic ${Buffer.from(`${rpcUser}:${rpcPassword}`).toString("base64")}`
  const rpc = async <A = any>(method: string, params: ReadonlyArray<unknown> = [], wallet?: string): Promise<A> => {
    const response = await fetch(wallet === undefined ? base : `${base}/wallet/${wallet}`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "1.0", id: 1, method, params })
    })
    const body = JSON.parse(await response.text()) as { result: A; error: { code: number; message: string } | null }
    if (body.error !== null) throw new Error(`${method}: ${body.error.code} ${body.error.message}`)
    return body.result
  }

  let minerAddress = ""
  const nodeAddress = (address: string, btcNetwork: BtcNetwork) =>
    bitcoin.address.fromOutputScript(bitcoin.address.toOutputScript(address, bitcoinNetworks[btcNetwork]), litecoinRegtest)
  const mine = async (count: number) => {
    await rpc("generatetoaddress", [count, minerAddress])
  }
  const height = async () => BigInt(await rpc<number>("getblockcount"))
  const send = (to: string, btcNetwork: BtcNetwork, satoshi: bigint) =>
    rpc<string>("sendtoaddress", [nodeAddress(to, btcNetwork), btcDecimal(satoshi)], "harness")
  const pay = async (to: string, btcNetwork: BtcNetwork, satoshi: bigint) => {
    const txHash = await send(to, btcNetwork, satoshi)
    await mine(1)
    return { txHash, height: await height() }
  }

  const reorg = async (depth: number, drop?: string) => {
    const top = await height()
    await rpc("invalidateblock", [await rpc<string>("getblockhash", [Number(top) - depth + 1])])
    if (drop !== undefined) {
      // Back in the mempool now: spend its first input again, all to the harness, with a higher fee (BIP 125).
      const tx = await rpc("getrawtransaction", [drop, true])
      const input = tx.vin[0]
      const previous = await rpc("getrawtransaction", [input.txid, true])
      const value = BigInt(Math.round(previous.vout[input.vout].value * 1e8))
      const raw = await rpc<string>("createrawtransaction", [
        [{ txid: input.txid, vout: input.vout, sequence: 0xfffffffd }],
        [{ [minerAddress]: btcDecimal(value - 1_000_000n) }]
      ])
      const signed = await rpc<{ hex: string }>("signrawtransactionwithwallet", [raw], "harness")
      await rpc("sendrawtransaction", [signed.hex])
    }
    // To a new address: a block with the same parent, coinbase and transactions in the same second would be the
    // invalidated block itself (same hash), which the node refuses ("block not accepted").
    await rpc("generatetoaddress", [depth + 1, await rpc<string>("getnewaddress", ["", "bech32"], "harness")])
  }

  const ready = (async () => {
    // litecoind answers within a second on an idle machine; 30 s allows for a busy 2-core one.
    for (let attempt = 0; ; attempt++) {
      if (child.exitCode !== null) throw new Error(`litecoind exited with ${child.exitCode}`)
      try {
        await rpc("getblockchaininfo")
        break
      } catch (error) {
        if (attempt > 300) throw error
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    // Descriptor wallets need sqlite, which Debian's litecoind lacks: a legacy wallet (chains.md 5.3).
    await rpc("createwallet", ["harness"])
    minerAddress = await rpc<string>("getnewaddress", ["", "bech32"], "harness")
    await mine(110)
  })()
  // Not awaited by every file before its layer starts; an unhandled rejection would hide the real failure.
  ready.catch(() => undefined)

  return { url: `http://${rpcUser}:${rpcPassword}@127.0.0.1:${rpcPort}`, ready, rpc, nodeAddress, pay, send, mine, height, reorg, stop }
}
