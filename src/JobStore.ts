/**
 * The job store seam: where jobs, their trails and counters live. Provide `JobStorePg.layer` or
 * `JobStoreMemory.layer`.
 *
 * @since 0.1.0
 */
import * as internal from "./internal/store/JobStore.js"
import * as error from "./internal/store/StoreError.js"

/**
 * The single finalizing write of one attempt.
 *
 * @since 0.1.0
 * @category models
 */
export type Finalize = internal.Finalize

/**
 * What a worker tells `fetch` about keys it saw full (so the store can skip them).
 *
 * @since 0.2.0
 * @category models
 */
export type FetchHint = internal.FetchHint

/**
 * Which jobs `list` shows: id, concurrency-key prefix, type, state(s), creation window.
 *
 * @since 0.3.0
 * @category models
 */
export type JobFilter = internal.JobFilter

/**
 * An operator's write on jobs (`retry`, `delete`, `requeue`), as the dashboard's actions use it.
 *
 * @since 0.3.0
 * @category models
 */
export type OperatorAction = internal.OperatorAction

/**
 * What `operate` did: rows changed and ids skipped.
 *
 * @since 0.3.0
 * @category models
 */
export type OperateResult = internal.OperateResult

/**
 * A page of jobs.
 *
 * @since 0.1.0
 * @category models
 */
export type JobPage = internal.JobPage

/**
 * The store's operations.
 *
 * @since 0.1.0
 * @category models
 */
export type JobStoreService = internal.JobStoreService

/**
 * The job store service tag.
 *
 * @since 0.1.0
 * @category services
 */
export const JobStore = internal.JobStore

/**
 * The job store service tag.
 *
 * @since 0.1.0
 * @category services
 */
export type JobStore = internal.JobStore

/**
 * The job store could not be read or written (connection lost, constraint, ...).
 *
 * @since 0.1.0
 * @category errors
 */
export const StoreError = error.StoreError

/**
 * The job store could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export type StoreError = error.StoreError
