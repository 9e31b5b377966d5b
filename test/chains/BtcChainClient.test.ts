/**
 * The BTC client's own rules beyond the contract (docs/btc.md), on a regtest Litecoin Core node and this file's
 * PostgreSQL: exact amounts from the node's decimals, coin selection that never gives one output to two withdrawals
 * (and gives it back once a send is refused), the broadcast's answers sorted, and failures that never show the URL.
 */
import { assert, describe, it } from "@effect/vitest"
import * as bitcoin from "bitcoinjs-lib"
import { Effect, Exit, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes, randomUUID } from "node:crypto"
import { afterAll, beforeAll } from "vitest"
import { loadCatalogFile } from "../../src/catalog/Catalog.ts"
import { bitcoinNetworks } from "../../src/chains/BitcoinNetwork.ts"
import { type BtcChainClient, makeBtcChainClient } from "../../src/chains/btc/BtcChainClient.ts"
import { makeBtcOutputBook } from "../../src/chains/btc/BtcOutputBook.ts"
import { satoshis } from "../../src/chains/btc/BtcRpc.ts"
import type { WithdrawalChain, WithdrawalParameters, WithdrawalTransfer } from "../../src/chains/ChainClient.ts"
import * as Database from "../../src/db/Database.ts"
import { storedParameters } from "../../src/sending/SignedParameters.ts"
import { freePortSync } from "../support/AnvilBinary.ts"
import { startLitecoind } from "../support/Litecoind.ts"
import { hotAddress, signWithdrawal } from "./contract/ChainClientContract.ts"

const node = startLitecoind()
const networkKey = "BTC_TESTNET"
const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect as Effect.Effect<A, never>)
const catalog = await run(loadCatalogFile("preproduction"))
const network = catalog.networks.find((candidate) => candidate.networkKey === networkKey)!
const assets = catalog.assets.filter((asset) => asset.networkKey === networkKey)
const native = network.nativeAssetId

let runtime: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>
let sql: SqlClient.SqlClient
let client: BtcChainClient
let chain: WithdrawalChain
let hot: string

const clientOn = (url: string) =>
  makeBtcChainClient({
    networkKey,
    rpcUrl: Redacted.make(url),
    btcNetwork: "test",
    nativeAssetId: native,
    rpcTimeoutMillis: 2_000,
    sending: { feeRateCap: network.feeRateCap, book: makeBtcOutputBook(sql) }
  })

beforeAll(async () => {
  await node.ready
  runtime = ManagedRuntime.make(Database.layerFromUrl(Redacted.make(process.env.DATABASE_URL!)))
  sql = await runtime.runPromise(Effect.gen(function*() {
    return yield* SqlClient.SqlClient
  }))
  await run(sql`
    INSERT INTO networks (network_key, chain_family, display_name, is_testnet, enabled, deposit_enabled,
      withdraw_enabled, new_wallets_enabled, confirmations, btc_network, native_asset_id)
    VALUES (${networkKey}, 'BTC', 'Bitcoin Testnet', true, true, true, true, true, '{"mode":"confirmations","n":2}'::jsonb,
      'test', ${native})
    ON CONFLICT (network_key) DO NOTHING`)
  // A send row (the refused-send case) refers to the asset.
  await run(sql`
    INSERT INTO assets (asset_id, network_key, kind, symbol, name, decimals, status, withdraw_enabled, min_deposit,
      min_withdraw, withdraw_fee_floor, deposit_fee_floor, sort_order)
    VALUES (${native}, ${networkKey}, 'NATIVE', 'BTC', 'Bitcoin', 8, 'ENABLED', true, 0, 0, 0, 0, 0)
    ON CONFLICT (asset_id) DO NOTHING`)
  client = clientOn(node.url)
  chain = client.withdrawals!
  hot = await hotAddress(network)
}, 60_000)
afterAll(() => runtime?.dispose())

/** A send of `owner` as OutgoingSends stores it: the send and its first version, with the parameters it was signed on. */
const storeSend = (owner: string, to: string, amount: bigint, parameters: WithdrawalParameters) =>
  run(sql.withTransaction(Effect.gen(function*() {
    const id = randomUUID()
    yield* sql`
      INSERT INTO outgoing_sends (id, network_key, purpose, owner_id, from_address, to_address, asset_id, amount,
        signing_key, created_at, state)
      VALUES (${id}, ${networkKey}, 'WITHDRAWAL', ${owner}, ${hot}, ${to}, ${native}, ${amount.toString()},
        '{"_tag":"Platform","role":"HOT"}'::jsonb, now(), 'PENDING')`
    yield* sql`
      INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, network_fee_max, signed_at, parameters)
      VALUES (${id}, 1, 'PAYLOAD', ${networkKey}, ${randomBytes(32).toString("hex")}, '00',
        ${parameters.networkFee.toString()}, now(), ${storedParameters(parameters)}::jsonb)`
  })))

