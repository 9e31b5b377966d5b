/**
 * The Merkle sum tree of the proof of reserves (docs/reserves.md): its leaves, its nodes, a leaf's path to the root,
 * and the check of a path. Pure and self-contained (only @noble/hashes), so `npm run reserves:verify` checks a proof
 * with this file alone, without the service or its database.
 *
 * Every hash is SHA-256 over the JSON text of an array of strings (a canonical encoding any language reproduces: no
 * field can run into the next one), hex in lower case. Amounts are decimal digit strings of non-negative integers.
 *
 * - leaf: ["coffer-reserves-leaf-v1", salt, ownerKind, tenantId, customerRefId, assetId, available, frozen], sum
 *   available + frozen. The salt (32 random bytes, hex) is known to the leaf's owner only, so a sibling hash in
 *   someone else's path says nothing about who it is.
 * - node: ["coffer-reserves-node-v1", leftHash, leftSum, rightHash, rightSum], sum leftSum + rightSum. Both children's
 *   sums are hashed separately, not only their total: the fix of the flaw in Maxwell's original tree (docs/reserves.md).
 * - a level of odd length carries its last node up unchanged (no sibling at that level; duplicating it, as Bitcoin's
 *   transaction tree does, would count its sum twice).
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"

export const leafTag = "coffer-reserves-leaf-v1"
export const nodeTag = "coffer-reserves-node-v1"

/** Whose liability a leaf is: a tenant's user, or a tenant's fee accounts (customerRefId ""). */
export type LeafOwnerKind = "USER" | "TENANT_FEES"

export interface ReserveLeaf {
  readonly salt: string
  readonly ownerKind: LeafOwnerKind
  readonly tenantId: string
  /** The user's customerRefId; "" for a tenant's fee accounts. */
  readonly customerRefId: string
  readonly assetId: string
  readonly available: bigint
  readonly frozen: bigint
}

export interface TreeNode {
  readonly hash: string
  readonly sum: bigint
}

/** One step of a path: the sibling at that level and on which side of the path's node it stands. */
export interface PathStep {
  readonly side: "LEFT" | "RIGHT"
  readonly hash: string
  readonly sum: bigint
}

const digits = /^(0|[1-9][0-9]*)$/

const hashStrings = (fields: ReadonlyArray<string>) => bytesToHex(sha256(utf8ToBytes(JSON.stringify(fields))))

const nonNegative = (value: bigint, what: string) => {
  // A negative amount would let a prover cancel other leaves' liabilities (docs/reserves.md): never in a tree.
  if (value < 0n) throw new RangeError(`${what} is negative (${value}): a sum tree holds non-negative amounts only`)
  return value
}

export const leafNode = (leaf: ReserveLeaf): TreeNode => {
  const available = nonNegative(leaf.available, "available")
  const frozen = nonNegative(leaf.frozen, "frozen")
  return {
    hash: hashStrings([
      leafTag,
      leaf.salt,
      leaf.ownerKind,
      leaf.tenantId,
      leaf.customerRefId,
      leaf.assetId,
      available.toString(),
      frozen.toString()
    ]),
    sum: available + frozen
  }
}

export const parentNode = (left: TreeNode, right: TreeNode): TreeNode => ({
  hash: hashStrings([
    nodeTag,
    left.hash,
    nonNegative(left.sum, "left sum").toString(),
    right.hash,
    nonNegative(right.sum, "right sum").toString()
  ]),
  sum: left.sum + right.sum
})

/** The root of an empty tree: no liabilities. */
export const emptyRoot: TreeNode = { hash: hashStrings([nodeTag]), sum: 0n }

export interface SumTree {
  /** levels[0] the leaves (in the tree's order), the last level the root alone. */
  readonly levels: ReadonlyArray<ReadonlyArray<TreeNode>>
  readonly root: TreeNode
}

/** The tree over `leaves` in the order given (the caller sorts them, by leaf hash, so the order reveals nothing). */
export const buildTree = (leaves: ReadonlyArray<TreeNode>): SumTree => {
  if (leaves.length === 0) return { levels: [[]], root: emptyRoot }
  const levels: Array<ReadonlyArray<TreeNode>> = [leaves]
  let level = leaves
  while (level.length > 1) {
    const next: Array<TreeNode> = []
    for (let index = 0; index < level.length; index += 2) {
      next.push(index + 1 < level.length ? parentNode(level[index]!, level[index + 1]!) : level[index]!)
    }
    levels.push(next)
    level = next
  }
  return { levels, root: level[0]! }
}

