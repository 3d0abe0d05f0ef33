/**
 * What warp reports to Effect's tracer, logger and metrics: span names, attribute keys and the
 * metrics per job type and concurrency key. Spans are plain `Effect.withSpan` spans, so any tracer
 * (e.g. `@effect/opentelemetry`'s) receives them; metrics are Effect `Metric`s. Like @effect/sql's
 * statement spans, they capture no stack trace: it would point inside this library, and taking it
 * costs an `Error` per span (3,000 single enqueues from 8 fibers took 1.47–1.51 s with it, 1.21 s
 * without).
 *
 * Key cardinality: a concurrency key can be per customer (`payment:123`), so metrics carry its
 * family (the text up to the first `:`), while spans and log annotations carry the whole key.
 *
 * @since 0.2.0
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"

/** Span names. */
export const spans = {
  enqueue: "warp.enqueue",
  publish: "warp.publish",
  claim: "warp.claim",
  attempt: "warp.attempt",
  admission: "warp.admission"
} as const

/** Span attribute and log annotation keys. */
export const attributes = {
  jobId: "warp.job.id",
  jobType: "warp.job.type",
  attempt: "warp.job.attempt",
  key: "warp.concurrency.key",
  limit: "warp.concurrency.limit",
  slot: "warp.concurrency.slot",
  fence: "warp.concurrency.fence",
  admission: "warp.concurrency.admission",
  outcome: "warp.outcome",
  waitMs: "warp.wait_ms",
  claimed: "warp.claim.rows",
  worker: "warp.worker.id"
} as const

/** The metric family of a key: its text up to the first ':' (bounded cardinality). */
export const keyFamily = (key: string): string => key.split(":")[0]!

const seconds = MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 16 })

/** Finished attempts, tagged `outcome`, `type` and `key_family` (`none` without a key). */
export const attempts = Metric.counter("warp_attempts_total", { description: "Finished attempts by outcome, job type and key family" })

/** Attempt duration in seconds (claim to outcome), tagged `type` and `outcome`. */
export const attemptDuration = Metric.histogram("warp_attempt_duration_seconds", seconds, "Attempt duration, claim to outcome")

/** Seconds from a keyed job's due time to its admission (its wait for a slot included), tagged `key_family`. */
export const slotWait = Metric.histogram("warp_slot_wait_seconds", seconds, "Time from a keyed job's due time to the admission of its slot")

/** Tags a metric with a job's type and key family. */
export const tagged = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>, type: string, key: string | undefined): Metric.Metric<Type, In, Out> =>
  Metric.tagged(Metric.tagged(metric, "type", type), "key_family", key === undefined ? "none" : keyFamily(key))
