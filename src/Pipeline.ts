/**
 * The pipeline of behaviors around handlers, and the shape of a worker addon.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/attempt/Pipeline.js"

/**
 * One pipeline behavior, with its own requirements already provided.
 *
 * @since 0.1.0
 * @category models
 */
export type Behavior = internal.Behavior

/**
 * A worker addon: a value handed to `Worker.make/layer({ addons })` that builds its behavior from
 * the services `R` (which the worker's type then requires).
 *
 * @since 0.2.0
 * @category models
 */
export type Addon<R = never> = internal.Addon<R>

/**
 * The services an array of addons needs.
 *
 * @since 0.2.0
 * @category models
 */
export type AddonServices<A extends ReadonlyArray<Addon<any>>> = internal.AddonServices<A>
