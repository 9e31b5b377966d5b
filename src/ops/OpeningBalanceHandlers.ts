/** GET and POST /ops/networks/{networkKey}/opening_balances (docs/ledger.md "Opening balances"). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { toRfc3339 } from "../domain/Time.ts"
import { type OpeningBalance, OpeningBalances } from "../ledger/OpeningBalances.ts"
import { auditOrigin } from "./AuditOrigin.ts"
import { OperatorAudit } from "./OperatorAudit.ts"
import { OpsApi } from "./OpsApi.ts"

const openingObject = (opening: OpeningBalance) => ({
  id: opening.id,
  networkKey: opening.networkKey,
  address: opening.address,
  role: opening.role,
  assetId: opening.assetId,
  amountRaw: opening.amount.toString(),
  height: opening.height.toString(),
  txid: opening.txid,
  vout: opening.vout,
  recordedAt: toRfc3339(opening.recordedAt),
  recordedBy: opening.recordedBy,
  requestId: opening.requestId
})

export const OpsOpeningBalanceHandlers = HttpApiBuilder.group(OpsApi, "openingBalances", (handlers) =>
  Effect.gen(function*() {
    const openings = yield* OpeningBalances
    const audit = yield* OperatorAudit
    return handlers
      .handle("list", ({ params }) =>
        Effect.map(openings.list(params.networkKey), (items) => ({ items: items.map(openingObject) })))
      .handle("record", ({ params, payload }) =>
        Effect.gen(function*() {
          // Who recorded it and under which request is what the row and its audit entry both keep.
          const origin = yield* auditOrigin
          const recorded = yield* audit.audited(origin, openings.record({
            networkKey: params.networkKey,
            address: payload.address,
            assetId: payload.assetId,
            amount: payload.amountRaw,
            outputs: payload.outputs?.map((output) => ({ txid: output.txid, vout: output.vout, value: output.valueRaw })),
            height: payload.height
          }, origin), (rows) => ({
            action: "OPENING_BALANCE_RECORDED",
            target: { type: "ADDRESS", id: `${params.networkKey}/${payload.address}` },
            tenantId: null,
            change: {
              assetId: payload.assetId,
              amountRaw: rows.reduce((sum, row) => sum + row.amount, 0n).toString(),
              height: rows[0]!.height.toString(),
              ...(payload.outputs === undefined ? {} : { outputs: payload.outputs.map((output) => `${output.txid}:${output.vout}`) })
            }
          }))
          return { items: recorded.map(openingObject) }
        }))
  }))
