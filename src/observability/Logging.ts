/**
 * How the service writes its log (README "Configuration", docs/operations.md "Logs"):
 * - `LOG_FORMAT=text` (the default, for a developer's terminal): effect's default human-readable line.
 * - `LOG_FORMAT=json`: one JSON object a line on stdout, `timestamp`, `level`, `message`, then the line's
 *   annotations as fields of their own (`requestId`, `tenantId` inside a request; the access line's `method`,
 *   `route`, `status`, `durationMs`), and `cause` when the line carries one. Flat, so a log shipper indexes the
 *   fields without a mapping.
 * - `LOG_LEVEL`: `trace`, `debug`, `info` (default), `warn`, `error`, `fatal` or `none`, case-insensitive.
 *
 * Nothing here decides what is logged; secrets stay out because they are Redacted everywhere (Config.ts) and no line
 * prints a header or a body (test/observability/Logs.test.ts runs real requests and checks every line).
 */
import { Cause, Config, Effect, Layer, Logger, type LogLevel, References } from "effect"
import { ConfigInvalid } from "../Config.ts"

export const LogFormat = ["text", "json"] as const
export type LogFormat = (typeof LogFormat)[number]

const levels: Readonly<Record<string, LogLevel.LogLevel>> = {
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warn: "Warn",
  warning: "Warn",
  error: "Error",
  fatal: "Fatal",
  none: "None"
}

/** A log annotation as a JSON value: what JSON can carry as it is, anything else as its string. */
const jsonValue = (value: unknown): unknown => {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value
  if (typeof value === "number") return Number.isFinite(value) ? value : String(value)
  if (typeof value === "bigint") return value.toString()
  if (value instanceof Date) return value.toISOString()
  if (Array.isArray(value) || (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype)) {
    return value
  }
  return String(value)
}

const messageText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => typeof part === "string" ? part : JSON.stringify(jsonValue(part)) ?? String(part)).join(" ")
}

/** Keys of the line itself: an annotation with one of these names is written under `annotation.<name>`. */
const reservedKeys = new Set(["timestamp", "level", "message", "cause"])

/**
 * The JSON-lines logger, writing each line through `write` (stdout by default; tests collect the lines).
 */
export const jsonLogger = (write: (line: string) => void = (line) => process.stdout.write(line)) =>
  Logger.make<unknown, void>(({ cause, date, fiber, logLevel, message }) => {
    const line: Record<string, unknown> = {
      timestamp: date.toISOString(),
      level: logLevel.toUpperCase(),
      message: messageText(message)
    }
    const annotations = fiber.getRef(References.CurrentLogAnnotations)
    for (const key in annotations) {
      line[reservedKeys.has(key) ? `annotation.${key}` : key] = jsonValue(annotations[key])
    }
    if (cause.reasons.length > 0) line.cause = Cause.pretty(cause)
    write(`${JSON.stringify(line)}\n`)
  })

export interface LoggingSettings {
  readonly format: LogFormat
  readonly level: LogLevel.LogLevel
}

/** LOG_FORMAT and LOG_LEVEL; a value outside the lists stops the start, naming the variable. */
export const loggingSettings: Effect.Effect<LoggingSettings, ConfigInvalid | Config.ConfigError> = Effect.gen(function*() {
  const format = yield* Config.String("LOG_FORMAT").pipe(Config.withDefault("text"))
  const levelText = yield* Config.String("LOG_LEVEL").pipe(Config.withDefault("info"))
  const normalizedFormat = format.trim().toLowerCase()
  if (normalizedFormat !== "text" && normalizedFormat !== "json") {
    return yield* new ConfigInvalid({ message: "LOG_FORMAT: expected text or json" })
  }
  const level = levels[levelText.trim().toLowerCase()]
  if (level === undefined) {
    return yield* new ConfigInvalid({ message: "LOG_LEVEL: expected trace, debug, info, warn, error, fatal or none" })
  }
  return { format: normalizedFormat, level }
})

/** The loggers and minimum level for these settings; `write` replaces stdout for the JSON lines (tests). */
export const loggingLayer = (settings: LoggingSettings, write?: (line: string) => void): Layer.Layer<never> =>
  Layer.mergeAll(
    settings.format === "json" ? Logger.layer([jsonLogger(write)]) : Layer.empty,
    Layer.succeed(References.MinimumLogLevel)(settings.level)
  )

/** The logging of the whole process from LOG_FORMAT and LOG_LEVEL (main.ts provides it around everything). */
export const LoggingLayer = Layer.unwrap(Effect.map(loggingSettings, (settings) => loggingLayer(settings)))