const recipient = () => bitcoin.payments.p2wpkh({ hash: randomBytes(20), network: bitcoinNetworks.test }).address!
const transfer = (amount: bigint, withdrawalId: string = randomUUID()): WithdrawalTransfer =>
  ({ withdrawalId, from: hot, to: recipient(), assetId: native, amount })
const inputKeys = (parameters: WithdrawalParameters) =>
  parameters.family === "BTC" ? parameters.inputs.map((input) => `${input.txid}:${input.vout}`) : []

describe("BTC amounts (BtcRpc.satoshis)", () => {
  it("decimal BTC strings are exact satoshi; exponents, 9 decimals and negatives are refused", () => {
    assert.strictEqual(satoshis("50.00000000"), 5_000_000_000n)
    assert.strictEqual(satoshis("0.00000001"), 1n)
    assert.strictEqual(satoshis("20999999.97690000"), 2_099_999_997_690_000n)
    // 0.1 + 0.2 in binary would not be 30000000 satoshi; the text is.
    assert.strictEqual(satoshis("0.30000000"), 30_000_000n)
    assert.strictEqual(satoshis(0), 0n)
    for (const bad of ["1e-8", "0.000000001", "-1.0", "1.", "", null, 0.5]) assert.isUndefined(satoshis(bad), String(bad))
  })
})

