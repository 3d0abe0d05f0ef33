/**
 * The rate-limit addon: enforces `RateLimit(key, limit, window)` declarations
 * (`Worker.layer({ addons: [RateLimitAddon.addon] })` plus one of its Layers).
 *
 * @since 0.1.0
 */
import * as internal from "./internal/ratelimit/RateLimitAddon.js"
import * as limiter from "./internal/ratelimit/RateLimiter.js"

/**
 * The addon: hand it to the worker (`addons: [RateLimitAddon.addon]`); it needs a `RateLimiter`.
 *
 * @since 0.2.0
 * @category addons
 */
export const addon = internal.addon

/**
 * The rate limiter the addon needs (provided by {@link layer} or {@link layerMemory}).
 *
 * @since 0.1.0
 * @category services
 */
export const RateLimiter = limiter.RateLimiter

/**
 * The rate limiter the addon needs.
 *
 * @since 0.1.0
 * @category services
 */
export type RateLimiter = limiter.RateLimiter

/**
 * The limiter on PostgreSQL: windows are shared by every worker on the database.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer

/**
 * The limiter with in-process windows (one process, tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = internal.layerMemory

/**
 * The limiter's operations (`current(key)` for inspection).
 *
 * @since 0.1.0
 * @category models
 */
export type RateLimiterService = limiter.RateLimiterService

/**
 * The window table could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export const RateLimitStoreError = limiter.RateLimitStoreError

/**
 * The window table could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export type RateLimitStoreError = limiter.RateLimitStoreError
