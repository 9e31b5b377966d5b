/**
 * Who pays a SOL send's costs in the chain books (src/ledger/ChainBooks.ts; docs/ledger.md "A fee paid by another
 * key", "Costs paid on chain"), over rows written directly: a send's network fee and `account_cost` (the rent of a
 * token account it created) are both taken from its fee payer, the first account key of the included version's
 * signed bytes, with the role its parameters name (`feePayer`); a send signed without a separate payer pays from its
 * sending address. The node test (ChainBooksSol.test.ts) holds HOT paying rent; a GAS wallet paying a sweep's rent
 * and a re-signed send whose included version is not its latest are held here.
 *
 * The network here is one no watcher follows (inserted for the test), so the cursor, the books' block, stays put.
 */
import { assert, layer } from "@effect/vitest"
import { Keypair, SystemProgram, Transaction } from "@solana/web3.js"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { uuidV7 } from "../../src/domain/Ids.ts"
import { type BookLine, readChainBooks } from "../../src/ledger/ChainBooks.ts"
import { makeTestAppLayer } from "../support/TestApp.ts"

const network = "BOOKS_SOL"
const native = "BOOKS_SOL_SOL"
const token = "BOOKS_SOL_USDC"
const asOf = 100
const rent = 2_039_280n

const hot = Keypair.generate()
const gas = Keypair.generate()
const otherGas = Keypair.generate()
const depositAddress = Keypair.generate()
const outside = Keypair.generate().publicKey.toBase58()

const hotKey = { _tag: "Platform", role: "HOT" }
const walletKey = { _tag: "Wallet", tenantIndex: 1, userIndex: 1, walletIndex: 0 }
const gasKey = { _tag: "Gas", tenantIndex: 1 }

/** Signed bytes whose fee payer is `payer` (its signature first), the sender signing beside it. */
const signed = (payer: Keypair, sender: Keypair) => {
  const transaction = new Transaction({ feePayer: payer.publicKey, recentBlockhash: Keypair.generate().publicKey.toBase58() })
  transaction.add(SystemProgram.transfer({ fromPubkey: sender.publicKey, toPubkey: payer.publicKey, lamports: 1 }))
  if (payer === sender) transaction.sign(payer)
  else transaction.sign(payer, sender)
  return transaction.serialize().toString("base64")
}

interface Version {
  readonly txHash: string
  readonly raw: string
  readonly feePayer?: unknown
}

const insertSend = (send: {
  readonly purpose: "WITHDRAWAL" | "SWEEP"
  readonly from: string
  readonly to: string
  readonly amount: bigint
  readonly key: unknown
  readonly networkFee: bigint
  readonly accountCost: bigint
  readonly versions: ReadonlyArray<Version>
  readonly included: string
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* uuidV7
    const at = new Date(0)
    yield* sql`
      INSERT INTO outgoing_sends (id, network_key, purpose, owner_id, from_address, to_address, asset_id, amount,
        signing_key, state, included_height, included_tx_hash, network_fee, account_cost, created_at)
      VALUES (${id}, ${network}, ${send.purpose}, ${id}, ${send.from}, ${send.to}, ${token}, ${send.amount.toString()},
        ${JSON.stringify(send.key)}::jsonb, 'CONFIRMED', 20, ${send.included}, ${send.networkFee.toString()},
        ${send.accountCost.toString()}, ${at})`
    for (const [index, version] of send.versions.entries()) {
      const parameters = {
        family: "SOL",
        recentBlockhash: "x",
        networkFee: "2049280",
        ...(version.feePayer === undefined ? {} : { feePayer: version.feePayer })
      }
      yield* sql`
        INSERT INTO outgoing_versions (send_id, version, kind, network_key, tx_hash, raw, network_fee_max, signed_at,
          parameters)
        VALUES (${id}, ${index + 1}, 'PAYLOAD', ${network}, ${version.txHash}, ${version.raw}, 2049280, ${at},
          ${JSON.stringify(parameters)}::jsonb)`
    }
  })

