/**
 * The typed result of one attempt. Every attempt ends in exactly one `Outcome`,
 * which the worker turns into the attempt's single finalizing write.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type { JobState } from "./JobState.js"

/**
 * - `Succeeded`: the handler completed.
 * - `Failed`: the handler failed or died (`error` is the rendered cause), or the job could not run.
 * - `Deleted`: the job was short-circuited (e.g. concurrency Skip mode); `reason` goes to the audit log.
 * - `Requeued`: the job goes back to the queue (`at` undefined = now), e.g. concurrency Wait mode or retry.
 *   `keepsPlace`: the run was lost to the runtime, not sent back by a policy (its slot was lost or
 *   lapsed, its claim lapsed, its worker stopped): the job keeps its place in line (its ScheduleTime
 *   stays), so that it runs again before the jobs queued behind it.
 *   `keepsTag`: the job was not served (its total cap's group was full): a weighted job keeps its
 *   fair-share tag, so that waiting for the group costs its key no share; its ScheduleTime is set as
 *   for any requeue.
 */
export type Outcome = Data.TaggedEnum<{
  Succeeded: {}
  Failed: { readonly error: string }
  Deleted: { readonly reason: string }
  Requeued: {
    readonly reason: string
    readonly at?: Date | undefined
    readonly keepsPlace?: boolean | undefined
    readonly keepsTag?: boolean | undefined
  }
}>

/** Constructors and matchers for {@link Outcome}. */
export const Outcome = Data.taggedEnum<Outcome>()

/** The audit-log entry kind written for an outcome. */
export type LogKind =
  | "Enqueued"
  | "Scheduled"
  | "Processing"
  | "Succeeded"
  | "Failed"
  | "Cancelled"
  | "Requeued"
  | "Recovered"
  /** An operator sent a Failed or Deleted job back to the queue (dashboard). */
  | "Retried"
  /** An operator deleted a pending or Failed job (dashboard). */
  | "Deleted"
  /** An enqueue with the job's key replaced its payload (and time) (since 1.1.0). */
  | "Replaced"
  /** An enqueue with the job's key joined it instead of creating a job (since 1.1.0). */
  | "Joined"

/** The state a job row takes after an outcome. */
export const stateOf = (outcome: Outcome, now: Date): JobState => {
  switch (outcome._tag) {
    case "Succeeded":
      return "Succeeded"
    case "Failed":
      return "Failed"
    case "Deleted":
      return "Deleted"
    case "Requeued":
      return outcome.at !== undefined && outcome.at.getTime() > now.getTime() ? "Scheduled" : "Enqueued"
  }
}

/** The audit-log kind and message for an outcome. */
export const logOf = (outcome: Outcome): { readonly kind: LogKind; readonly message: string } => {
  switch (outcome._tag) {
    case "Succeeded":
      return { kind: "Succeeded", message: "Succeeded" }
    case "Failed":
      return { kind: "Failed", message: outcome.error }
    case "Deleted":
      return { kind: "Cancelled", message: outcome.reason }
    case "Requeued":
      return { kind: "Requeued", message: outcome.reason }
  }
}

/** The `stats:*` counter an outcome increments. */
export const counterOf = (outcome: Outcome): string => {
  switch (outcome._tag) {
    case "Succeeded":
      return "stats:succeeded"
    case "Failed":
      return "stats:failed"
    case "Deleted":
      return "stats:deleted"
    case "Requeued":
      return "stats:requeued"
  }
}
