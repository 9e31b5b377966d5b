/**
 * The proof of reserves (docs/reserves.md): per network and asset, the liabilities as the root of a Merkle sum tree
 * (ReserveTree.ts) over every user's balance and every tenant's fee accounts, the holdings read from the chain at
 * its head (the addresses listed), and their difference; and one user's leaf with its path to the root.
 *
 * Liabilities are read in one REPEATABLE READ, READ ONLY transaction from the ledger's account rows (the journal's
 * sums, which `ledger:check` holds to it). A leaf's amounts are never negative (a negative leaf would let debts cancel
 * other owners' liabilities): a user's available balance summed over the user's wallets of the asset, 0 when that
 * is negative (a debt after a reorganization's reversal is no liability), plus frozen; a tenant's fee accounts are
 * FEES + NETWORK_FEES (its income less the network fees its vault paid), 0 when negative.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Catalog } from "../catalog/Catalog.ts"
import { ChainClients } from "../chains/ChainClient.ts"
import { SimulatedChain } from "../chains/simulated/SimulatedChain.ts"
import { decodeRows, Nullable, Numeric, Text } from "../db/RowSchemas.ts"
import { NotFound } from "../domain/ApiError.ts"
import { Entropy } from "../domain/Entropy.ts"
import { PlatformAddresses } from "../wallets/PlatformAddresses.ts"
import { readChainBooks } from "./ChainBooks.ts"
import {
  buildTree,
  leafNode,
  type LeafOwnerKind,
  type LiabilityProofWire,
  pathOf,
  type ReserveLeaf,
  type SumTree,
  type TreeNode
} from "./ReserveTree.ts"

/** Salts are inserted this many at a time (one statement each), so the first snapshot of a large book is bounded. */
const saltInsertBatch = 5_000
/** A snapshot that finds an owner made after the salts were drawn draws again, at most this often. */
const snapshotAttemptsMax = 3
/** Balance reads at once per network (as the chain audit): quick over many addresses, gentle on a provider. */
const balanceReadsConcurrent = 8

export interface AssetLiabilities {
  readonly networkKey: string
  readonly assetId: string
  /** Leaves sorted by hash (the order says nothing about who is where), with the tree over them. */
  readonly leaves: ReadonlyArray<{ readonly leaf: ReserveLeaf; readonly node: TreeNode }>
  readonly tree: SumTree
}

export interface HoldingAddress {
  readonly address: string
  readonly role: string
  readonly balance: bigint
}

export interface AssetReserves {
  readonly networkKey: string
  readonly assetId: string
  readonly root: TreeNode
  readonly leafCount: number
  /** Undefined when the network's holdings cannot be read (`holdingsNotRead` says why). */
  readonly holdings:
    | { readonly height: bigint; readonly total: bigint; readonly addresses: ReadonlyArray<HoldingAddress> }
    | undefined
  readonly holdingsNotRead: string | undefined
}

export interface ReservesReport {
  readonly takenAt: Date
  readonly assets: ReadonlyArray<AssetReserves>
}

export interface LiabilityProofs {
  readonly takenAt: Date
  readonly proofs: ReadonlyArray<LiabilityProofWire>
}

const LiabilityRow = Schema.Struct({
  owner_kind: Schema.Literals(["USER", "TENANT_FEES"]),
  owner_id: Text,
  tenant_id: Text,
  customer_ref_id: Text,
  asset_id: Text,
  network_key: Text,
  available: Numeric,
  frozen: Numeric,
  salt: Nullable(Text)
})
const liabilityRows = decodeRows(LiabilityRow, "Reserves.liabilities")
const ownerRows = decodeRows(Schema.Struct({ owner_id: Text }), "Reserves.ensureSalts")
const userRows = decodeRows(Schema.Struct({ id: Text }), "Reserves.liabilityProof (user)")

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

/** The tree of each asset from the liability rows (exported for the tests, which recompute it from the database). */
export const liabilityTrees = (
  rows: ReadonlyArray<{
    readonly ownerKind: LeafOwnerKind
    readonly tenantId: string
    readonly customerRefId: string
    readonly assetId: string
    readonly networkKey: string
    readonly available: bigint
    readonly frozen: bigint
    readonly salt: string
  }>
): ReadonlyMap<string, AssetLiabilities> => {
  const byAsset = new Map<string, { networkKey: string; leaves: Array<{ leaf: ReserveLeaf; node: TreeNode }> }>()
  for (const row of rows) {
    const leaf: ReserveLeaf = {
      salt: row.salt,
      ownerKind: row.ownerKind,
      tenantId: row.tenantId,
      customerRefId: row.customerRefId,
      assetId: row.assetId,
      available: row.available < 0n ? 0n : row.available,
      frozen: row.frozen
    }
    const entry = byAsset.get(row.assetId) ?? { networkKey: row.networkKey, leaves: [] }
    entry.leaves.push({ leaf, node: leafNode(leaf) })
    byAsset.set(row.assetId, entry)
  }
  const trees = new Map<string, AssetLiabilities>()
  for (const [assetId, { leaves, networkKey }] of byAsset) {
    const sorted = leaves.toSorted((a, b) => a.node.hash < b.node.hash ? -1 : a.node.hash > b.node.hash ? 1 : 0)
    trees.set(assetId, { networkKey, assetId, leaves: sorted, tree: buildTree(sorted.map((entry) => entry.node)) })
  }
  return trees
}

