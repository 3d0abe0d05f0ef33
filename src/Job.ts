/**
 * Jobs as stored and observed: rows, states, outcomes, the current attempt, and the errors of a refused
 * payload or argument. Enqueue-time parameters are in `JobParameters`.
 *
 * @since 0.2.0
 */
import * as attempt from "./internal/attempt/Attempt.js"
import * as invalidArgument from "./internal/error/InvalidArgument.js"
import * as errors from "./internal/job/errors.js"
import * as job from "./internal/job/Job.js"
import * as state from "./internal/job/JobState.js"
import * as outcome from "./internal/job/Outcome.js"

/**
 * A job row.
 *
 * @since 0.1.0
 * @category models
 */
export const Job = job.Job

/**
 * A job row.
 *
 * @since 0.1.0
 * @category models
 */
export type Job = job.Job

/**
 * A job to insert.
 *
 * @since 0.1.0
 * @category models
 */
export type NewJob = job.NewJob

/**
 * One entry of a job's trail.
 *
 * @since 0.1.0
 * @category models
 */
export type JobLog = job.JobLog

/**
 * A job with its trail.
 *
 * @since 0.1.0
 * @category models
 */
export type JobDetail = job.JobDetail

/**
 * Job states: `Scheduled`, `Enqueued`, `Processing`, `Succeeded`, `Failed`, `Deleted` (a schema).
 *
 * @since 0.1.0
 * @category models
 */
export const JobState = state.JobState

/**
 * Job states.
 *
 * @since 0.1.0
 * @category models
 */
export type JobState = state.JobState

/**
 * The typed outcome of an attempt: `Succeeded`, `Failed`, `Requeued`, `Cancelled`, ...
 *
 * @since 0.1.0
 * @category models
 */
export const Outcome = outcome.Outcome

/**
 * The typed outcome of an attempt.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = outcome.Outcome

/**
 * The kinds of trail entries.
 *
 * @since 0.1.0
 * @category models
 */
export type LogKind = outcome.LogKind

/**
 * The current attempt, as its handler sees it.
 *
 * @since 0.1.0
 * @category models
 */
export type Attempt = attempt.Attempt

/**
 * The current attempt's tag (provided to handlers by the worker).
 *
 * @since 0.1.0
 * @category services
 */
export const CurrentAttempt = attempt.CurrentAttempt

/**
 * The current attempt's tag.
 *
 * @since 0.1.0
 * @category services
 */
export type CurrentAttempt = attempt.CurrentAttempt

/**
 * A payload that does not match its contract's schema.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidPayload = errors.InvalidPayload

/**
 * A payload that does not match its contract's schema.
 *
 * @since 0.1.0
 * @category errors
 */
export type InvalidPayload = errors.InvalidPayload

/**
 * A refused argument of a public call: a contract name that cannot be stored, an invalid schedule date.
 * Its `message` names the call, the value and the rule.
 *
 * @since 0.2.0
 * @category errors
 */
export const InvalidArgument = invalidArgument.InvalidArgument

/**
 * A refused argument of a public call: a contract name that cannot be stored, an invalid schedule date.
 *
 * @since 0.2.0
 * @category errors
 */
export type InvalidArgument = invalidArgument.InvalidArgument
