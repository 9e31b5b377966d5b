/**
 * The spec's error table (section 7) in one place: one typed error per row, the framework rows (400, 405, 413, 408)
 * included, listed together in `errorTable`. Each class carries its code, HTTP status and retryable flag, so
 * handlers, services and the router boundary (ErrorBoundary.ts) fail with these and never pick status numbers
 * themselves. `wire(...)` turns a class into the schema HttpApi uses: its encoded side is the spec's envelope, its
 * decoded side is the class, so the typed client gets tagged errors back and OpenAPI documents the envelope.
 *
 * One idea (the table), kept in one file past 300 lines on purpose: each row is a short class of the same shape.
 */
import { Context, Fiber, Schema, SchemaTransformation } from "effect"
import { HttpApiSchema } from "effect/http-api"

export const CurrentRequestId = Context.Reference<string>("coffer/CurrentRequestId", { defaultValue: () => "unknown" })

export const ErrorEnvelope = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    retryable: Schema.Boolean,
    requestId: Schema.String
  })
}).annotate({ identifier: "ErrorEnvelope" })
export type ErrorEnvelope = typeof ErrorEnvelope.Type

const fields = { message: Schema.String }

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {
  static readonly code = "BAD_REQUEST"
  static readonly status = 422
  static readonly retryable = false
}
/** A path or query parameter that cannot be parsed: 400, answered before authentication. */
export class BadRequestParams extends Schema.TaggedError<BadRequestParams>()("BadRequestParams", fields) {
  static readonly code = "BAD_REQUEST"
  static readonly status = 400
  static readonly retryable = false
}
/** An unsupported method on a known path (framework row): answered with `Allow` by the router boundary. */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", fields) {
  static readonly code = "BAD_REQUEST"
  static readonly status = 405
  static readonly retryable = false
}
/** A body above 1 MiB (framework row, spec section 8), refused while being read. */
export class BodyTooLarge extends Schema.TaggedError<BodyTooLarge>()("BodyTooLarge", fields) {
  static readonly code = "BAD_REQUEST"
  static readonly status = 413
  static readonly retryable = false
}
/** Processing exceeded 30 s (framework row, spec section 8): PROVIDER_UNAVAILABLE with its own status, retryable. */
export class RequestTimedOut extends Schema.TaggedError<RequestTimedOut>()("RequestTimedOut", fields) {
  static readonly code = "PROVIDER_UNAVAILABLE"
  static readonly status = 408
  static readonly retryable = true
}
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {
  static readonly code = "UNAUTHORIZED"
  static readonly status = 401
  static readonly retryable = false
}
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {
  static readonly code = "FORBIDDEN"
  static readonly status = 403
  static readonly retryable = false
}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {
  static readonly code = "NOT_FOUND"
  static readonly status = 404
  static readonly retryable = false
}
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", fields) {
  static readonly code = "RATE_LIMITED"
  static readonly status = 429
  static readonly retryable = true
}
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()("IdempotencyConflict", fields) {
  static readonly code = "IDEMPOTENCY_CONFLICT"
  static readonly status = 409
  static readonly retryable = false
}
export class InvalidState extends Schema.TaggedError<InvalidState>()("InvalidState", fields) {
  static readonly code = "INVALID_STATE"
  static readonly status = 409
  static readonly retryable = false
}
export class Internal extends Schema.TaggedError<Internal>()("Internal", fields) {
  static readonly code = "INTERNAL"
  static readonly status = 500
  static readonly retryable = true
}
export class InvalidAddress extends Schema.TaggedError<InvalidAddress>()("InvalidAddress", fields) {
  static readonly code = "INVALID_ADDRESS"
  static readonly status = 422
  static readonly retryable = false
}
export class AssetNotSupported extends Schema.TaggedError<AssetNotSupported>()("AssetNotSupported", fields) {
  static readonly code = "ASSET_NOT_SUPPORTED"
  static readonly status = 422
  static readonly retryable = false
}
export class AssetDisabled extends Schema.TaggedError<AssetDisabled>()("AssetDisabled", fields) {
  static readonly code = "ASSET_DISABLED"
  static readonly status = 422
  static readonly retryable = false
}
export class NetworkDisabled extends Schema.TaggedError<NetworkDisabled>()("NetworkDisabled", fields) {
  static readonly code = "NETWORK_DISABLED"
  static readonly status = 422
  static readonly retryable = false
}
export class AssetMismatch extends Schema.TaggedError<AssetMismatch>()("AssetMismatch", fields) {
  static readonly code = "ASSET_MISMATCH"
  static readonly status = 422
  static readonly retryable = false
}
export class WalletLimitReached extends Schema.TaggedError<WalletLimitReached>()("WalletLimitReached", fields) {
  static readonly code = "WALLET_LIMIT_REACHED"
  static readonly status = 422
  static readonly retryable = false
}
export class WalletNotActive extends Schema.TaggedError<WalletNotActive>()("WalletNotActive", fields) {
  static readonly code = "WALLET_NOT_ACTIVE"
  static readonly status = 422
  static readonly retryable = false
}
export class RecipientNotFound extends Schema.TaggedError<RecipientNotFound>()("RecipientNotFound", fields) {
  static readonly code = "RECIPIENT_NOT_FOUND"
  static readonly status = 404
  static readonly retryable = false
}
export class RecipientNoWallet extends Schema.TaggedError<RecipientNoWallet>()("RecipientNoWallet", fields) {
  static readonly code = "RECIPIENT_NO_WALLET"
  static readonly status = 422
  static readonly retryable = false
}
export class SameWalletTransfer extends Schema.TaggedError<SameWalletTransfer>()("SameWalletTransfer", fields) {
  static readonly code = "SAME_WALLET_TRANSFER"
  static readonly status = 422
  static readonly retryable = false
}
export class SameUserUseWalletTransfer
  extends Schema.TaggedError<SameUserUseWalletTransfer>()("SameUserUseWalletTransfer", fields)
{
  static readonly code = "SAME_USER_USE_WALLET_TRANSFER"
  static readonly status = 422
  static readonly retryable = false
}
export class BelowMinWithdrawal extends Schema.TaggedError<BelowMinWithdrawal>()("BelowMinWithdrawal", fields) {
  static readonly code = "BELOW_MIN_WITHDRAWAL"
  static readonly status = 422
  static readonly retryable = false
}
export class QuoteExpired extends Schema.TaggedError<QuoteExpired>()("QuoteExpired", fields) {
  static readonly code = "QUOTE_EXPIRED"
  static readonly status = 422
  static readonly retryable = false
}
export class InsufficientBalance extends Schema.TaggedError<InsufficientBalance>()("InsufficientBalance", fields) {
  static readonly code = "INSUFFICIENT_BALANCE"
  static readonly status = 422
  static readonly retryable = false
}
export class LimitExceeded extends Schema.TaggedError<LimitExceeded>()("LimitExceeded", fields) {
  static readonly code = "LIMIT_EXCEEDED"
  static readonly status = 422
  static readonly retryable = false
}
export class TwoFactorRequired extends Schema.TaggedError<TwoFactorRequired>()("TwoFactorRequired", fields) {
  static readonly code = "TWO_FACTOR_REQUIRED"
  static readonly status = 403
  static readonly retryable = false
}
export class TwoFactorInvalid extends Schema.TaggedError<TwoFactorInvalid>()("TwoFactorInvalid", fields) {
  static readonly code = "TWO_FACTOR_INVALID"
  static readonly status = 403
  static readonly retryable = false
}
export class CooldownActive extends Schema.TaggedError<CooldownActive>()("CooldownActive", fields) {
  static readonly code = "COOLDOWN_ACTIVE"
  static readonly status = 403
  static readonly retryable = false
}
export class BlockedByPolicy extends Schema.TaggedError<BlockedByPolicy>()("BlockedByPolicy", fields) {
  static readonly code = "BLOCKED_BY_POLICY"
  static readonly status = 403
  static readonly retryable = false
}
export class EmailTaken extends Schema.TaggedError<EmailTaken>()("EmailTaken", fields) {
  static readonly code = "EMAIL_TAKEN"
  static readonly status = 409
  static readonly retryable = false
}
export class InternalDestinationNotAllowed
  extends Schema.TaggedError<InternalDestinationNotAllowed>()("InternalDestinationNotAllowed", fields)
{
  static readonly code = "INTERNAL_DESTINATION_NOT_ALLOWED"
  static readonly status = 422
  static readonly retryable = false
}
export class ProviderUnavailable extends Schema.TaggedError<ProviderUnavailable>()("ProviderUnavailable", fields) {
  static readonly code = "PROVIDER_UNAVAILABLE"
  static readonly status = 503
  static readonly retryable = true
}
export class SignerUnavailable extends Schema.TaggedError<SignerUnavailable>()("SignerUnavailable", fields) {
  static readonly code = "SIGNER_UNAVAILABLE"
  static readonly status = 503
  static readonly retryable = true
}

