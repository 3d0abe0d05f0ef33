/**
 * Warp: background jobs on PostgreSQL for Effect applications, with distributed Mutex / Semaphore
 * concurrency control.
 *
 * One namespace per module (`Warp`, `Contract`, `Handler`, `Job`, `JobParameters`, `Publisher`,
 * `Worker`, `Policy`, `Concurrency`, ...), and flat only the policy declarations written in
 * `policy: [...]` lists: `Mutex`, `Semaphore`, `Retry`, `Timeout`, `RateLimit`, `CircuitBreaker`.
 *
 * Subpath entries: `warp-effect/testing` (generated workloads, a deterministic runtime, embedded
 * PostgreSQL), `warp-effect/testing/vitest` (the provider contract suite), `warp-effect/provider`
 * (what a custom semaphore provider needs), `warp-effect/redis` (Redis semaphore provider, needs
 * `ioredis`), `warp-effect/dashboard` (web dashboard).
 *
 * @since 0.1.0
 * @module warp-effect
 */

// ---- entry Layer ---------------------------------------------------------------------------------
/**
 * The entry Layer: `Warp.layer(options)` over a `SqlClient`, `Warp.layerMemory(options)` in memory.
 *
 * @since 0.2.0
 * @category layers
 */
export * as Warp from "./Warp.js"

// ---- defining and running jobs -------------------------------------------------------------------
/**
 * Job, message and request contracts.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Contract from "./Contract.js"
/**
 * Job, message, stream and request handlers.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Handler from "./Handler.js"
/**
 * Saga handlers (policy-exempt, serialized per correlation).
 *
 * @since 0.1.0
 * @category modules
 */
export * as Saga from "./Saga.js"
/**
 * Recurring (cron) registrations.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Recurring from "./Recurring.js"
/**
 * The publisher service.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Publisher from "./Publisher.js"
/**
 * The registry of handlers.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Registry from "./Registry.js"
/**
 * The worker.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Worker from "./Worker.js"
/**
 * The recurring-job scheduler.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Scheduler from "./Scheduler.js"
/**
 * Pipeline behaviors and the shape of a worker addon.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Pipeline from "./Pipeline.js"
/**
 * Jobs as stored and observed: `Job.Job` (a row), `Job.JobState`, `Job.Outcome`, `Job.CurrentAttempt`,
 * `Job.InvalidPayload`, ...
 *
 * @since 1.0.0
 * @category modules
 */
export * as Job from "./Job.js"
/**
 * Explicit enqueue-time metadata: `JobParameters.make().withSemaphore("api", 4)`.
 *
 * @since 1.0.0
 * @category modules
 */
export * as JobParameters from "./JobParameters.js"

// ---- policies ------------------------------------------------------------------------------------
export { CircuitBreaker, Mutex, RateLimit, Retry, Semaphore, Timeout } from "./Declarations.js"
/**
 * Policies: `Policy.Declaration`, `Policy.InvalidPolicy`, `Policy.RetryOptions` and the persisted policy
 * values (`Policy.RetryPolicy`, `Policy.TimeoutPolicy`, ...).
 *
 * @since 1.0.0
 * @category modules
 */
export * as Policy from "./Policy.js"
/**
 * Global policy defaults (a `Context.Reference`).
 *
 * @since 0.1.0
 * @category modules
 */
export * as GlobalPolicies from "./GlobalPolicies.js"
/**
 * A job's stamped metadata document.
 *
 * @since 0.1.0
 * @category modules
 */
export * as JobMetadata from "./JobMetadata.js"
/**
 * The rate-limit addon and its Layers.
 *
 * @since 0.1.0
 * @category modules
 */
export * as RateLimitAddon from "./RateLimitAddon.js"
/**
 * The circuit-breaker addon and its Layers.
 *
 * @since 0.1.0
 * @category modules
 */
export * as CircuitBreakerAddon from "./CircuitBreakerAddon.js"

// ---- concurrency ---------------------------------------------------------------------------------
/**
 * The concurrency addon (`Concurrency.addon`) and its admin-limit Layers, the persisted policy, the
 * audit texts of a full key and the gate's metric.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Concurrency from "./Concurrency.js"
/**
 * Admin overrides of concurrency limits.
 *
 * @since 0.1.0
 * @category modules
 */
export * as ConcurrencyLimitManager from "./ConcurrencyLimitManager.js"
/**
 * The slot-leak audit: leaked advisory slot locks and stuck holders, as gauges, logs and a report.
 *
 * @since 0.3.0
 * @category modules
 */
export * as SlotAudit from "./SlotAudit.js"
/**
 * The semaphore provider seam.
 *
 * @since 0.1.0
 * @category modules
 */
export * as SemaphoreProvider from "./SemaphoreProvider.js"
/**
 * The in-memory semaphore provider.
 *
 * @since 0.1.0
 * @category modules
 */
export * as SemaphoreProviderMemory from "./SemaphoreProviderMemory.js"
/**
 * The PostgreSQL (advisory lock) semaphore provider.
 *
 * @since 0.1.0
 * @category modules
 */
export * as SemaphoreProviderPg from "./SemaphoreProviderPg.js"

// ---- storage -------------------------------------------------------------------------------------
/**
 * The job store seam.
 *
 * @since 0.1.0
 * @category modules
 */
export * as JobStore from "./JobStore.js"
/**
 * The PostgreSQL job store.
 *
 * @since 0.1.0
 * @category modules
 */
export * as JobStorePg from "./JobStorePg.js"
/**
 * The in-memory job store.
 *
 * @since 0.1.0
 * @category modules
 */
export * as JobStoreMemory from "./JobStoreMemory.js"
/**
 * Retention of finished jobs (how long they are kept; `JobExpired`).
 *
 * @since 1.1.0
 * @category modules
 */
export * as Retention from "./Retention.js"
/**
 * The SQL migrations.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Migrations from "./Migrations.js"
/**
 * The PostgreSQL connection Layer.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Database from "./Database.js"
