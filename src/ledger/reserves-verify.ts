/**
 * `npm run reserves:verify -- <proof.json> [--root <hash>]` (docs/reserves.md): checks a liability proof offline,
 * with nothing of the service but ReserveTree.ts: the leaf's hash is its fields' (the owner's salt, identity,
 * asset and balances), and the path leads to the stated root, hash and sum. `--root` also requires that root to be
 * the one given (the root the operator published for the asset, GET /ops/reserves). The file is the answer of
 * GET /ops/tenants/{tenantId}/users/{customerRefId}/liability_proof (every proof in it is checked) or one proof of it;
 * `-` or no file reads standard input.
 *
 * Exit status 0: every proof holds; 1: one does not; 2: the input could not be read.
 */
import { readFileSync } from "node:fs"
import { type LiabilityProofWire, verifyProof } from "./ReserveTree.ts"

const usage = "usage: npm run reserves:verify -- <proof.json | -> [--root <hash>]"

const main = (argv: ReadonlyArray<string>): number => {
  let file = "-"
  let root: string | undefined
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!
    if (argument === "--root") {
      root = argv[++index]
      if (root === undefined) {
        console.error(usage)
        return 2
      }
    } else if (argument === "--help" || argument === "-h") {
      console.log(usage)
      return 0
    } else file = argument
  }
  let parsed: any
  try {
    parsed = JSON.parse(readFileSync(file === "-" ? 0 : file, "utf8"))
  } catch (error) {
    console.error(`cannot read a proof from ${file === "-" ? "standard input" : file}: ${error instanceof Error ? error.message : String(error)}`)
    return 2
  }
  const proofs: ReadonlyArray<LiabilityProofWire> = Array.isArray(parsed?.proofs) ? parsed.proofs : [parsed]
  if (proofs.length === 0) {
    console.error("the file holds no proof (the user holds no asset)")
    return 2
  }
  let failed = 0
  for (const proof of proofs) {
    const problems = [...verifyProof(proof)]
    if (root !== undefined && proof?.root?.hash !== root) problems.push(`its root ${proof?.root?.hash} is not ${root}`)
    const name = `${proof?.assetId} of ${proof?.leaf?.ownerKind === "TENANT_FEES" ? "tenant fees" : proof?.leaf?.customerRefId}`
    if (problems.length === 0) {
      console.log(`proof ok: ${name}: available ${proof.leaf.availableRaw}, frozen ${proof.leaf.frozenRaw}, ` +
        `included in root ${proof.root.hash} summing to ${proof.root.sumRaw}`)
    } else {
      failed++
      console.log(`proof FAILS: ${name}: ${problems.join("; ")}`)
    }
  }
  return failed === 0 ? 0 : 1
}

process.exitCode = main(process.argv.slice(2))