/** A row of the error table: what the envelope and the status line of an answer are made of. */
export interface ErrorRow {
  readonly code: string
  readonly status: number
  readonly retryable: boolean
}

/**
 * Every row of the spec's error table that this service answers, framework rows first. `INVALID_CREDENTIALS`
 * (console and portal only) and `MANUAL_REVIEW_REQUIRED` (reserved) are never returned from `/v1` and have no row.
 */
export const errorTable = [
  BadRequestParams,
  BadRequest,
  MethodNotAllowed,
  BodyTooLarge,
  RequestTimedOut,
  Unauthorized,
  Forbidden,
  NotFound,
  RateLimited,
  IdempotencyConflict,
  InvalidState,
  Internal,
  InvalidAddress,
  AssetNotSupported,
  AssetDisabled,
  NetworkDisabled,
  AssetMismatch,
  WalletLimitReached,
  WalletNotActive,
  RecipientNotFound,
  RecipientNoWallet,
  SameWalletTransfer,
  SameUserUseWalletTransfer,
  BelowMinWithdrawal,
  QuoteExpired,
  InsufficientBalance,
  LimitExceeded,
  TwoFactorRequired,
  TwoFactorInvalid,
  CooldownActive,
  BlockedByPolicy,
  EmailTaken,
  InternalDestinationNotAllowed,
  ProviderUnavailable,
  SignerUnavailable
] as const satisfies ReadonlyArray<ErrorRow>

