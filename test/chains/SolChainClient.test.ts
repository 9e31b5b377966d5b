/**
 * The SOL chain client on the litesvm JSON-RPC front (test/support/SolanaRpcFront.ts), beyond the contract
 * (test/chains/contract/SolContract.test.ts): the node's identity at start (decisions.md "Sending on real networks":
 * the genesis hash where the catalog names one), credentials from the URL's userinfo and never in messages, heights
 * found across long runs of skipped slots, when a signed transaction counts as expired (re-sign only after expiry),
 * how the broadcast sorts the node's answers (docs/sol.md), and which recipients the node shows to be no wallet
 * (spec 4.1: mints, token accounts, programs, sysvars; chains/sol/SolWalletAddress.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { base58 } from "@scure/base"
import { Connection, Keypair, PublicKey, SystemProgram, Transaction } from "@solana/web3.js"
import { Effect, Exit, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import type { CatalogAsset, CatalogNetwork } from "../../src/catalog/Catalog.ts"
import { BroadcastRejected, ChainUnavailable, type SignedWithdrawal } from "../../src/chains/ChainClient.ts"
import { makeNodeClient } from "../../src/chains/NodeClients.ts"
import { makeSolChainClient } from "../../src/chains/sol/SolChainClient.ts"
import { isSolanaWalletAddress, solWellKnownAccounts } from "../../src/chains/sol/SolWalletAddress.ts"
import type { SolWithdrawalChain } from "../../src/chains/sol/SolWithdrawals.ts"
import developmentCatalog from "../../src/catalog/development.json" with { type: "json" }
import { associatedTokenAddress, tokenProgramId, transferChecked } from "../../src/signer/SolSigning.ts"
import { freePortSync } from "../support/AnvilBinary.ts"
import { blockhashValidBlocks, finalityDepth, type SolanaRpcFront, startSolanaRpcFront } from "../support/SolanaRpcFront.ts"

const network = developmentCatalog.networks.find((candidate) => candidate.networkKey === "SOL_DEVNET")! as unknown as CatalogNetwork
const assets = developmentCatalog.assets.filter((asset) => asset.networkKey === "SOL_DEVNET") as unknown as ReadonlyArray<CatalogAsset>
const password = "pa55-w0rd-secret"
let front: SolanaRpcFront
let url: string

beforeAll(async () => {
  front = await startSolanaRpcFront({ basicAuth: { user: "coffer", password }, seed: "client-tests" })
  url = front.url.replace("http://", `http://coffer:${password}@`)
})
afterAll(() => front.close())

const clientFor = (rpcUrl: string) =>
  makeSolChainClient({ networkKey: "SOL_DEVNET", rpcUrl: Redacted.make(rpcUrl), nativeAssetId: "SOL_DEVNET_SOL", tokens: [], feeRateCap: 1_000_000n })

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect as Effect.Effect<A, never>)
const failureOf = async <A, E>(effect: Effect.Effect<A, E>): Promise<E> => {
  const exit = await Effect.runPromise(Effect.exit(effect))
  assert.isTrue(Exit.isFailure(exit), "expected a failure")
  return await Effect.runPromise(Effect.flip(effect as Effect.Effect<A, E>))
}

/** A SOL transfer signed by a fresh funded key on `blockhash`, as a SignedWithdrawal. */
const signedTransfer = (blockhash: string): SignedWithdrawal => {
  const payer = Keypair.generate()
  front.paySol(payer.publicKey.toBase58(), 1_000_000_000n)
  const to = Keypair.generate().publicKey
  const transaction = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash })
  transaction.add(SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: to, lamports: 10_000_000n }))
  transaction.sign(payer)
  return {
    withdrawalId: "test",
    from: payer.publicKey.toBase58(),
    to: to.toBase58(),
    assetId: "SOL_DEVNET_SOL",
    amount: 10_000_000n,
    raw: transaction.serialize().toString("base64"),
    txHash: base58.encode(transaction.signature!),
    networkFee: 5_000n
  }
}
describe("SOL chain client", () => {
  it("identity: a node on another cluster (genesis hash) refuses the start, naming both hashes and not the URL", async () => {
    const error = await failureOf(makeNodeClient({ network: { ...network, genesisHash: "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d" }, assets, rpcUrl: Redacted.make(url) }))
    assert.include(error.message, "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d")
    assert.include(error.message, front.genesisHash)
    assert.notInclude(error.message, password)
    // Matching, or not named in the catalog: the client is made.
    await run(makeNodeClient({ network: { ...network, genesisHash: front.genesisHash }, assets, rpcUrl: Redacted.make(url) }))
    await run(makeNodeClient({ network: { ...network, genesisHash: null }, assets, rpcUrl: Redacted.make(url) }))
  }, 30_000)

  it("credentials go as HTTP Basic from the URL's userinfo; wrong ones fail as ChainUnavailable without the URL or password", async () => {
    assert.isTrue((await run(clientFor(url).head)).height > 0n)
    const wrong = front.url.replace("http://", "http://coffer:wrong-secret@")
    const error = await failureOf(clientFor(wrong).head)
    assert.instanceOf(error, ChainUnavailable)
    assert.notInclude(error.message, "wrong-secret")
    assert.notInclude(error.message, front.url)
    const down = await failureOf(clientFor(`http://coffer:${password}@127.0.0.1:${freePortSync()}`).head)
    assert.instanceOf(down, ChainUnavailable)
    assert.notInclude(down.message, password)
  }, 30_000)

  it("heights are block heights: found at their slots across runs of skipped slots longer than one getBlocks window", async () => {
    const client = clientFor(url)
    const from = BigInt(front.headHeight())
    front.mine(3, 5_000)
    front.mine(2)
    front.mine(2, 2_500)
    const head = await run(client.head)
    assert.strictEqual(head.height, from + 7n)
    let previous = await run(client.block(from - 1n))
    for (let height = from; height <= head.height; height++) {
      const block = await run(client.block(height))
      assert.isDefined(block)
      assert.strictEqual(block!.height, height)
      assert.strictEqual(block!.parentHash, previous!.hash, `block ${height} links to its parent across skipped slots`)
      previous = block
    }
    assert.strictEqual(previous!.hash, head.hash)
    assert.isUndefined(await run(client.block(head.height + 1n)))
  }, 60_000)

  it("expired: not while the blockhash may still land; yes once it is past lastValidBlockHeight in the finalized bank; never once included", async () => {
    const client = clientFor(url)
    const chain = client.withdrawals as SolWithdrawalChain
    const latest = (await run(chain.withdrawalParameters({ withdrawalId: "x", from: "", to: Keypair.generate().publicKey.toBase58(), assetId: "SOL_DEVNET_SOL", amount: 1n })))
    assert.strictEqual(latest.family, "SOL")
    if (latest.family !== "SOL") return
    assert.strictEqual(latest.lastValidBlockHeight, BigInt(front.headHeight() + blockhashValidBlocks))
    const signed = signedTransfer(latest.recentBlockhash)
    front.setDropping(true)
    await run(chain.broadcast(signed))
    front.setDropping(false)
    assert.isFalse(await run(chain.expired(signed)))
    // The head passes lastValidBlockHeight, the finalized bank does not yet: a fork from below could still take it.
    front.mine(blockhashValidBlocks + 2)
    assert.isFalse(await run(chain.expired(signed)))
    front.mine(finalityDepth)
    assert.isTrue(await run(chain.expired(signed)))
    // Broadcasting expired bytes is accepted by the node and dropped: nothing lands.
    await run(chain.broadcast(signed))
    assert.isUndefined(front.blockOf(signed.txHash))

    // An included transaction is never expired, however old its blockhash.
    const fresh = (await run(chain.withdrawalParameters({ withdrawalId: "y", from: "", to: Keypair.generate().publicKey.toBase58(), assetId: "SOL_DEVNET_SOL", amount: 1n })))
    const included = signedTransfer((fresh as { recentBlockhash: string }).recentBlockhash)
    await run(chain.broadcast(included))
    assert.isDefined(front.blockOf(included.txHash))
    front.mine(blockhashValidBlocks + finalityDepth + 2)
    assert.isFalse(await run(chain.expired(included)))
    assert.strictEqual(await run(client.transactionState(included.txHash)), "INCLUDED")
  }, 60_000)

  it("broadcast: bytes whose signature does not verify are refused for good; a node that is down is unavailable", async () => {
    const client = clientFor(url)
    const head = await run(client.withdrawals!.withdrawalParameters({ withdrawalId: "z", from: "", to: Keypair.generate().publicKey.toBase58(), assetId: "SOL_DEVNET_SOL", amount: 1n }))
    const signed = signedTransfer((head as { recentBlockhash: string }).recentBlockhash)
    const raw = Buffer.from(signed.raw, "base64")
    raw[raw.length - 1] = raw[raw.length - 1]! ^ 1
    const refused = await failureOf(client.withdrawals!.broadcast({ ...signed, raw: raw.toString("base64") }))
    assert.instanceOf(refused, BroadcastRejected)
    const down = await failureOf(clientFor(`http://127.0.0.1:${freePortSync()}`).withdrawals!.broadcast(signed))
    assert.instanceOf(down, ChainUnavailable)
  }, 30_000)

  it("SPL into a token account the wallet owns that is not its associated one: credited to the owner, output = that account's index", async () => {
    const mint = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU"
    front.createMint(mint, 6)
    const client = makeSolChainClient({
      networkKey: "SOL_DEVNET",
      rpcUrl: Redacted.make(url),
      nativeAssetId: "SOL_DEVNET_SOL",
      tokens: [{ assetId: "SOL_DEVNET_USDC", mint }],
      feeRateCap: 1_000_000n
    })
    const owner = Keypair.generate().publicKey
    const account = Keypair.generate().publicKey
    front.createTokenAccount(account.toBase58(), owner.toBase58(), mint)
    const mintKey = new PublicKey(mint)
    const transaction = new Transaction({ feePayer: front.faucet.publicKey, recentBlockhash: (await run(client.withdrawals!.withdrawalParameters({ withdrawalId: "a", from: "", to: owner.toBase58(), assetId: "SOL_DEVNET_SOL", amount: 1n })) as { recentBlockhash: string }).recentBlockhash })
    transaction.add(transferChecked(associatedTokenAddress(front.faucet.publicKey, mintKey, tokenProgramId), mintKey, account, front.faucet.publicKey, 7_000_000n, 6, tokenProgramId))
    transaction.sign(front.faucet)
    // Sent over RPC like any wallet would.
    const connection = new Connection(front.url, { httpHeaders: { authorization: `Basic ${Buffer.from(`coffer:${password}`).toString("base64")}` } })
    const signature = await connection.sendRawTransaction(transaction.serialize(), { skipPreflight: true })
    const landed = front.blockOf(signature)!
    assert.isNull(landed.err)
    const block = await run(client.block(BigInt(landed.height)))
    const paid = block!.transfers.filter((transfer) => transfer.txHash === signature)
    assert.deepStrictEqual(paid.map((transfer) => [transfer.to, transfer.assetId, transfer.amount]), [[owner.toBase58(), "SOL_DEVNET_USDC", 7_000_000n]])
    const accountIndex = transaction.compileMessage().accountKeys.findIndex((key) => key.equals(account))
    assert.strictEqual(paid[0]!.outputIndex, accountIndex)
    // The balance the sweeps and the cover read is the associated account's only (docs/sol.md, "Traps").
    assert.strictEqual(await run(client.withdrawals!.balance!(owner.toBase58(), "SOL_DEVNET_USDC")), 0n)
  }, 30_000)

  it("isWalletAddress (spec 4.1): a mint, a token account, a program and a sysvar are no wallet; a funded wallet and a fresh address are", async () => {
    const chain = clientFor(url).withdrawals as SolWithdrawalChain
    const isWallet = (address: string) => run(chain.isWalletAddress(address))
    // Keys of ordinary keypairs, so on the curve and unknown to the static check: only the node can tell.
    const mint = Keypair.generate().publicKey.toBase58()
    front.createMint(mint, 6)
    const owner = Keypair.generate().publicKey.toBase58()
    const tokenAccount = Keypair.generate().publicKey.toBase58()
    front.createTokenAccount(tokenAccount, owner, mint)
    for (const address of [mint, tokenAccount]) assert.isTrue(isSolanaWalletAddress(address, solWellKnownAccounts), address)
    assert.isFalse(await isWallet(mint), "a mint (owned by the Token program)")
    assert.isFalse(await isWallet(tokenAccount), "a token account at an on-curve address")
    assert.isFalse(await isWallet(tokenProgramId.toBase58()), "a program (executable)")
    assert.isFalse(await isWallet("SysvarRent111111111111111111111111111111111"), "a sysvar (owned by Sysvar1111…)")
    const funded = Keypair.generate().publicKey.toBase58()
    front.paySol(funded, 1_000_000_000n)
    assert.isTrue(await isWallet(funded), "a System-owned wallet holding SOL")
    assert.isTrue(await isWallet(owner), "the token account's owner, which holds nothing itself")
    assert.isTrue(await isWallet(Keypair.generate().publicKey.toBase58()), "an address with no account yet")
    // A node that does not answer is unavailable, never a yes.
    const down = await failureOf((clientFor(`http://127.0.0.1:${freePortSync()}`).withdrawals as SolWithdrawalChain).isWalletAddress(funded))
    assert.instanceOf(down, ChainUnavailable)
  }, 30_000)

  it("the loaders and the sysvar owner the node reports for programs and sysvars are on the static list, as are those accounts", async () => {
    const connection = new Connection(front.url, { httpHeaders: { authorization: `Basic ${Buffer.from(`coffer:${password}`).toString("base64")}` } })
    const accounts = [
      "11111111111111111111111111111111",
      tokenProgramId.toBase58(),
      "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb",
      "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL",
      "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
      "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo",
      "SysvarRent111111111111111111111111111111111",
      "SysvarEpochRewards1111111111111111111111111",
      "SysvarLastRestartS1ot1111111111111111111111",
      "StakeConfig11111111111111111111111111111111"
    ]
    const owners = new Set<string>()
    for (const address of accounts) {
      const info = await connection.getAccountInfo(new PublicKey(address))
      assert.isNotNull(info, `${address} exists on the node`)
      assert.isTrue(solWellKnownAccounts.has(address), address)
      owners.add(info!.owner.toBase58())
    }
    // NativeLoader, both BPF loaders and the upgradeable one, Sysvar1111…, Config1111… (owner of StakeConfig).
    assert.isAtLeast(owners.size, 5)
    for (const owner of owners) assert.isTrue(solWellKnownAccounts.has(owner), owner)
  }, 30_000)
})
