/** Wire pieces shared by several groups: paging and enumerations (spec sections 2, 4 and the decisions table). */
import { Schema } from "effect"

/** `limit` (1-200, default 50): a query value outside that range is a parse failure, 400 before authentication. */
export const pageLimitMax = 200
export const pageLimitDefault = 50
export const PageLimit = Schema.FiniteFromString.check(
  Schema.isInt(),
  Schema.isBetween({ minimum: 1, maximum: pageLimitMax })
).annotate({ description: "page size, 1-200, default 50" })

export const ChainFamilyWire = Schema.Literals(["EVM", "TRON", "BTC", "SOL"])
export const UserStatus = Schema.Literals(["ACTIVE", "FROZEN", "CLOSED"])
export const WalletStatus = Schema.Literals(["PROVISIONING", "ACTIVE", "HIDDEN", "FROZEN", "CLOSED"])
