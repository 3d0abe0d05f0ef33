/**
 * The in-memory semaphore provider (one process; tests and demos).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/semaphore/SemaphoreProviderMemory.js"

/**
 * Builds an in-memory provider.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * An in-memory provider Layer (one slot table per Layer instance).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
