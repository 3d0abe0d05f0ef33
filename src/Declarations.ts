/**
 * The policy declarations, the words of a `policy: [...]` list (on a contract, a handler, or as global
 * defaults): `Mutex`, `Semaphore`, `Retry`, `Timeout`, `RateLimit`, `CircuitBreaker`. `warp-effect`
 * exports them flat; their options, values and errors are in `Policy` and `Concurrency`.
 *
 * @since 1.0.0
 */
import * as concurrency from "./internal/concurrency/Concurrency.js"
import * as policies from "./internal/policy/Policies.js"

/**
 * At most one job of `key` processing at once, across every worker and process (mode: Skip unless given;
 * options: `Concurrency.ConcurrencyOptions`). Enforced by `Concurrency.addon`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const Mutex = concurrency.Mutex

/**
 * At most `limit` jobs of `key` processing at once, across every worker and process (mode: Wait unless given;
 * options: `Concurrency.ConcurrencyOptions`). Enforced by `Concurrency.addon`.
 * `limit` may be a function of the payload (since 0.3.0): computed once by the attempt that stamps the
 * policy, stamped as a number; an invalid result fails the job (see `Concurrency.LimitFrom`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const Semaphore = concurrency.Semaphore

/**
 * Up to `maxAttempts` attempts in total (attempts count handler runs); a failed attempt is
 * rescheduled with exponential backoff (options: `Policy.RetryOptions`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const Retry = policies.Retry

/**
 * A timeout: `PerAttempt` (default) bounds one handler run; `Total` bounds the job from its enqueue
 * (contract or enqueue only).
 *
 * @since 0.1.0
 * @category constructors
 */
export const Timeout = policies.Timeout

/**
 * At most `limit` starts of jobs sharing `key` per `window`, across all workers; surplus is requeued
 * to the next window (needs `RateLimitAddon.addon`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const RateLimit = policies.RateLimit

/**
 * After `threshold` consecutive failures in `group`, jobs of the group are requeued until `cooldown`
 * has passed (needs `CircuitBreakerAddon.addon`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const CircuitBreaker = policies.CircuitBreaker
