/**
 * The circuit-breaker addon: enforces `CircuitBreaker(group, threshold, cooldown)` declarations
 * (`Worker.layer({ addons: [CircuitBreakerAddon.addon] })` plus one of its Layers).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/circuitbreaker/CircuitBreakerAddon.js"
import * as state from "./internal/circuitbreaker/CircuitBreakerState.js"

/**
 * The addon: hand it to the worker (`addons: [CircuitBreakerAddon.addon]`); it needs a `CircuitBreakerState`.
 *
 * @since 0.2.0
 * @category addons
 */
export const addon = internal.addon

/**
 * The breakers' state the addon needs (provided by {@link layer} or {@link layerMemory}).
 *
 * @since 0.1.0
 * @category services
 */
export const CircuitBreakerState = state.CircuitBreakerState

/**
 * The breakers' state the addon needs.
 *
 * @since 0.1.0
 * @category services
 */
export type CircuitBreakerState = state.CircuitBreakerState

/**
 * Breakers on PostgreSQL: every worker on the database shares each group's breaker.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer

/**
 * In-process breakers (one process, tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = internal.layerMemory

/**
 * The breakers' operations; operators use `status(group)` and `reset(group)`.
 *
 * @since 0.1.0
 * @category models
 */
export type CircuitBreakerStateService = state.CircuitBreakerStateService

/**
 * A breaker's state, for inspection.
 *
 * @since 0.1.0
 * @category models
 */
export type CircuitStatus = state.CircuitStatus

/**
 * The breaker table could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export const CircuitBreakerStoreError = state.CircuitBreakerStoreError

/**
 * The breaker table could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export type CircuitBreakerStoreError = state.CircuitBreakerStoreError
