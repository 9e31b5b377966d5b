/**
 * The Merkle sum tree of the proof of reserves (docs/reserves.md, src/ledger/ReserveTree.ts): every leaf's path leads
 * to the root with the total of all leaves; a changed balance, sibling sum or root fails; the attack on Maxwell's
 * original tree (a parent claiming less than its children's sum) fails; negative amounts are refused.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  buildTree,
  emptyRoot,
  leafNode,
  type LiabilityProofWire,
  parentNode,
  pathOf,
  type ReserveLeaf,
  rootFromPath,
  verifyProof
} from "../../src/ledger/ReserveTree.ts"

const leafOf = (index: number): ReserveLeaf => ({
  salt: index.toString(16).padStart(64, "0"),
  ownerKind: "USER",
  tenantId: "0190a8b2-0000-7000-8000-000000000001",
  customerRefId: `user-${index}`,
  assetId: "ETH_SEPOLIA_ETH",
  available: BigInt(index * 1000 + 7),
  frozen: BigInt(index % 3)
})

const proofOf = (leaves: ReadonlyArray<ReserveLeaf>, index: number): LiabilityProofWire => {
  const tree = buildTree(leaves.map(leafNode))
  const leaf = leaves[index]!
  return {
    networkKey: "ETH_SEPOLIA",
    assetId: leaf.assetId,
    leaf: {
      salt: leaf.salt,
      ownerKind: leaf.ownerKind,
      tenantId: leaf.tenantId,
      customerRefId: leaf.customerRefId,
      assetId: leaf.assetId,
      availableRaw: leaf.available.toString(),
      frozenRaw: leaf.frozen.toString(),
      hash: leafNode(leaf).hash
    },
    path: pathOf(tree, index).map((step) => ({ side: step.side, hash: step.hash, sumRaw: step.sum.toString() })),
    root: { hash: tree.root.hash, sumRaw: tree.root.sum.toString() }
  }
}

describe("ReserveTree", () => {
  it("every leaf's path leads to one root whose sum is every leaf's available + frozen, for 1 to 17 leaves", () => {
    for (let count = 1; count <= 17; count++) {
      const leaves = Array.from({ length: count }, (_, index) => leafOf(index))
      const tree = buildTree(leaves.map(leafNode))
      assert.strictEqual(tree.root.sum, leaves.reduce((sum, leaf) => sum + leaf.available + leaf.frozen, 0n))
      for (let index = 0; index < count; index++) {
        assert.deepStrictEqual(verifyProof(proofOf(leaves, index)), [], `leaf ${index} of ${count}`)
        assert.isAtMost(pathOf(tree, index).length, Math.ceil(Math.log2(count)))
      }
    }
    assert.deepStrictEqual(buildTree([]).root, emptyRoot)
  })

  it("a changed balance, salt, sibling sum, sibling hash, side or root fails", () => {
    const leaves = Array.from({ length: 6 }, (_, index) => leafOf(index))
    const proof = proofOf(leaves, 4)
    assert.strictEqual(proof.leaf.frozenRaw, "1")
    const changed: ReadonlyArray<LiabilityProofWire> = [
      { ...proof, leaf: { ...proof.leaf, availableRaw: (BigInt(proof.leaf.availableRaw) + 1n).toString() } },
      { ...proof, leaf: { ...proof.leaf, frozenRaw: "0", availableRaw: (BigInt(proof.leaf.availableRaw) + BigInt(proof.leaf.frozenRaw)).toString() } },
      { ...proof, leaf: { ...proof.leaf, salt: "f".repeat(64) } },
      { ...proof, leaf: { ...proof.leaf, customerRefId: "someone-else" } },
      { ...proof, path: proof.path.map((step, index) => index === 0 ? { ...step, sumRaw: (BigInt(step.sumRaw) - 1n).toString() } : step) },
      { ...proof, path: proof.path.map((step, index) => index === 1 ? { ...step, hash: "0".repeat(64) } : step) },
      { ...proof, path: proof.path.map((step, index) => index === 0 ? { ...step, side: step.side === "LEFT" ? "RIGHT" : "LEFT" } : step) },
      { ...proof, root: { ...proof.root, sumRaw: (BigInt(proof.root.sumRaw) + 1n).toString() } },
      { ...proof, path: proof.path.slice(1) },
      { ...proof, leaf: { ...proof.leaf, availableRaw: "-1" } },
      { ...proof, leaf: { ...proof.leaf, availableRaw: "1e3" } }
    ]
    assert.deepStrictEqual(verifyProof(proof), [])
    for (const [index, bad] of changed.entries()) assert.isNotEmpty(verifyProof(bad), `change ${index}`)
  })

  it("Maxwell's flaw is closed: a parent that claims less than its children's sum (max instead of sum) is caught by both children", () => {
    const [left, right] = [leafNode(leafOf(1)), leafNode(leafOf(5))]
    // The original tree hashed only the total: a prover could claim max(left, right) and show each child a sibling
    // sum that adds up to it. Here both sums are in the parent's hash, so a path with a lowered sibling sum leads
    // to another root.
    const honest = parentNode(left, right)
    const lowered = rootFromPath(left, [{ side: "RIGHT", hash: right.hash, sum: right.sum - left.sum }])
    assert.notStrictEqual(lowered.hash, honest.hash)
    const loweredFromRight = rootFromPath(right, [{ side: "LEFT", hash: left.hash, sum: 0n }])
    assert.notStrictEqual(loweredFromRight.hash, honest.hash)
  })

  it("negative amounts are never in a tree: a leaf or a sibling sum below zero is refused", () => {
    assert.throws(() => leafNode({ ...leafOf(1), available: -1n }), /negative/)
    const node = leafNode(leafOf(1))
    assert.throws(() => parentNode(node, { hash: node.hash, sum: -5n }), /negative/)
  })
})
