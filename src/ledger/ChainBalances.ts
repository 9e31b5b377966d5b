/**
 * What an EVM node says an address holds at one block (`eth_getBalance`, ERC-20 `balanceOf` through `eth_call`),
 * for the chain books' comparison (ChainBooks.ts, `npm run ledger:check -- --chain`). Read-only and separate from
 * the service's chain client on purpose: the audit asks the node one question per line and needs nothing else of
 * the sending or watching machinery.
 *
 * Messages never carry the node's URL (it may hold an API key): viem's messages name it, so they are cut to viem's
 * short message with the URL replaced.
 */
import { Data, Duration, Effect, Redacted } from "effect"
import { createPublicClient, erc20Abi, http } from "viem"

/** The node could not answer (unreachable, an error answer, a block it no longer has the state of). */
export class ChainBalanceUnavailable extends Data.TaggedError("ChainBalanceUnavailable")<{
  readonly networkKey: string
  readonly message: string
}> {}

export interface EvmBalanceReader {
  readonly at: "block"
  /** The node's latest block number. */
  readonly head: Effect.Effect<bigint, ChainBalanceUnavailable>
  /** The balance at `block` of the native coin (no contract) or of the ERC-20 at `contract`. */
  readonly balance: (
    address: string,
    contract: string | undefined,
    block: bigint
  ) => Effect.Effect<bigint, ChainBalanceUnavailable>
}

const timeoutMillis = 10_000

export const makeEvmBalanceReader = (networkKey: string, rpcUrl: Redacted.Redacted<string>): EvmBalanceReader => {
  const url = Redacted.value(rpcUrl)
  // cacheTime 0: viem would otherwise serve a block number up to its polling interval old (chains.md section 6).
  const client = createPublicClient({ transport: http(url, { timeout: timeoutMillis, retryCount: 0 }), cacheTime: 0 })
  const describe = (error: unknown): string => {
    const text = error instanceof Error
      ? `${error.name}: ${"shortMessage" in error && typeof error.shortMessage === "string" ? error.shortMessage : error.message}`
      : String(error)
    return (url.length > 0 ? text.replaceAll(url, "<rpc url>") : text).slice(0, 300)
  }
  const call = <A>(what: string, run: () => Promise<A>) =>
    Effect.tryPromise({
      try: run,
      catch: (error) => new ChainBalanceUnavailable({ networkKey, message: `${what}: ${describe(error)}` })
    }).pipe(
      Effect.timeoutOrElse({
        duration: Duration.millis(timeoutMillis + 1_000),
        orElse: () => Effect.fail(new ChainBalanceUnavailable({ networkKey, message: `${what}: no answer within ${timeoutMillis} ms` }))
      })
    )
  return {
    at: "block",
    head: call("eth_blockNumber", () => client.getBlockNumber()),
    balance: (address, contract, block) =>
      contract === undefined
        ? call("eth_getBalance", () => client.getBalance({ address: address as `0x${string}`, blockNumber: block }))
        : call("balanceOf", () =>
          client.readContract({
            address: contract as `0x${string}`,
            abi: erc20Abi,
            functionName: "balanceOf",
            args: [address as `0x${string}`],
            blockNumber: block
          }))
  }
}
