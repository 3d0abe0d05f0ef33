/**
 * The registry of handlers (and recurring registrations) of this process.
 *
 * @since 0.1.0
 */
import type { AnyHandler } from "./internal/job/Handler.js"
import * as internal from "./internal/job/Registry.js"

/**
 * A handler with its requirements already provided.
 *
 * @since 0.1.0
 * @category models
 */
export type Registered = internal.Registered

/**
 * The registry's operations.
 *
 * @since 0.1.0
 * @category models
 */
export type RegistryService = internal.RegistryService

/**
 * The registry service tag.
 *
 * @since 0.1.0
 * @category services
 */
export const Registry = internal.Registry

/**
 * The registry service tag.
 *
 * @since 0.1.0
 * @category services
 */
export type Registry = internal.Registry

/**
 * Registration input: handlers and (optionally) recurring jobs.
 *
 * @since 0.1.0
 * @category models
 */
export type RegistryInput<H extends ReadonlyArray<AnyHandler>> = internal.RegistryInput<H>

/**
 * Builds the registry. Dies at construction on a duplicate registration (a programming error).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * The registry as a Layer; it requires whatever the registered handlers require.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer
