/**
 * The chain parameters a version was signed with, as stored in `outgoing_versions.parameters` (sql/0017): the
 * WithdrawalParameters union with every bigint as a digit string, decoded back at the edge. A later version of the
 * same send (BTC replace-by-fee, a TRON/SOL re-signature after expiry) starts from them.
 */
import { Schema } from "effect"
import type { WithdrawalParameters } from "../chains/ChainClient.ts"
import { withFeePayer } from "../chains/sol/SolWithdrawals.ts"

const Amount = Schema.BigIntFromString

const SigningKeyJson = Schema.Unknown

export const StoredParameters = Schema.Union([
  Schema.Struct({
    family: Schema.Literal("EVM"),
    chainId: Schema.Number,
    nonce: Schema.Number,
    gas: Amount,
    maxFeePerGas: Amount,
    maxPriorityFeePerGas: Amount,
    networkFee: Amount
  }),
  Schema.Struct({
    family: Schema.Literal("TRON"),
    referenceBlock: Schema.Struct({ number: Amount, id: Schema.String, timestamp: Schema.Number }),
    feeLimit: Amount,
    networkFee: Amount,
    expiration: Schema.optionalKey(Schema.Number)
  }),
  Schema.Struct({
    family: Schema.Literal("BTC"),
    inputs: Schema.Array(Schema.Struct({
      txid: Schema.String,
      vout: Schema.Number,
      value: Amount,
      key: Schema.optionalKey(SigningKeyJson)
    })),
    networkFee: Amount
  }),
  Schema.Struct({
    family: Schema.Literal("SOL"),
    recentBlockhash: Schema.String,
    lastValidBlockHeight: Schema.optionalKey(Amount),
    feePayer: Schema.optionalKey(SigningKeyJson),
    networkFee: Amount
  })
])

const encode = Schema.encodeSync(StoredParameters)
const decode = Schema.decodeUnknownSync(StoredParameters)

/** The JSON text stored for `parameters`. */
export const storedParameters = (parameters: WithdrawalParameters): string => JSON.stringify(encode(parameters as never))

/** The parameters a version was signed with, or undefined for a version stored before they were kept. */
export const signedParameters = (stored: unknown): WithdrawalParameters | undefined =>
  stored === null || stored === undefined ? undefined : decode(stored) as WithdrawalParameters

/**
 * The parameters a new version of a send is signed on after its previous one expired: the client's `fresh` ones
 * (a new reference), with what is the send's own rather than the chain's carried over from the `previous` version.
 * A SOL transfer paid by another wallet (an SPL sweep paid by the tenant's GAS wallet) keeps that fee payer: without
 * it the deposit address, which holds no SOL, would have to pay.
 */
export const renewedParameters = (
  previous: WithdrawalParameters | undefined,
  fresh: WithdrawalParameters
): WithdrawalParameters =>
  previous?.family === "SOL" && previous.feePayer !== undefined && fresh.family === "SOL"
    ? withFeePayer(fresh, previous.feePayer)
    : fresh