/** The path of the leaf at `index` to the root: one step per level where its node has a sibling. */
export const pathOf = (tree: SumTree, index: number): ReadonlyArray<PathStep> => {
  const steps: Array<PathStep> = []
  let position = index
  for (let depth = 0; depth < tree.levels.length - 1; depth++) {
    const level = tree.levels[depth]!
    const sibling = position % 2 === 0 ? position + 1 : position - 1
    if (sibling < level.length) {
      const node = level[sibling]!
      steps.push({ side: sibling < position ? "LEFT" : "RIGHT", hash: node.hash, sum: node.sum })
    }
    position = Math.floor(position / 2)
  }
  return steps
}

/** The root a leaf and its path lead to. */
export const rootFromPath = (leaf: TreeNode, path: ReadonlyArray<PathStep>): TreeNode =>
  path.reduce((node, step) => step.side === "LEFT" ? parentNode(step, node) : parentNode(node, step), leaf)

/** A proof as published (GET /ops/tenants/{id}/users/{customerRefId}/liability_proof): amounts as digit strings. */
export interface LiabilityProofWire {
  readonly networkKey: string
  readonly assetId: string
  readonly leaf: {
    readonly salt: string
    readonly ownerKind: LeafOwnerKind
    readonly tenantId: string
    readonly customerRefId: string
    readonly assetId: string
    readonly availableRaw: string
    readonly frozenRaw: string
    readonly hash: string
  }
  readonly path: ReadonlyArray<{ readonly side: "LEFT" | "RIGHT"; readonly hash: string; readonly sumRaw: string }>
  readonly root: { readonly hash: string; readonly sumRaw: string }
}

const amount = (text: unknown, what: string): bigint => {
  if (typeof text !== "string" || !digits.test(text)) throw new Error(`${what} is not a digit string`)
  return BigInt(text)
}

/**
 * Checks a published proof by itself: the leaf's hash is its fields', and its path leads to the stated root (hash
 * and sum). The answer lists what failed; empty when the proof holds. Whether the root is the one the service
 * published for that asset is for the reader to compare (docs/reserves.md).
 */
export const verifyProof = (proof: LiabilityProofWire): ReadonlyArray<string> => {
  const problems: Array<string> = []
  try {
    const leaf = leafNode({
      salt: String(proof.leaf.salt),
      ownerKind: proof.leaf.ownerKind,
      tenantId: String(proof.leaf.tenantId),
      customerRefId: String(proof.leaf.customerRefId),
      assetId: String(proof.leaf.assetId),
      available: amount(proof.leaf.availableRaw, "leaf.availableRaw"),
      frozen: amount(proof.leaf.frozenRaw, "leaf.frozenRaw")
    })
    if (proof.leaf.assetId !== proof.assetId) problems.push(`the leaf is of ${proof.leaf.assetId}, the proof of ${proof.assetId}`)
    if (leaf.hash !== proof.leaf.hash) problems.push(`the leaf's hash is ${leaf.hash}, not ${proof.leaf.hash} as stated`)
    if (!Array.isArray(proof.path)) throw new Error("path is not a list")
    const steps = proof.path.map((step, index): PathStep => {
      if (step.side !== "LEFT" && step.side !== "RIGHT") throw new Error(`path[${index}].side is neither LEFT nor RIGHT`)
      return { side: step.side, hash: String(step.hash), sum: amount(step.sumRaw, `path[${index}].sumRaw`) }
    })
    const root = rootFromPath(leaf, steps)
    const statedSum = amount(proof.root.sumRaw, "root.sumRaw")
    if (root.hash !== proof.root.hash) problems.push(`the path leads to root ${root.hash}, not ${proof.root.hash}`)
    if (root.sum !== statedSum) problems.push(`the path sums to ${root.sum}, not ${statedSum}`)
  } catch (error) {
    problems.push(error instanceof Error ? error.message : String(error))
  }
  return problems
}
