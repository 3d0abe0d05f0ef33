/**
 * The PostgreSQL semaphore provider: one session advisory lock per held slot.
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
