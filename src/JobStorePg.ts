/**
 * The PostgreSQL job store.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/store/JobStorePg.js"

/**
 * Builds the PostgreSQL store on the `SqlClient` in context; its batching of finalizing writes lives
 * for the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

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
