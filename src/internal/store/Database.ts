/**
 * The PostgreSQL connection Layer, with a clear typed error when the server cannot be reached.
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Config from "effect/Config"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
import { hostname } from "node:os"

/** PostgreSQL could not be reached (or no URL was given). Names the host and where the URL came from. */
export class DatabaseUnreachable extends Data.TaggedError("DatabaseUnreachable")<{
  readonly host: string
  readonly source: string
  readonly reason: string
}> {
  override get message(): string {
    return `Cannot reach PostgreSQL at ${this.host} (URL from ${this.source}): ${this.reason}`
  }
}

/** Options of the connection Layer. */
export interface DatabaseOptions {
  /** Pool size; each held slot of the PostgreSQL semaphore provider keeps one connection (default 20). */
  readonly maxConnections?: number
  /** How long to wait for the first connection (default 5 seconds). */
  readonly connectTimeout?: Duration.Input
  /** Where the URL came from, for the error message (default "configuration"). */
  readonly source?: string
  /**
   * The `application_name` every connection of the pool sets (default {@link defaultApplicationName}:
   * `warp-effect {pid}@{hostname}`). The workers page counts a worker's connections by the name its
   * store connection carries, so keep it unique per process (PostgreSQL keeps its first 63 bytes).
   */
  readonly applicationName?: string
}

/** The default `application_name`: `warp-effect {pid}@{hostname}`, one per process. */
export const defaultApplicationName = (): string => `warp-effect ${process.pid}@${hostname()}`

const hostOf = (url: string): string => {
  try {
    const u = new URL(url)
    return u.port === "" ? u.hostname : `${u.hostname}:${u.port}`
  } catch {
    return "(unparseable URL)"
  }
}

const reasonOf = (e: unknown): string => {
  // a SqlError's `cause` is its reason (`ConnectionError`, ...), whose own `cause` is the socket's or server's error
  const cause = (e as { cause?: { message?: string; cause?: { message?: string } } })?.cause
  return cause?.cause?.message ?? cause?.message ?? (e as { message?: string })?.message ?? String(e)
}

/** A `PgClient` (and `SqlClient`) on `url`; fails with {@link DatabaseUnreachable} if it cannot connect. */
export const layer = (url: string, options: DatabaseOptions = {}): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, DatabaseUnreachable> =>
  PgClient.layerFrom(
    PgClient.make({
      url: Redacted.make(url),
      maxConnections: options.maxConnections ?? 20,
      connectTimeout: options.connectTimeout ?? "5 seconds",
      applicationName: options.applicationName ?? defaultApplicationName()
    }).pipe(
      // the pool connects lazily: one statement proves the server is there when the layer is built
      Effect.tap((client) => client`SELECT 1`),
      Effect.mapError((e) => new DatabaseUnreachable({ host: hostOf(url), source: options.source ?? "configuration", reason: reasonOf(e) }))
    )
  )

/** A `PgClient` on the URL in environment variable `name` (default `DATABASE_URL`). */
export const layerFromEnv = (
  name = "DATABASE_URL",
  options: Omit<DatabaseOptions, "source"> = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, DatabaseUnreachable> =>
  Layer.unwrap(
    Config.String(name).pipe(
      Effect.mapError(() => new DatabaseUnreachable({ host: "(none)", source: `environment variable ${name}`, reason: `${name} is not set` })),
      Effect.map((url) => layer(url, { ...options, source: `environment variable ${name}` }))
    )
  )
