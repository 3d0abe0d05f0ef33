/**
 * Warp: background jobs on PostgreSQL for Effect applications, with distributed Mutex / Semaphore
 * concurrency control.
 *
 * @since 0.1.0
 */

/** The entry Layer: `Warp.layer(options)` over a `SqlClient`. */
export * as Warp from "./Warp.js"
/** Job and message contracts. */
export * as Contract from "./internal/job/Contract.js"
/** Job, message, stream and request handlers. */
export * as Handler from "./internal/job/Handler.js"
/** Saga handlers (policy-exempt). */
export * as Saga from "./internal/job/Saga.js"
/** Recurring (cron) registrations. */
export * as Recurring from "./internal/job/Recurring.js"
/** Explicit enqueue-time metadata. */
export { JobParameters, type MetadataAccessor } from "./internal/job/JobParameters.js"
/** The publisher service. */
export * as Publisher from "./internal/job/Publisher.js"
/** The registry of handlers. */
export * as Registry from "./internal/job/Registry.js"
/** The worker. */
export * as Worker from "./internal/job/Worker.js"
/** The recurring-job scheduler. */
export * as Scheduler from "./internal/job/Scheduler.js"
/** The pipeline of behaviors around handlers. */
export * as Pipeline from "./internal/job/Pipeline.js"
/** Typed attempt outcomes. */
export { Outcome, type LogKind } from "./internal/job/Outcome.js"
/** The current attempt. */
export { type Attempt, CurrentAttempt } from "./internal/job/Attempt.js"
/** Job rows. */
export { Job, type JobDetail, type JobLog, type NewJob } from "./internal/job/Job.js"
/** Job states. */
export { JobState } from "./internal/job/JobState.js"
/** Publishing errors. */
export { InvalidPayload } from "./internal/job/errors.js"
/**
 * A refused argument of a public call (a contract name that cannot be stored, an invalid schedule date).
 *
 * @since 0.1.0
 * @category errors
 */
export { InvalidArgument } from "./internal/error/InvalidArgument.js"
/**
 * The payload's round trip through the job row: encode, check it survives JSON, decode back.
 *
 * @since 0.1.0
 * @category encoding
 */
export * as PayloadCodec from "./internal/job/PayloadCodec.js"

/** Policy declarations: Retry, Timeout, RateLimit, CircuitBreaker. */
export { CircuitBreaker, RateLimit, Retry, Timeout } from "./internal/policy/Policies.js"
/** The persisted policy values. */
export * from "./internal/policy/PolicyValues.js"
/** Policy families and resolution. */
export * as PolicyFamily from "./internal/policy/PolicyFamily.js"
export * as PolicyResolution from "./internal/policy/PolicyResolution.js"
export * as JobMetadata from "./internal/policy/JobMetadata.js"
export * as GlobalPolicies from "./internal/policy/GlobalPolicies.js"
export { InvalidPolicy } from "./internal/policy/InvalidPolicy.js"
/** Core behaviors and the failure observer they share with addons. */
export * as RetryBehavior from "./internal/policy/RetryBehavior.js"
export * as TimeoutBehavior from "./internal/policy/TimeoutBehavior.js"
export * as FailureObserver from "./internal/policy/FailureObserver.js"
/** The rate-limit addon (RateLimitAddon.layer / layerMemory), its limiter and behavior. */
export * as RateLimitAddon from "./internal/ratelimit/RateLimitAddon.js"
export * as RateLimiter from "./internal/ratelimit/RateLimiter.js"
export * as RateLimitBehavior from "./internal/ratelimit/RateLimitBehavior.js"
/** The circuit-breaker addon (CircuitBreakerAddon.layer / layerMemory), its state and behavior. */
export * as CircuitBreakerAddon from "./internal/circuitbreaker/CircuitBreakerAddon.js"
export * as CircuitBreakerState from "./internal/circuitbreaker/CircuitBreakerState.js"
export * as CircuitBreakerBehavior from "./internal/circuitbreaker/CircuitBreakerBehavior.js"

/** Concurrency: Mutex, Semaphore and the typed metadata accessor. */
export { ConcurrencyMetadata, type ConcurrencyOptions, Mutex, Semaphore } from "./internal/concurrency/Concurrency.js"
/** The concurrency addon's registration. */
export * as Concurrency from "./internal/concurrency/ConcurrencyAddon.js"
/** The concurrency gate and behavior. */
export * as ConcurrencyBehavior from "./internal/concurrency/ConcurrencyBehavior.js"
/** Admin overrides. */
export * as ConcurrencyLimitManager from "./internal/concurrency/ConcurrencyLimitManager.js"
export * as ConcurrencyLimitResolver from "./internal/concurrency/ConcurrencyLimitResolver.js"

/** The semaphore provider seam and its built-in Layers. */
export * as SemaphoreProvider from "./internal/semaphore/SemaphoreProvider.js"
export * as SemaphoreProviderMemory from "./internal/semaphore/SemaphoreProviderMemory.js"
export * as SemaphoreProviderPg from "./internal/semaphore/SemaphoreProviderPg.js"
// The Redis provider is at `warp-effect/redis` and the dashboard at `warp-effect/dashboard`, so their
// optional peers load only for those who use them.

/** Job stores. */
export * as JobStore from "./internal/store/JobStore.js"
export * as JobStorePg from "./internal/store/JobStorePg.js"
export * as JobStoreMemory from "./internal/store/JobStoreMemory.js"
export * as Migrations from "./internal/store/Migrations.js"
export { StoreError } from "./internal/store/StoreError.js"
/** The PostgreSQL connection Layer with a clear error when unreachable. */
export * as Database from "./internal/store/Database.js"
