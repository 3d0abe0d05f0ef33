/**
 * Warp: background jobs on PostgreSQL for Effect applications, with distributed Mutex / Semaphore
 * concurrency control.
 *
 * @since 0.1.0
 */

/** Job and message contracts. */
export * as Contract from "./job/Contract.js"
/** Job, message, stream and request handlers. */
export * as Handler from "./job/Handler.js"
/** Saga handlers (policy-exempt). */
export * as Saga from "./job/Saga.js"
/** Recurring (cron) registrations. */
export * as Recurring from "./job/Recurring.js"
/** Explicit enqueue-time metadata. */
export { JobParameters, type MetadataAccessor } from "./job/JobParameters.js"
/** The publisher service. */
export * as Publisher from "./job/Publisher.js"
/** The registry of handlers. */
export * as Registry from "./job/Registry.js"
/** The worker. */
export * as Worker from "./job/Worker.js"
/** The recurring-job scheduler. */
export * as Scheduler from "./job/Scheduler.js"
/** The pipeline of behaviors around handlers. */
export * as Pipeline from "./job/Pipeline.js"
/** Typed attempt outcomes. */
export { Outcome, type LogKind } from "./job/Outcome.js"
/** The current attempt. */
export { type Attempt, CurrentAttempt } from "./job/Attempt.js"
/** Job rows. */
export { Job, type JobDetail, type JobLog, type NewJob } from "./job/Job.js"
/** Job states. */
export { JobState } from "./job/JobState.js"
/** Publishing errors. */
export { InvalidPayload } from "./job/errors.js"

/** Policy declarations: Retry, Timeout, RateLimit, CircuitBreaker. */
export { CircuitBreaker, RateLimit, Retry, Timeout } from "./policy/Policies.js"
/** The persisted policy values. */
export * from "./policy/PolicyValues.js"
/** Policy families and resolution. */
export * as PolicyFamily from "./policy/PolicyFamily.js"
export * as PolicyResolution from "./policy/PolicyResolution.js"
export * as JobMetadata from "./policy/JobMetadata.js"
export * as GlobalPolicies from "./policy/GlobalPolicies.js"
export { InvalidPolicy } from "./policy/InvalidPolicy.js"
/** Core behaviors and the failure observer they share with addons. */
export * as RetryBehavior from "./policy/RetryBehavior.js"
export * as TimeoutBehavior from "./policy/TimeoutBehavior.js"
export * as FailureObserver from "./policy/FailureObserver.js"
/** The rate-limit addon (RateLimitAddon.layer / layerMemory), its limiter and behavior. */
export * as RateLimitAddon from "./ratelimit/RateLimitAddon.js"
export * as RateLimiter from "./ratelimit/RateLimiter.js"
export * as RateLimitBehavior from "./ratelimit/RateLimitBehavior.js"
/** The circuit-breaker addon (CircuitBreakerAddon.layer / layerMemory), its state and behavior. */
export * as CircuitBreakerAddon from "./circuitbreaker/CircuitBreakerAddon.js"
export * as CircuitBreakerState from "./circuitbreaker/CircuitBreakerState.js"
export * as CircuitBreakerBehavior from "./circuitbreaker/CircuitBreakerBehavior.js"

/** Concurrency: Mutex, Semaphore and the typed metadata accessor. */
export { ConcurrencyMetadata, type ConcurrencyOptions, Mutex, Semaphore } from "./concurrency/Concurrency.js"
/** The concurrency addon's registration. */
export * as Concurrency from "./concurrency/ConcurrencyAddon.js"
/** The concurrency gate and behavior. */
export * as ConcurrencyBehavior from "./concurrency/ConcurrencyBehavior.js"
/** Admin overrides. */
export * as ConcurrencyLimitManager from "./concurrency/ConcurrencyLimitManager.js"
export * as ConcurrencyLimitResolver from "./concurrency/ConcurrencyLimitResolver.js"

/** The semaphore provider seam and its built-in Layers. */
export * as SemaphoreProvider from "./semaphore/SemaphoreProvider.js"
export * as SemaphoreProviderMemory from "./semaphore/SemaphoreProviderMemory.js"
export * as SemaphoreProviderPg from "./semaphore/SemaphoreProviderPg.js"
// The Redis provider is at the `warp-effect/redis` subpath, so ioredis loads only for those who use it.

/** Job stores. */
export * as JobStore from "./store/JobStore.js"
export * as JobStorePg from "./store/JobStorePg.js"
export * as JobStoreMemory from "./store/JobStoreMemory.js"
export * as Migrations from "./store/Migrations.js"
export { StoreError } from "./store/StoreError.js"
/** The PostgreSQL connection Layer with a clear error when unreachable. */
export * as Database from "./store/Database.js"
/** The web dashboard: an HttpRouter to mount, or a Layer that serves it. */
export * as Dashboard from "./dashboard/Dashboard.js"
