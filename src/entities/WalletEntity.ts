/**
 * Each wallet is a cluster entity (id = wallet id) that supervises its provisioning. `Provision` is a persisted
 * message: it survives a kill -9 and is delivered again after a restart, and the handler is idempotent (state is
 * read from PostgreSQL, every transition is a conditional UPDATE), so running it twice is harmless. Fatal defects
 * are reported to the caller instead of restarting the entity forever (cluster notes, "Supervision").
 */
import { Effect, Schema } from "effect"
import { ClusterSchema, Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { WalletProvisioner } from "../wallets/WalletProvisioner.ts"

export const Provision = Rpc.make("Provision", {
  /** Distinguishes the first request from a supervisor's later re-requests (each is deduplicated on its own). */
  payload: { attempt: Schema.String },
  primaryKey: ({ attempt }) => attempt,
  success: Schema.Literals(["ACTIVATED", "REGISTERED", "ALREADY_PROVISIONED", "MISSING"])
}).annotate(ClusterSchema.Persisted, true)

export const WalletEntity = Entity.make("Wallet", [Provision])

export const WalletEntityLayer = WalletEntity.toLayer(
  Effect.gen(function*() {
    const provisioner = yield* WalletProvisioner
    const { entityId } = yield* Entity.CurrentAddress
    return WalletEntity.of({
      Provision: () => provisioner.provision(entityId)
    })
  }),
  { maxIdleTime: "1 minute", disableFatalDefects: true }
)
