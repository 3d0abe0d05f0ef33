/**
 * The first of an attempt's scoped layers: the claimed row and who runs it.
 *
 * @since 0.3.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import type { Job } from "../job/Job.js"

/** The claimed row of one attempt, the worker running it, and the instant the attempt began. */
export interface JobContextValue {
  readonly job: Job
  readonly workerId: string
  /** When the attempt began: `stampedAt` of a stamp this attempt writes. */
  readonly startedAt: Date
}

/** The running attempt's row (the attempt number counts handler runs; a requeue gives its number back). */
export class JobContext extends Context.Service<JobContext, JobContextValue>()("warp/JobContext") {}

/** The attempt's context as a layer. */
export const layer = (value: JobContextValue): Layer.Layer<JobContext> => Layer.succeed(JobContext, value)