describe("BTC coin selection and broadcast (litecoind regtest)", () => {
  it("withdrawals choosing at once get disjoint outputs; with every output reserved the next one waits", async () => {
    const before = await run(Effect.map(chain.withdrawalParameters(transfer(1_000n)), inputKeys)).catch(() => [])
    assert.deepStrictEqual(before, [], "HOT holds nothing yet")
    for (let index = 0; index < 3; index++) await node.send(hot, "test", 5_000_000n)
    await node.mine(1)
    const chosen = await Promise.all([0, 1, 2].map(() => run(chain.withdrawalParameters(transfer(4_000_000n)))))
    const keys = chosen.flatMap(inputKeys)
    assert.strictEqual(keys.length, 3)
    assert.strictEqual(new Set(keys).size, 3, "no output chosen twice")
    const fourth = await Effect.runPromiseExit(chain.withdrawalParameters(transfer(4_000_000n)))
    assert.isTrue(Exit.isFailure(fourth), "every output is reserved: the fourth waits")
    assert.isFalse(await run(chain.hotWalletCovers(transfer(4_000_000n), 1_000n)))
  }, 60_000)

  it("a reservation whose send was refused for good lets its outputs go", async () => {
    await node.send(hot, "test", 7_000_000n)
    await node.mine(1)
    const owner = randomUUID()
    const first = await run(chain.withdrawalParameters(transfer(6_000_000n, owner)))
    await storeSend(owner, recipient(), 6_000_000n, first)
    const held = await Effect.runPromiseExit(chain.withdrawalParameters(transfer(6_000_000n)))
    assert.isTrue(Exit.isFailure(held), "held while the send is pending")
    await run(sql`UPDATE outgoing_sends SET state = 'REJECTED' WHERE owner_id = ${owner}`)
    const again = await run(chain.withdrawalParameters(transfer(6_000_000n)))
    assert.deepStrictEqual(inputKeys(again), inputKeys(first))
  }, 60_000)

  it("an output a withdrawal chose but did not sign on (its signature committed on another choice) goes back", async () => {
    const smaller = await node.send(hot, "test", 8_000_000n)
    await node.send(hot, "test", 8_100_000n)
    await node.mine(1)
    const vout = (await node.rpc("getrawtransaction", [smaller, true])).vout
      .find((output: any) => output.value === 0.08).n as number
    const owner = randomUUID()
    const signedOn = await run(chain.withdrawalParameters(transfer(7_000_000n, owner)))
    // An earlier choice of the same withdrawal (a signature that did not commit) on the smaller output.
    await run(sql`INSERT INTO btc_output_reservations (network_key, txid, vout, owner_id, value, reserved_at)
      VALUES (${networkKey}, ${smaller}, ${vout}, ${owner}, 8000000, now())`)
    assert.isTrue(Exit.isFailure(await Effect.runPromiseExit(chain.withdrawalParameters(transfer(7_000_000n)))), "held while choosing")
    // The signature that committed is on the larger one only: the smaller is free for the next withdrawal.
    await storeSend(owner, recipient(), 7_000_000n, signedOn)
    const next = await run(chain.withdrawalParameters(transfer(7_000_000n)))
    assert.deepStrictEqual(inputKeys(next), [`${smaller}:${vout}`])
  }, 60_000)

  it("broadcast: the same bytes twice are fine, spent inputs are a refusal the pipeline checks against its own versions, garbage a plain refusal; PENDING until mined", async () => {
    await node.send(hot, "test", 3_000_000n)
    await node.mine(1)
    const payment = transfer(1_000_000n)
    const parameters = await run(chain.withdrawalParameters(payment))
    const signed = await signWithdrawal({ network, assets } as any, payment, parameters)
    await run(chain.broadcast(signed))
    await run(chain.broadcast(signed))
    assert.strictEqual(await run(client.transactionState(signed.txHash)), "PENDING")
    assert.isUndefined(await run(chain.inclusion(signed.txHash)))
    await node.mine(1)
    assert.strictEqual(await run(client.transactionState(signed.txHash)), "INCLUDED")
    // Mined: the node says "already in block chain" while an output of it is unspent.
    await run(chain.broadcast(signed))
    // Another spend of the same outputs (a different amount): its inputs are spent.
    const conflicting = await signWithdrawal({ network, assets } as any, { ...payment, amount: 900_000n }, parameters)
    const refused = await Effect.runPromise(Effect.flip(chain.broadcast(conflicting)))
    assert.strictEqual(refused._tag, "BroadcastRejected")
    assert.isTrue(refused._tag === "BroadcastRejected" && refused.nonceUsed === true, refused.message)
    const garbage = await Effect.runPromise(Effect.flip(chain.broadcast({ ...signed, raw: "00" })))
    assert.strictEqual(garbage._tag, "BroadcastRejected")
    assert.isFalse(garbage._tag === "BroadcastRejected" && garbage.nonceUsed === true)
  }, 60_000)

  it("replace-by-fee: nothing before 6 blocks, then the same inputs with at least 125 % of the fee; nothing once another transaction spent an input", async () => {
    await node.send(hot, "test", 4_000_000n)
    await node.mine(1)
    const owner = randomUUID()
    const payment = transfer(1_000_000n, owner)
    const parameters = await run(chain.withdrawalParameters(payment))
    await storeSend(owner, payment.to, 1_000_000n, parameters)
    assert.isUndefined(await run(chain.replacementParameters!(parameters, 5n)))
    const replacement = await run(chain.replacementParameters!(parameters, 6n))
    assert.isDefined(replacement)
    assert.deepStrictEqual(inputKeys(replacement!), inputKeys(parameters))
    assert.isTrue(replacement!.networkFee * 1000n >= parameters.networkFee * 1250n)
    // The replacement signs and pays the same recipient, with the change reduced by the fee's rise.
    const signed = await signWithdrawal({ network, assets } as any, payment, replacement!)
    const decoded = bitcoin.Transaction.fromHex(signed.raw)
    assert.strictEqual(decoded.outs[0]!.value, 1_000_000n)
    // Somebody else's spend of the same outputs, mined.
    const other = await signWithdrawal({ network, assets } as any, { ...payment, to: recipient() }, parameters)
    await run(chain.broadcast(other))
    await node.mine(1)
    assert.isUndefined(await run(chain.replacementParameters!(parameters, 10n)))
  }, 60_000)

  it("a node that is down, or refuses the credentials, is ChainUnavailable without the URL or the password", async () => {
    const down = clientOn(`http://coffer:secret-password@127.0.0.1:${freePortSync()}`)
    const error = await Effect.runPromise(Effect.flip(down.head))
    assert.strictEqual(error._tag, "ChainUnavailable")
    assert.notInclude(error.message, "secret-password")
    assert.notInclude(error.message, "127.0.0.1")
    const wrong = clientOn(node.url.replace("regtest-password", "wrong-password"))
    const refused = await Effect.runPromise(Effect.flip(wrong.head))
    assert.include(refused.message, "401")
    assert.notInclude(refused.message, "wrong-password")
  }, 30_000)
})
