/**
 * The first of an attempt's scoped layers: the claimed row and who runs it — if the attempt may start
 * at all (its claim still holds, and nobody cancelled the job meanwhile).
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Job } from "../job/Job.js"
import type { Outcome } from "../job/Outcome.js"

/** The claimed row of one attempt, the worker running it, and the instant the attempt began. */
export interface JobContextValue {
  readonly job: Job
  readonly workerId: string
  /** When the attempt began: `stampedAt` of a stamp this attempt writes. */
  readonly startedAt: Date
}

/** The running attempt's row (the attempt number counts handler runs; a requeue gives its number back). */
export class JobContext extends Context.Service<JobContext, JobContextValue>()("warp/JobContext") {}

/**
 * The claimed job must not start (its claim lapsed before its handler could start, or a cancel was asked
 * for it): its finalizing write records `outcome` instead, and its handler never runs.
 */
export class NotStarted extends Data.TaggedError("NotStarted")<{ readonly outcome: Outcome }> {}

/** The attempt's context as a layer; failing with {@link NotStarted} when the job must not start (`notStarted`). */
export const layer = (value: JobContextValue, notStarted?: Outcome): Layer.Layer<JobContext, NotStarted> =>
  notStarted === undefined ? Layer.succeed(JobContext, value) : Layer.effect(JobContext, Effect.fail(new NotStarted({ outcome: notStarted })))
