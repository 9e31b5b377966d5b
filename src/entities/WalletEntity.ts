/**
 * Each wallet is a cluster entity (id = wallet id) that supervises its provisioning. The handler is idempotent (state
 * is read from PostgreSQL, every transition is a conditional UPDATE), so running it twice is harmless. Fatal defects
 * are reported to the caller instead of restarting the entity forever (cluster notes, "Supervision").
 *
 * Only the provisioning supervisor asks it (at a start, and for wallets stuck in PROVISIONING): a request that creates
 * a wallet provisions it in a fiber of its own process instead (wallets/ProvisioningRuns.ts), because an entity stays
 * resident for a minute after its work and a burst of new wallets filled the runner's resident-entity cap (issue 39,
 * docs/wallets.md "Resident entities").
 *
 * Two messages ask the same thing. The wallet is committed (PROVISIONING) before it is asked about, so a request need
 * not survive a crash: the provisioning supervisor asks every PROVISIONING wallet again when a process starts, and
 * every one that waits too long afterwards.
 * - `ProvisionNow`, volatile, when this process holds the entity's shard: delivered in memory (LocalFirstSend.ts).
 * - `Provision`, persisted, when another process holds the shard, or when the volatile send fails. Each names its
 *   attempt (the first request, a new network's registration, a supervisor's re-request), deduplicated on its own.
 */
import { Effect, Schema } from "effect"
import { ClusterSchema, Entity, type Sharding } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { WalletProvisioner } from "../wallets/WalletProvisioner.ts"
import { askLocalFirst } from "./LocalFirstSend.ts"

const ProvisionReply = Schema.Literals(["ACTIVATED", "REGISTERED", "ALREADY_PROVISIONED", "MISSING"])

export const Provision = Rpc.make("Provision", {
  /** Distinguishes the first request from a supervisor's later re-requests (each is deduplicated on its own). */
  payload: { attempt: Schema.String },
  primaryKey: ({ attempt }) => attempt,
  success: ProvisionReply
}).annotate(ClusterSchema.Persisted, true)

/** `Provision` delivered in memory to an entity of this process (above): lost with the process, which is fine here. */
export const ProvisionNow = Rpc.make("ProvisionNow", {
  payload: { attempt: Schema.String },
  success: ProvisionReply
})

export const WalletEntity = Entity.make("Wallet", [Provision, ProvisionNow])

export const WalletEntityLayer = WalletEntity.toLayer(
  Effect.gen(function*() {
    const provisioner = yield* WalletProvisioner
    const { entityId } = yield* Entity.CurrentAddress
    return WalletEntity.of({
      Provision: () => provisioner.provision(entityId),
      ProvisionNow: () => provisioner.provision(entityId)
    })
  }),
  { maxIdleTime: "1 minute", disableFatalDefects: true }
)

/** Asks the wallet's entity to provision it (LocalFirstSend.ts); never fails. */
export const requestProvisioning = (
  walletId: string,
  attempt: string
): Effect.Effect<void, never, Sharding.Sharding> =>
  Effect.flatMap(WalletEntity.client, (clientFor) => {
    const client = clientFor(walletId)
    return askLocalFirst({
      entity: WalletEntity,
      id: walletId,
      inMemory: client.ProvisionNow({ attempt }, { discard: true }),
      stored: client.Provision({ attempt }, { discard: true }),
      lost: `could not ask wallet ${walletId} to provision; the supervisor will`
    })
  })
