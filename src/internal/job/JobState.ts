/**
 * The lifecycle states of a job row.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/** Every state a job row can be in. */
export const JobState = Schema.Literals(["Scheduled", "Enqueued", "Processing", "Succeeded", "Failed", "Deleted"])

/** A job row's state. */
export type JobState = typeof JobState.Type

/** States a worker may claim (when due). */
export const pendingStates: ReadonlyArray<JobState> = ["Scheduled", "Enqueued"]

/** States after which a job never runs again. */
export const terminalStates: ReadonlyArray<JobState> = ["Succeeded", "Failed", "Deleted"]
