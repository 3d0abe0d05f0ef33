/**
 * Global policy defaults: the lowest rung of resolution, read live at every attempt (never stamped).
 * `GlobalPolicies` is a `Context.Reference`: without a Layer there are no defaults.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/policy/GlobalPolicies.js"

/**
 * The global defaults' operations.
 *
 * @since 0.2.0
 * @category models
 */
export type GlobalPoliciesService = internal.GlobalPoliciesService

/**
 * The global defaults (a `Context.Reference`, default: none).
 *
 * @since 0.1.0
 * @category services
 */
export const GlobalPolicies = internal.GlobalPolicies

/**
 * The global defaults (a `Context.Reference`, default: none).
 *
 * @since 0.1.0
 * @category services
 */
export type GlobalPolicies = internal.GlobalPolicies

/**
 * A live service over a `SubscriptionRef` of the defaults (change them at runtime).
 *
 * @since 0.2.0
 * @category constructors
 */
export const fromRef = internal.fromRef

/**
 * Fixed global defaults: `GlobalPolicies.layer([Retry(3), Timeout("1 minute")])`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer

/**
 * No global defaults (the same as providing nothing).
 *
 * @since 0.1.0
 * @category layers
 */
export const none = internal.none
