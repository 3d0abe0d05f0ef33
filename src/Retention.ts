/**
 * Retention of finished jobs: how long (and how many) Succeeded, Failed and Deleted jobs are kept
 * before the worker's pruner removes them with their audit trail (`Worker.make({ retention })`, a
 * contract's `retention` for its own type), and what a read of a pruned job answers (`JobExpired`).
 *
 * @since 1.1.0
 */
import * as internal from "./internal/job/Retention.js"

/**
 * The worker's retention policy: per terminal state a maximum age and count, `deleteOnSuccess`, how long
 * tombstones are kept, the pruner's interval and batch size.
 *
 * @since 1.1.0
 * @category models
 */
export type RetentionOptions = internal.RetentionOptions

/**
 * A contract's override of the worker's retention, for its job type.
 *
 * @since 1.1.0
 * @category models
 */
export type RetentionOverride = internal.RetentionOverride

/**
 * How long (`maxAge`) and how many (`maxCount`, per job type) finished rows of one state are kept.
 *
 * @since 1.1.0
 * @category models
 */
export type StateRetention = internal.StateRetention

/**
 * A state a job ends in: Succeeded, Failed or Deleted.
 *
 * @since 1.1.0
 * @category models
 */
export type TerminalState = internal.TerminalState

/**
 * What one prune applies (resolved options and contract overrides); see {@link resolve}.
 *
 * @since 1.1.0
 * @category models
 */
export type RetentionPlan = internal.RetentionPlan

/**
 * What one prune batch did (`JobStoreService.prune`).
 *
 * @since 1.1.0
 * @category models
 */
export type PruneResult = internal.PruneResult

/**
 * `JobStore.get` of a job that retention removed: it says how the job ended, when, and when it was pruned.
 *
 * @since 1.1.0
 * @category errors
 */
export const JobExpired = internal.JobExpired

/**
 * @since 1.1.0
 * @category errors
 */
export type JobExpired = internal.JobExpired

/**
 * Resolves retention options and contract overrides (by job type) into a plan for
 * `JobStoreService.prune`, or the `InvalidArgument` of the first setting that cannot be honoured.
 *
 * @since 1.1.0
 * @category constructors
 */
export const resolve = internal.resolve
