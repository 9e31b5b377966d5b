/** GET /ops/sweeps and GET /ops/tenants/{tenantId}/gas (operator-interface.md "Platform"; docs/sweeps.md). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { toRfc3339 } from "../domain/Time.ts"
import { GasWallets } from "../sweeps/GasWallets.ts"
import { Sweeps } from "../sweeps/Sweeps.ts"
import { OpsApi } from "./OpsApi.ts"

/** Rows per page when the query names no limit. */
export const sweepPageDefault = 50

export const OpsSweepsHandlers = HttpApiBuilder.group(OpsApi, "sweeps", (handlers) =>
  Effect.gen(function*() {
    const sweeps = yield* Sweeps
    const gasWallets = yield* GasWallets
    return handlers
      .handle("list", ({ query }) =>
        Effect.map(
          sweeps.list({
            networkKey: query.networkKey,
            status: query.status,
            limit: query.limit ?? sweepPageDefault,
            cursor: query.cursor
          }),
          (page) => ({
            items: page.items.map((row) => ({
              id: row.id,
              kind: row.kind,
              networkKey: row.network_key,
              assetId: row.asset_id,
              from: row.from_address,
              to: row.to_address,
              amountRaw: row.amount.toString(),
              txHash: row.tx_hash,
              networkFeeRaw: row.network_fee?.toString() ?? null,
              status: row.status,
              createdAt: toRfc3339(row.created_at)
            })),
            nextCursor: page.nextCursor
          })
        ))
      .handle("gas", ({ params }) =>
        Effect.map(gasWallets.figures(params.tenantId), (wallets) =>
          wallets.map((wallet) => ({
            networkKey: wallet.networkKey,
            address: wallet.address,
            assetId: wallet.assetId,
            balanceRaw: wallet.balanceRaw.toString(),
            recommendedMinRaw: wallet.recommendedMinRaw.toString()
          }))))
  }))
