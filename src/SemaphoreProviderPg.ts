/**
 * The PostgreSQL semaphore provider: one session advisory lock per held slot, held on `pg`
 * connections of the provider's own pool (built from the `PgClient`'s settings).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/semaphore/SemaphoreProviderPg.js"

/**
 * Options of the PostgreSQL provider.
 *
 * @since 0.1.0
 * @category models
 */
export type PgProviderOptions = internal.PgProviderOptions

/**
 * The settings of the provider's own slot connections (`PgProviderOptions.connection`): by default
 * those of the `PgClient` in context.
 *
 * @since 1.0.0
 * @category models
 */
export type PgSlotConnection = internal.PgSlotConnection

/**
 * Builds the provider on the `SqlClient` in context; closes its connections with the surrounding scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * The provider as a Layer over the `SqlClient` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
