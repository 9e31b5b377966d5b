/**
 * The runners' socket transport (effect/cluster's SocketRunner), authenticated by the cluster's shared secret when one
 * is set (`RUNNER_SECRET`, Config.ts).
 *
 * effect/cluster's runner protocol has no authentication of its own: whoever reaches the runner port can notify
 * entities, send them requests and ping the runner. With a secret, every runner connection is TLS 1.2 with a
 * pre-shared key (TLS-PSK, RFC 4279) derived from it: both ends prove they hold the key in the handshake, and the
 * messages travel encrypted. A peer without the secret (or with another one) fails the handshake and is disconnected
 * before a byte of the protocol is read. No certificates to issue or rotate: one variable, the same on every process.
 *
 * Without a secret the transport is plain TCP, as effect/cluster's `NodeClusterSocket` makes it; Config.ts allows that
 * only while the port listens on loopback (every process on one machine).
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import { Effect, Layer, Option, Redacted } from "effect"
import { Runners } from "effect/cluster"
import { RpcClient, RpcSerialization } from "effect/rpc"
import { Socket } from "effect/socket"
import { createHash } from "node:crypto"
import type { TLSSocket } from "node:tls"

/** The identity both ends name in the handshake: one cluster, one key. */
export const runnerPskIdentity = "coffer-runner"

/** TLS-PSK exists in TLS 1.2 only in Node (1.3's PSK is for resumption); one AEAD cipher, no certificate. */
const pskTls = { ciphers: "PSK-AES256-GCM-SHA384", minVersion: "TLSv1.2", maxVersion: "TLSv1.2" } as const

/** The pre-shared key of the cluster: 32 bytes derived from the secret, never the secret itself. */
export const runnerPsk = (secret: Redacted.Redacted<string>): Buffer =>
  createHash("sha256").update("coffer runner psk v1\u0000").update(Redacted.value(secret)).digest()

/** The runner port's listener: TLS-PSK with a key, plain TCP without. */
export const listenRunner = (options: { readonly host: string; readonly port: number; readonly psk: Buffer | undefined }) => {
  const { psk } = options
  if (psk === undefined) return NodeSocketServer.make({ host: options.host, port: options.port })
  return NodeSocketServer.makeTls({
    host: options.host,
    port: options.port,
    ...pskTls,
    // Another identity, or the right one with another key (the handshake's Finished messages then disagree), ends the
    // handshake; NodeSocketServer destroys the socket on `tlsClientError`.
    pskCallback: (_socket: TLSSocket, identity: string) => identity === runnerPskIdentity ? psk : null
  })
}

/**
 * How this runner connects to the others: as effect/cluster's `NodeClusterSocket.layerClientProtocol` (the same open
 * timeout and socket options), over TLS-PSK when the cluster has a secret.
 */
export const runnerClientProtocol = (psk: Buffer | undefined): Layer.Layer<
  Runners.RpcClientProtocol,
  never,
  RpcSerialization.RpcSerialization
> =>
  Layer.effect(Runners.RpcClientProtocol)(Effect.gen(function*() {
    const serialization = yield* RpcSerialization.RpcSerialization
    return {
      codecFor: serialization.codecFor,
      make: Effect.fnUntraced(function*(address) {
        const socket = psk === undefined
          ? yield* NodeSocket.makeNet({ openTimeout: 1000, timeout: 5500, host: address.host, port: address.port })
          : yield* NodeSocket.makeTls({
            openTimeout: 1000,
            timeout: 5500,
            host: address.host,
            port: address.port,
            ...pskTls,
            pskCallback: () => ({ psk, identity: runnerPskIdentity }),
            // No certificate: the key is the peer's proof (a server without it cannot finish the handshake).
            checkServerIdentity: () => undefined
          })
        return yield* RpcClient.makeProtocolSocket().pipe(
          Effect.provideService(Socket.Socket, socket),
          Effect.provideService(RpcSerialization.RpcSerialization, serialization)
        )
      }, Effect.orDie)
    }
  }))

/** The key of a configured secret, undefined without one. */
export const pskOf = (secret: Option.Option<Redacted.Redacted<string>>): Buffer | undefined =>
  Option.isSome(secret) ? runnerPsk(secret.value) : undefined
