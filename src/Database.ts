/**
 * The PostgreSQL connection Layer, with a clear error when the server is unreachable.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/store/Database.js"

/**
 * PostgreSQL could not be reached (or no URL was given). Names the host and where the URL came from.
 *
 * @since 0.1.0
 * @category errors
 */
export const DatabaseUnreachable = internal.DatabaseUnreachable

/**
 * PostgreSQL could not be reached (or no URL was given).
 *
 * @since 0.1.0
 * @category errors
 */
export type DatabaseUnreachable = internal.DatabaseUnreachable

/**
 * Options of the connection Layer: `maxConnections` (default 20), `connectTimeout` (default 5
 * seconds), `source` (for the error message) and, since 0.3.0, `applicationName` (default
 * `warp-effect {pid}@{hostname}`), the `application_name` of every connection.
 *
 * @since 0.1.0
 * @category models
 */
export type DatabaseOptions = internal.DatabaseOptions

/**
 * A `PgClient` (and `SqlClient`) on `url`; fails with {@link DatabaseUnreachable} if it cannot connect.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer

/**
 * A `PgClient` on the URL in environment variable `name` (default `DATABASE_URL`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromEnv = internal.layerFromEnv
