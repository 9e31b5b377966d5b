/** GET /ops/reserves and GET /ops/tenants/{tenantId}/users/{customerRefId}/liability_proof (docs/reserves.md). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { toRfc3339 } from "../domain/Time.ts"
import { Reserves } from "../ledger/Reserves.ts"
import { OpsApi } from "./OpsApi.ts"

export const OpsReservesHandlers = HttpApiBuilder.group(OpsApi, "reserves", (handlers) =>
  Effect.gen(function*() {
    const reserves = yield* Reserves
    return handlers
      .handle("report", () =>
        Effect.map(reserves.report, (report) => ({
          takenAt: toRfc3339(report.takenAt),
          items: report.assets.map((asset) => ({
            networkKey: asset.networkKey,
            assetId: asset.assetId,
            liabilities: {
              root: { hash: asset.root.hash, sumRaw: asset.root.sum.toString() },
              leafCount: asset.leafCount
            },
            holdings: asset.holdings === undefined ? null : {
              at: "HEAD" as const,
              height: asset.holdings.height.toString(),
              totalRaw: asset.holdings.total.toString(),
              addresses: asset.holdings.addresses.map((entry) => ({
                address: entry.address,
                role: entry.role,
                balanceRaw: entry.balance.toString()
              }))
            },
            holdingsNotRead: asset.holdingsNotRead ?? null,
            differenceRaw: asset.holdings === undefined ? null : (asset.holdings.total - asset.root.sum).toString()
          }))
        })))
      .handle("liabilityProof", ({ params }) =>
        Effect.map(reserves.liabilityProof(params.tenantId, params.customerRefId), (found) => ({
          takenAt: toRfc3339(found.takenAt),
          proofs: found.proofs
        })))
  }))
