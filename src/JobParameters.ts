/**
 * Explicit enqueue-time metadata, the third argument of `publisher.enqueue`:
 * `JobParameters.make().withSemaphore("api", 4).withRetry(3)`. Only what it sets is stored at publish;
 * everything else is resolved by the job's first attempt (handler, contract, global default).
 *
 * @since 1.0.0
 */
import type * as Policy from "./internal/policy/PolicyFamily.js"
import * as internal from "./internal/publisher/JobParameters.js"

/**
 * Parameters with nothing set; chain `withMutex`, `withSemaphore`, `withRetry`, `withTimeout`,
 * `withRateLimit` or `configure(accessor, f)` on it (each returns new parameters; the first invalid
 * input is kept and `publisher.enqueue` fails with it). Since 1.1.0 also one job key:
 * `withJobKey(key, { mode, includeProcessing })`, `withThrottle(key, window)` or `withDebounce(key, delay)`
 * (the last of the three wins; see docs/job-keys.md).
 *
 * @since 1.0.0
 * @category constructors
 */
export const make = (): JobParameters => internal.JobParameters.make()

/**
 * Explicit enqueue-time metadata: one declaration per policy family, or the first invalid input.
 *
 * @since 0.1.0
 * @category models
 */
export type JobParameters = internal.JobParameters

/**
 * The 4th argument of `withMutex` / `withSemaphore`, in place of a bare total cap:
 * `{ total?, weight? }` (`weight`: opt-in weighted fair share across keys, a finite number > 0).
 *
 * @since 0.3.0
 * @category models
 */
export type ConcurrencyParameterOptions = internal.ConcurrencyParameterOptions

/**
 * A typed accessor of one policy family's metadata, the first argument of `configure` (e.g.
 * `Concurrency.ConcurrencyMetadata`).
 *
 * @since 0.1.0
 * @category models
 */
export type MetadataAccessor<K extends Policy.FamilyName, D> = internal.MetadataAccessor<K, D>

/**
 * What an enqueue with a job key does to the live job holding the key: `keep` (joins it), `replace`
 * (its payload and time, the default) or `replacePayload` (its payload only).
 *
 * @since 1.1.0
 * @category models
 */
export type JobKeyMode = internal.JobKeyMode

/**
 * The options of `withJobKey`: `{ mode?, includeProcessing? }` (`includeProcessing`: a Processing job
 * holds its key too; mode `keep` only).
 *
 * @since 1.1.0
 * @category models
 */
export type JobKeyOptions = internal.JobKeyOptions
