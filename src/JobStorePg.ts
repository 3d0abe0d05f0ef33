/**
 * The PostgreSQL job store.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/store/JobStorePg.js"

/**
 * Builds the PostgreSQL store on the `SqlClient` in context; its batching of finalizing writes and
 * inserts, and the folding of counted audit entries into the counters, live for the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * Options of the PostgreSQL store: `preparedStatements` (default true: the worker's claim and finalizing
 * writes are named prepared statements, planned once per connection; turn off behind a connection
 * pooler in transaction mode), `migrate` (default true) and `counterRollUp` (default 2 seconds: how often,
 * from one interval after the store starts, the audit entries that count are folded into the `stats:*`
 * counters' rows; a read adds the entries written since).
 *
 * @since 0.3.0
 * @category models
 */
export type PgStoreOptions = internal.PgStoreOptions

/**
 * Builds the PostgreSQL store on the `SqlClient` in context, with options.
 *
 * @since 0.3.0
 * @category constructors
 */
export const makeWith = internal.makeWith

/**
 * The PostgreSQL store with options, e.g. `JobStorePg.layerWith({ preparedStatements: false })` behind
 * PgBouncer in transaction mode. Requires a `SqlClient`.
 *
 * @since 0.3.0
 * @category layers
 */
export const layerWith = internal.layerWith

/**
 * The PostgreSQL store; runs the core migrations when built. Requires a `SqlClient`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer

/**
 * The PostgreSQL store without running migrations (run `Migrations.core` yourself).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithoutMigrations = internal.layerWithoutMigrations
