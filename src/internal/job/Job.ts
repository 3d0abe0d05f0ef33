/**
 * The persisted job row and its audit log.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type { LogKind } from "./Outcome.js"
import { JobState } from "./JobState.js"

/** A job row as the store returns it. `metadata` is raw JSON: it is decoded (strictly) per attempt. */
export class Job extends Schema.Class<Job>("Job")({
  id: Schema.String,
  type: Schema.String,
  /** The handler name of a routed message child; null for a job. */
  handler: Schema.NullOr(Schema.String),
  payload: Schema.Unknown,
  state: JobState,
  scheduleTime: Schema.Date,
  metadata: Schema.Unknown,
  /** Number of attempts started so far (the current one included once Processing). */
  attempt: Schema.Number,
  createdAt: Schema.Date,
  updatedAt: Schema.Date,
  /** The worker holding the current attempt, while Processing. */
  lockedBy: Schema.NullOr(Schema.String),
  /** Until when that worker's claim is valid; an expired claim is recovered by the next fetch. */
  leaseUntil: Schema.NullOr(Schema.Date),
  /**
   * Set on a claimed row by a store that reads the admin override of the row's concurrency key in the
   * claiming statement (the built-in PostgreSQL store, for a key the row carries): the key, and the
   * override's slots then (null: none). The concurrency gate uses it instead of asking again.
   */
  adminLimit: Schema.optional(Schema.Struct({ key: Schema.String, slots: Schema.NullOr(Schema.Number) })),
  /** The reason of an operator's cancel asked for this row while it runs (see `JobStoreService.requestCancel`). */
  cancelRequested: Schema.optional(Schema.String),
  /**
   * The fair-share tag of a row whose concurrency policy carries a weight (see `JobStoreService.fetch`):
   * weighted rows are claimed in tag order. Absent on other rows.
   */
  fairTag: Schema.optional(Schema.Number),
  /**
   * The job's priority, resolved at publish (enqueue > handler > contract > 0): among due rows the
   * claim takes higher priorities first (see `JobStoreService.fetch`).
   *
   * @since 1.1.0
   */
  priority: Schema.Number,
  /**
   * The job key it was enqueued with (`JobParameters.withJobKey` / `withThrottle` / `withDebounce`), if any.
   *
   * @since 1.1.0
   */
  jobKey: Schema.optional(Schema.String)
}) {}

/**
 * The job key of a row to insert (see `JobParameters.withJobKey`): the key (scoped to the job type),
 * what an insert that finds a live holder of the key does (`mode`), and how long the new row holds it:
 * - `Pending`: while Scheduled or Enqueued;
 * - `Processing`: while Scheduled, Enqueued or Processing;
 * - `Throttle`: for `windowMs` from its creation, whatever its state.
 */
export interface NewJobKey {
  readonly key: string
  readonly mode: "keep" | "replace" | "replacePayload"
  readonly hold: "Pending" | "Processing" | "Throttle"
  /** The throttle window (hold `Throttle` only). */
  readonly windowMs?: number | undefined
}

/** A row to insert at publish. */
export interface NewJob {
  readonly id: string
  readonly type: string
  readonly handler: string | null
  readonly payload: unknown
  readonly state: "Enqueued" | "Scheduled"
  readonly scheduleTime: Date
  readonly metadata: unknown
  /**
   * The job's priority (an integer in [-32768, 32767], higher runs first); default 0.
   *
   * @since 1.1.0
   */
  readonly priority?: number | undefined
  /** Its job key, if any (see {@link NewJobKey}). */
  readonly jobKey?: NewJobKey | undefined
}

/** One audit-log entry. */
export interface JobLog {
  readonly jobId: string
  readonly at: Date
  readonly kind: LogKind
  readonly message: string
}

/** A job with its audit trail, for detail views. */
export interface JobDetail {
  readonly job: Job
  readonly logs: ReadonlyArray<JobLog>
}
