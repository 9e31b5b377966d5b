/**
 * A body sent without `Content-Length` (chunked) is counted as it streams (issue 36): its size decides 413 (above
 * 1 MiB) before any route runs, and at most 256 KiB of it is ever held in memory, the most any route accepts. The
 * bytes past that are read and counted only, so that 413 and 422 keep their spec meanings (section 8: above 256 KiB
 * is 422 `body too large`, above 1 MiB 413) without a stranger's megabyte being buffered.
 *
 * The request each route then sees is the same request with its body already read: `arrayBuffer` and `text` (and so
 * `json`) answer the held bytes, and a body over 256 KiB answers 422 `body too large` when a route reads it.
 * Signed routes do not read it: check 3 judges the counted size first (`StreamedBodySize`).
 */
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Context, Effect, Stream } from "effect"
import type { HttpServerRequest } from "effect/http"
import { BadRequest, BodyTooLarge } from "../domain/ApiError.ts"

/** The most of a body any route accepts: spec section 5 check 3 and section 8 (larger is 422 `body too large`). */
export const requestBodyLimitBytes = 256 * 1024

/** Bodies above this are 413 however they are framed (spec sections 7 and 8). */
export const requestBodyHardLimitBytes = 1024 * 1024

export const bodyTooLargeMessage = "body too large"

/** The counted size of a chunked body, set by the boundary; undefined when the request declared a Content-Length. */
export const StreamedBodySize = Context.Reference<number | undefined>("coffer/StreamedBodySize", {
  defaultValue: () => undefined
})

export interface StreamedBody {
  readonly size: number
  /** The whole body when `size` is at most `requestBodyLimitBytes`; otherwise undefined (never held). */
  readonly bytes: Uint8Array | undefined
}

/**
 * Reads the body chunk by chunk: keeps chunks while the total stays within `requestBodyLimitBytes`, then drops what
 * it held and only counts; fails with 413 the moment the count passes `requestBodyHardLimitBytes`, without reading on.
 */
export const readStreamedBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.suspend(() => {
    let size = 0
    let held: Array<Uint8Array> | undefined = []
    return request.stream.pipe(
      Stream.runForEach((chunk) => {
        size += chunk.byteLength
        if (size > requestBodyHardLimitBytes) return Effect.fail(new BodyTooLarge({ message: bodyTooLargeMessage }))
        if (held !== undefined) {
          if (size > requestBodyLimitBytes) held = undefined
          else held.push(chunk)
        }
        return Effect.void
      }),
      // A client that goes away mid-body, or a malformed chunk, fails the read: a defect classified like the
      // platform's own body-read failures.
      Effect.catchTag("HttpServerError", Effect.die),
      Effect.map((): StreamedBody => ({ size, bytes: held === undefined ? undefined : concat(held, size) }))
    )
  })

/**
 * Reads a body whose size the request declared (Node's parser holds it to its Content-Length). Unlike the platform's
 * read, an interrupted read (the 30 s processing limit, ErrorBoundary.ts) does not destroy the request: that closed
 * the socket with the body unread, and the client got no answer at all instead of the boundary's 408. The rest of the
 * body is discarded as it arrives instead, and the connection closes after the answer.
 */
export const readDeclaredBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.callback<StreamedBody>((resume) => {
    const source = NodeHttpServerRequest.toIncomingMessage(request)
    const chunks: Array<Uint8Array> = []
    let size = 0
    const onData = (chunk: Uint8Array) => {
      chunks.push(chunk)
      size += chunk.byteLength
    }
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("aborted", onError)
    }
    const onEnd = () => {
      stop()
      resume(Effect.succeed({ size, bytes: concat(chunks, size) }))
    }
    // A client gone mid-body: a defect, classified like the platform's own body-read failures.
    const onError = () => {
      stop()
      resume(Effect.die(new Error("the request body was not received")))
    }
    if (source.readableEnded) return resume(Effect.succeed({ size: 0, bytes: new Uint8Array() }))
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    source.on("aborted", onError)
    return Effect.sync(() => {
      stop()
      source.resume()
    })
  })

const concat = (chunks: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  if (chunks.length === 1) return chunks[0]!
  const all = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    all.set(chunk, offset)
    offset += chunk.byteLength
  }
  return all
}

/**
 * The request with its body already read: the platform's request caches a body it read itself, not one read through
 * its stream, so the routes get this view whose body answers come from `body`. Everything else is the request's own.
 */
export const withReadBody = (
  request: HttpServerRequest.HttpServerRequest,
  body: StreamedBody
): HttpServerRequest.HttpServerRequest => {
  const bytes = body.bytes
  const arrayBuffer = bytes === undefined
    ? Effect.die(new BadRequest({ message: bodyTooLargeMessage }))
    : Effect.succeed(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer)
  const text = Effect.map(arrayBuffer, (buffer) => textDecoder.decode(buffer))
  return Object.create(request, {
    arrayBuffer: { get: () => arrayBuffer },
    text: { get: () => text },
    stream: { get: () => bytes === undefined ? Stream.die(new BadRequest({ message: bodyTooLargeMessage })) : Stream.make(bytes) }
  }) as HttpServerRequest.HttpServerRequest
}

const textDecoder = new TextDecoder()
