/**
 * Policies: the type of a declaration, the error of an invalid one, and the persisted values
 * declarations stamp into a job's metadata. The declarations themselves (`Mutex`, `Semaphore`, `Retry`,
 * `Timeout`, `RateLimit`, `CircuitBreaker`) are exported flat by `warp-effect`, the words of a
 * `policy: [...]` list on a contract, a handler or as global defaults (at enqueue: `JobParameters`).
 *
 * @since 0.2.0
 */
import type * as Declaration_ from "./internal/policy/Declaration.js"
import * as invalid from "./internal/policy/InvalidPolicy.js"
import * as policies from "./internal/policy/Policies.js"
import type { FamilyName } from "./internal/policy/PolicyFamily.js"
import * as values from "./internal/policy/PolicyValues.js"

/**
 * A policy declaration of family `K`, as returned by `Retry(...)`, `Mutex(...)` and the others.
 * `P` is `"publishOnly"` for declarations accepted only at enqueue or on a contract (a `Total` timeout).
 *
 * @since 0.2.0
 * @category models
 */
export type Declaration<K extends FamilyName = FamilyName, P extends Declaration_.Placement = Declaration_.Placement> = Declaration_.Declaration<K, P>

/**
 * Options of `Retry`.
 *
 * @since 0.1.0
 * @category models
 */
export type RetryOptions = policies.RetryOptions

/**
 * An invalid policy input (blank key, limit below 1, ...); publishing fails with it.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidPolicy = invalid.InvalidPolicy

/**
 * An invalid policy input.
 *
 * @since 0.1.0
 * @category errors
 */
export type InvalidPolicy = invalid.InvalidPolicy

/**
 * The `retry` metadata slot: up to `maxAttempts` attempts, exponential backoff between them.
 *
 * @since 0.1.0
 * @category models
 */
export const RetryPolicy = values.RetryPolicy

/**
 * The `retry` metadata slot.
 *
 * @since 0.1.0
 * @category models
 */
export type RetryPolicy = values.RetryPolicy

/**
 * Where a timeout's clock starts: `PerAttempt` or `Total` (a schema).
 *
 * @since 0.1.0
 * @category models
 */
export const TimeoutScope = values.TimeoutScope

/**
 * Where a timeout's clock starts.
 *
 * @since 0.1.0
 * @category models
 */
export type TimeoutScope = values.TimeoutScope

/**
 * The `timeout` metadata slot. A `Total` timeout carries the absolute `deadline` stamped at publish.
 *
 * @since 0.1.0
 * @category models
 */
export const TimeoutPolicy = values.TimeoutPolicy

/**
 * The `timeout` metadata slot.
 *
 * @since 0.1.0
 * @category models
 */
export type TimeoutPolicy = values.TimeoutPolicy

/**
 * The `rateLimit` metadata slot: at most `limit` starts of `key` per `windowMs`.
 *
 * @since 0.1.0
 * @category models
 */
export const RateLimitPolicy = values.RateLimitPolicy

/**
 * The `rateLimit` metadata slot.
 *
 * @since 0.1.0
 * @category models
 */
export type RateLimitPolicy = values.RateLimitPolicy

/**
 * The `circuitBreaker` metadata slot: `threshold` consecutive failures of `group` open it for `cooldownMs`.
 *
 * @since 0.1.0
 * @category models
 */
export const CircuitBreakerPolicy = values.CircuitBreakerPolicy

/**
 * The `circuitBreaker` metadata slot.
 *
 * @since 0.1.0
 * @category models
 */
export type CircuitBreakerPolicy = values.CircuitBreakerPolicy

/**
 * Longest accepted concurrency / rate-limit / circuit-breaker key, in UTF-16 code units (512).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_KEY_LENGTH = values.MAX_KEY_LENGTH