export class Reserves extends Context.Service<Reserves, {
  /** GET /ops/reserves: per network and asset of the catalog, liabilities' root, holdings, difference. */
  readonly report: Effect.Effect<ReservesReport>
  /** GET /ops/tenants/{tenantId}/users/{customerRefId}/liability_proof: the user's leaf and path per asset held. */
  readonly liabilityProof: (tenantId: string, customerRefId: string) => Effect.Effect<LiabilityProofs, NotFound>
}>()("coffer/Reserves") {
  static readonly layer = Layer.effect(
    Reserves,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const entropy = yield* Entropy
      const catalog = yield* Catalog
      const clients = yield* ChainClients
      const simulated = yield* SimulatedChain
      const platform = yield* PlatformAddresses

      /** Draws a salt for every owner with a balance row and none yet (users with wallet accounts, tenants). */
      const ensureSalts = Effect.gen(function*() {
        const missing = yield* sql`
          SELECT DISTINCT w.user_id::text AS owner_id FROM ledger_accounts a JOIN wallets w ON w.id = a.wallet_id
          WHERE a.kind = 'WALLET' AND NOT EXISTS (SELECT 1 FROM reserve_salts s WHERE s.owner_id = w.user_id)
          UNION
          SELECT DISTINCT a.tenant_id::text FROM ledger_accounts a
          WHERE a.kind IN ('FEES', 'NETWORK_FEES')
            AND NOT EXISTS (SELECT 1 FROM reserve_salts s WHERE s.owner_id = a.tenant_id)`
          .pipe(Effect.flatMap(ownerRows))
        const at = new Date(yield* Clock.currentTimeMillis)
        for (let start = 0; start < missing.length; start += saltInsertBatch) {
          const batch = missing.slice(start, start + saltInsertBatch)
          const rows: Array<{ owner_id: string; salt: string }> = []
          for (const { owner_id } of batch) rows.push({ owner_id, salt: hex(yield* entropy.bytes(32, "reserve-salt")) })
          // A salt another process drew first stays: a proof already handed out was made with it.
          yield* sql`
            INSERT INTO reserve_salts (owner_id, salt, created_at)
            SELECT r.owner_id::uuid, r.salt, ${at}
            FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS r(owner_id text, salt text)
            ON CONFLICT (owner_id) DO NOTHING`
        }
      })

      const readLiabilities = sql.withTransaction(
        sql`
          SELECT 'USER' AS owner_kind, u.id::text AS owner_id, u.tenant_id::text AS tenant_id,
            u.customer_ref_id, a.asset_id, s.network_key,
            sum(a.available)::text AS available, sum(a.frozen)::text AS frozen, salt.salt
          FROM ledger_accounts a
          JOIN wallets w ON w.id = a.wallet_id
          JOIN users u ON u.id = w.user_id
          JOIN assets s ON s.asset_id = a.asset_id
          LEFT JOIN reserve_salts salt ON salt.owner_id = u.id
          WHERE a.kind = 'WALLET'
          GROUP BY u.id, u.tenant_id, u.customer_ref_id, a.asset_id, s.network_key, salt.salt
          UNION ALL
          SELECT 'TENANT_FEES', a.tenant_id::text, a.tenant_id::text, '', a.asset_id, s.network_key,
            sum(a.available)::text, '0', salt.salt
          FROM ledger_accounts a
          JOIN assets s ON s.asset_id = a.asset_id
          LEFT JOIN reserve_salts salt ON salt.owner_id = a.tenant_id
          WHERE a.kind IN ('FEES', 'NETWORK_FEES')
          GROUP BY a.tenant_id, a.asset_id, s.network_key, salt.salt`.pipe(Effect.flatMap(liabilityRows))
      ).pipe(Effect.provideService(SqlClient.BeginTransaction, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"))

      /** The liability trees of every asset, from one snapshot; owners made meanwhile get their salt first. */
      const liabilities = Effect.gen(function*() {
        for (let attempt = 1; attempt <= snapshotAttemptsMax; attempt++) {
          yield* ensureSalts
          const takenAt = new Date(yield* Clock.currentTimeMillis)
          const rows = yield* readLiabilities
          if (rows.some((row) => row.salt === null)) continue
          const trees = liabilityTrees(rows.map((row) => ({
            ownerKind: row.owner_kind,
            tenantId: row.tenant_id,
            customerRefId: row.customer_ref_id,
            assetId: row.asset_id,
            networkKey: row.network_key,
            available: row.available,
            frozen: row.frozen,
            salt: row.salt!
          })))
          return { takenAt, trees }
        }
        return yield* Effect.die(new Error(`owners without a reserve salt after ${snapshotAttemptsMax} attempts`))
      }).pipe(Effect.orDie)

      /**
       * What a network's addresses hold now: the node's head, then each address the chain books list for the asset
       * (HOT and SWEEP always). The simulated chain answers from its transfers, its hot wallet from the setting.
       */
      const holdingsOf = (networkKey: string, assetIds: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const client = clients.get(networkKey)
          if (client === undefined) return { notRead: "no chain client follows the network" } as const
          const isSimulated = clients.isSimulated(networkKey)
          const read = client.withdrawals?.balance
          if (!isSimulated && read === undefined) {
            return { notRead: "the network's client reads no balances (BTC: by outputs, not built)" } as const
          }
          const books = yield* readChainBooks([networkKey]).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          const operating = (yield* platform.list).filter((entry) =>
            entry.networkKey === networkKey && entry.role !== "GAS"
          )
          const hot = yield* platform.operating(networkKey, "HOT")
          const hotSetting = isSimulated ? (yield* simulated.state(networkKey)).hotWalletBalance : {}
          const head = yield* client.head
          const byAsset = new Map<string, { height: bigint; total: bigint; addresses: Array<HoldingAddress> }>()
          for (const assetId of assetIds) {
            const listed = new Map<string, string>()
            for (const entry of operating) listed.set(entry.address, entry.role)
            for (const line of books.lines) {
              if (line.assetId === assetId && !listed.has(line.address)) listed.set(line.address, line.role)
            }
            // The simulated chain: every address's balance in one query, not one scan of its transfers per address.
            const simulatedBalances = isSimulated ? yield* simulated.balances(networkKey, assetId) : undefined
            const addresses = yield* Effect.forEach([...listed], ([address, role]) =>
              Effect.map(
                simulatedBalances !== undefined
                  ? Effect.succeed(address === hot ? hotSetting[assetId] ?? 0n : simulatedBalances.get(address) ?? 0n)
                  : read!(address, assetId),
                (balance): HoldingAddress => ({ address, role, balance })
              ), { concurrency: balanceReadsConcurrent })
            byAsset.set(assetId, {
              height: head.height,
              total: addresses.reduce((sum, entry) => sum + entry.balance, 0n),
              addresses: addresses.toSorted((a, b) => a.address.localeCompare(b.address))
            })
          }
          return { byAsset } as const
        }).pipe(
          Effect.catchTag("ChainUnavailable", (error) => Effect.succeed({ notRead: `node unavailable: ${error.message}` } as const)),
          Effect.orDie
        )

      const report = Effect.gen(function*() {
        const { takenAt, trees } = yield* liabilities
        const assets: Array<AssetReserves> = []
        for (const network of catalog.networks) {
          const networkAssets = catalog.assets.filter((asset) => asset.networkKey === network.networkKey)
          if (networkAssets.length === 0 || clients.get(network.networkKey) === undefined) continue
          const holdings = yield* holdingsOf(network.networkKey, networkAssets.map((asset) => asset.assetId))
          for (const asset of networkAssets) {
            const tree = trees.get(asset.assetId)
            const held = "byAsset" in holdings ? holdings.byAsset.get(asset.assetId) : undefined
            assets.push({
              networkKey: network.networkKey,
              assetId: asset.assetId,
              root: tree?.tree.root ?? buildTree([]).root,
              leafCount: tree?.leaves.length ?? 0,
              holdings: held,
              holdingsNotRead: "notRead" in holdings ? holdings.notRead : undefined
            })
          }
        }
        return { takenAt, assets } satisfies ReservesReport
      }).pipe(Effect.withSpan("Reserves.report"))

      const liabilityProof = Effect.fn("Reserves.liabilityProof")(function*(tenantId: string, customerRefId: string) {
        const user = yield* sql`SELECT id FROM users WHERE tenant_id = ${tenantId} AND customer_ref_id = ${customerRefId}`
          .pipe(Effect.flatMap(userRows), Effect.orDie)
        if (user.length === 0) return yield* new NotFound({ message: "user not found" })
        const { takenAt, trees } = yield* liabilities
        const proofs: Array<LiabilityProofWire> = []
        for (const asset of catalog.assets) {
          const tree = trees.get(asset.assetId)
          if (tree === undefined) continue
          const index = tree.leaves.findIndex(({ leaf }) =>
            leaf.ownerKind === "USER" && leaf.tenantId === tenantId && leaf.customerRefId === customerRefId
          )
          if (index < 0) continue
          const { leaf, node } = tree.leaves[index]!
          proofs.push({
            networkKey: tree.networkKey,
            assetId: asset.assetId,
            leaf: {
              salt: leaf.salt,
              ownerKind: leaf.ownerKind,
              tenantId: leaf.tenantId,
              customerRefId: leaf.customerRefId,
              assetId: leaf.assetId,
              availableRaw: leaf.available.toString(),
              frozenRaw: leaf.frozen.toString(),
              hash: node.hash
            },
            path: pathOf(tree.tree, index).map((step) => ({ side: step.side, hash: step.hash, sumRaw: step.sum.toString() })),
            root: { hash: tree.tree.root.hash, sumRaw: tree.tree.root.sum.toString() }
          })
        }
        return { takenAt, proofs } satisfies LiabilityProofs
      })

      return Reserves.of({ report, liabilityProof })
    })
  )
}
