/**
 * The worker: claims due jobs and runs their handlers through the pipeline (retry, timeout and the
 * addons you hand it: `Worker.layer({ addons: [Concurrency.addon] })`).
 *
 * @since 0.1.0
 */
import type { Addon } from "./internal/attempt/Pipeline.js"
import * as Enforcement from "./internal/policy/Enforcement.js"
import * as internal from "./internal/worker/Worker.js"

/**
 * Worker options: fibers (`concurrency`), queues, poll interval, `addons` and more.
 *
 * @since 0.1.0
 * @category models
 */
export type WorkerOptions<A extends ReadonlyArray<Addon<any>> = ReadonlyArray<Addon<never>>> = internal.WorkerOptions<A>

/**
 * A registered handler or contract (or a global default) declares a policy family that no behavior of
 * this worker enforces — a `Mutex` or `Semaphore` without `Concurrency.addon`, a `RateLimit` without
 * `RateLimitAddon.addon`, a `CircuitBreaker` without `CircuitBreakerAddon.addon`. The worker's Layer fails
 * to build with it instead of running those jobs with the policy ignored; `message` names the family,
 * where it is declared and the fix. (A job enqueued with such a policy ends Failed with
 * `Policy not enforced — …` in its trail.)
 *
 * @since 1.0.0
 * @category errors
 */
export const UnenforcedPolicy = Enforcement.UnenforcedPolicy

/**
 * @since 1.0.0
 * @category errors
 */
export type UnenforcedPolicy = Enforcement.UnenforcedPolicy

/**
 * A handle on a running worker.
 *
 * @since 0.1.0
 * @category models
 */
export type WorkerHandle = internal.WorkerHandle

/**
 * Starts a worker in the current scope. Its requirements name the addons' services.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = internal.make

/**
 * A worker as a Layer: starts when the layer is built, shuts down gracefully when it is released.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = internal.layer

/**
 * Attempts by outcome, job type and key family, as an Effect metric (`warp_attempts_total`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const attemptsTotal = internal.attemptsTotal