const insertReceipt = (txHash: string, to: string, role: string, assetId: string, amount: bigint) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      INSERT INTO platform_receipts (network_key, tx_hash, output_index, from_address, to_address, role, asset_id,
        amount, block_height, block_hash, recorded_at)
      VALUES (${network}, ${txHash}, 0, ${outside}, ${to}, ${role}, ${assetId}, ${amount.toString()}, 10, 'block10',
        ${new Date(0)})`
  })

const find = (lines: ReadonlyArray<BookLine>, address: string, assetId: string) =>
  lines.find((line) => line.address === address && line.assetId === assetId) ??
    assert.fail(`no line ${address} ${assetId}: ${JSON.stringify(lines.map((line) => [line.address, line.assetId]))}`)

layer(makeTestAppLayer(), { excludeTestServices: true })("chain books: a SOL send's costs from its fee payer", (it) => {
  it.effect("fee and rent from HOT for its withdrawal, from the GAS fee payer of a sweep's included version", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO networks (network_key, chain_family, display_name, is_testnet, enabled, deposit_enabled,
          withdraw_enabled, new_wallets_enabled, confirmations, native_asset_id)
        VALUES (${network}, 'SOL', 'books sol test', true, true, true, true, true, '{"mode":"confirmations","n":1}'::jsonb, ${native})`
      yield* sql`
        INSERT INTO assets (asset_id, network_key, kind, contract, symbol, name, decimals, status, withdraw_enabled,
          min_deposit, min_withdraw, withdraw_fee_floor, deposit_fee_floor)
        VALUES (${native}, ${network}, 'NATIVE', NULL, 'SOL', 'Solana', 9, 'ENABLED', true, 0, 0, 0, 0),
          (${token}, ${network}, 'TOKEN', ${Keypair.generate().publicKey.toBase58()}, 'USDC', 'USD Coin', 6, 'ENABLED',
            true, 0, 0, 0, 0)`
      yield* sql`INSERT INTO chain_cursors (network_key, height, head_height, updated_at)
        VALUES (${network}, ${asOf}, ${asOf}, ${new Date(0)})`

      yield* insertReceipt("r1", hot.publicKey.toBase58(), "HOT", native, 100_000_000n)
      yield* insertReceipt("r2", hot.publicKey.toBase58(), "HOT", token, 1_000n)
      yield* insertReceipt("r3", gas.publicKey.toBase58(), "GAS", native, 50_000_000n)

      // A USDC withdrawal from HOT that created its recipient's token account: HOT pays 5,000 and the rent.
      yield* insertSend({
        purpose: "WITHDRAWAL", from: hot.publicKey.toBase58(), to: outside, amount: 100n, key: hotKey,
        networkFee: 5_000n, accountCost: rent,
        versions: [{ txHash: "w1", raw: signed(hot, hot) }], included: "w1"
      })
      // A USDC sweep re-signed after expiry whose first version was included, not the latest (signed here with
      // another payer, so that the two differ); it created its destination's token account. The included version's
      // payer pays fee and rent.
      const sweepTo = Keypair.generate().publicKey.toBase58()
      yield* insertSend({
        purpose: "SWEEP", from: depositAddress.publicKey.toBase58(), to: sweepTo, amount: 300n, key: walletKey,
        networkFee: 10_000n, accountCost: rent,
        versions: [
          { txHash: "s1", raw: signed(gas, depositAddress), feePayer: gasKey },
          { txHash: "s2", raw: signed(otherGas, depositAddress), feePayer: gasKey }
        ],
        included: "s1"
      })

      const books = yield* readChainBooks([network])
      const hotLine = find(books.lines, hot.publicKey.toBase58(), native)
      assert.strictEqual(hotLine.role, "HOT")
      assert.strictEqual(hotLine.expected, 100_000_000n - 5_000n - rent)
      assert.strictEqual(find(books.lines, hot.publicKey.toBase58(), token).expected, 900n)
      const gasLine = find(books.lines, gas.publicKey.toBase58(), native)
      assert.strictEqual(gasLine.role, "GAS")
      assert.strictEqual(gasLine.expected, 50_000_000n - 10_000n - rent)
      // Neither the sender nor the payer of the version that was not included is charged anything.
      assert.isUndefined(books.lines.find((line) => line.address === otherGas.publicKey.toBase58()))
      const senderNative = books.lines.find((line) => line.address === depositAddress.publicKey.toBase58() && line.assetId === native)
      assert.strictEqual(senderNative?.expected ?? 0n, 0n)
      assert.strictEqual(find(books.lines, sweepTo, token).expected, 300n)
    }))
})
