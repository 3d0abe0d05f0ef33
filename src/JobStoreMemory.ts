/**
 * The in-memory job store (one process; tests and demos).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/store/JobStoreMemory.js"

/**
 * Builds an empty in-memory store.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * A fresh in-memory store.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