/** What `wire` needs of an error class: the tagged class itself plus its static code, status and flag. */
interface ErrorClass<Tag extends string> {
  new(props: { readonly message: string }): { readonly _tag: Tag; readonly message: string }
  readonly code: string
  readonly status: number
  readonly retryable: boolean
}

/** The envelope as sent, for responses built outside HttpApi (router middleware, operator listener). */
export const envelopeOf = (
  cls: Pick<ErrorRow, "code" | "retryable">,
  message: string,
  requestId: string
): ErrorEnvelope => ({ error: { code: cls.code, message, retryable: cls.retryable, requestId } })

/**
 * The wire schema of an error class: encodes to the envelope with the current request id (encoding runs in the
 * request fiber), decodes the envelope back into the class.
 */
export const wire = <
  Tag extends string,
  S extends Schema.Top & ErrorClass<Tag> & { readonly Encoded: { readonly _tag: Tag; readonly message: string } }
>(cls: S, tag: Tag) =>
  ErrorEnvelope.pipe(
    Schema.decodeTo(
      cls,
      SchemaTransformation.transform<S["Encoded"], ErrorEnvelope>({
        decode: (envelope) => ({ _tag: tag, message: envelope.error.message }) as S["Encoded"],
        encode: (error) =>
          envelopeOf(cls, error.message, Fiber.getCurrent()?.getRef(CurrentRequestId) ?? "unknown")
      })
    ),
    HttpApiSchema.status(cls.status)
  )

export const BadRequestWire = wire(BadRequest, "BadRequest")
export const BadRequestParamsWire = wire(BadRequestParams, "BadRequestParams")
export const UnauthorizedWire = wire(Unauthorized, "Unauthorized")
export const ForbiddenWire = wire(Forbidden, "Forbidden")
export const NotFoundWire = wire(NotFound, "NotFound")
export const RateLimitedWire = wire(RateLimited, "RateLimited")
export const IdempotencyConflictWire = wire(IdempotencyConflict, "IdempotencyConflict")
export const InvalidStateWire = wire(InvalidState, "InvalidState")
export const InternalWire = wire(Internal, "Internal")
export const InvalidAddressWire = wire(InvalidAddress, "InvalidAddress")
export const AssetNotSupportedWire = wire(AssetNotSupported, "AssetNotSupported")
export const AssetDisabledWire = wire(AssetDisabled, "AssetDisabled")
export const NetworkDisabledWire = wire(NetworkDisabled, "NetworkDisabled")
export const AssetMismatchWire = wire(AssetMismatch, "AssetMismatch")
export const WalletLimitReachedWire = wire(WalletLimitReached, "WalletLimitReached")
export const WalletNotActiveWire = wire(WalletNotActive, "WalletNotActive")
export const RecipientNotFoundWire = wire(RecipientNotFound, "RecipientNotFound")
export const RecipientNoWalletWire = wire(RecipientNoWallet, "RecipientNoWallet")
export const SameWalletTransferWire = wire(SameWalletTransfer, "SameWalletTransfer")
export const SameUserUseWalletTransferWire = wire(SameUserUseWalletTransfer, "SameUserUseWalletTransfer")
export const BelowMinWithdrawalWire = wire(BelowMinWithdrawal, "BelowMinWithdrawal")
export const QuoteExpiredWire = wire(QuoteExpired, "QuoteExpired")
export const InsufficientBalanceWire = wire(InsufficientBalance, "InsufficientBalance")
export const LimitExceededWire = wire(LimitExceeded, "LimitExceeded")
export const TwoFactorRequiredWire = wire(TwoFactorRequired, "TwoFactorRequired")
export const TwoFactorInvalidWire = wire(TwoFactorInvalid, "TwoFactorInvalid")
export const CooldownActiveWire = wire(CooldownActive, "CooldownActive")
export const BlockedByPolicyWire = wire(BlockedByPolicy, "BlockedByPolicy")
export const EmailTakenWire = wire(EmailTaken, "EmailTaken")
export const InternalDestinationNotAllowedWire = wire(InternalDestinationNotAllowed, "InternalDestinationNotAllowed")
export const ProviderUnavailableWire = wire(ProviderUnavailable, "ProviderUnavailable")
export const SignerUnavailableWire = wire(SignerUnavailable, "SignerUnavailable")
