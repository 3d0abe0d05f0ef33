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
import * as MetricKey from "effect/MetricKey"
import type * as MetricKeyType from "effect/MetricKeyType"
import * as MetricLabel from "effect/MetricLabel"

/** Span names. */
export const spans = {
  enqueue: "warp.enqueue",
  publish: "warp.publish",
  claim: "warp.claim",
  attempt: "warp.attempt",
  admission: "warp.admission",
  insertBatch: "warp.insert.batch"
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
  batchRows: "warp.insert.rows",
  worker: "warp.worker.id"
} as const

/** The metric family of a key: its text up to the first ':' (bounded cardinality). */
export const keyFamily = (key: string): string => key.split(":")[0]!

const seconds = MetricBoundaries.exponential({ start: 0.001, factor: 2, count: 16 })

/**
 * A metric's series by tag values, each series resolved once and kept (up to 4,096 per metric, then
 * resolved afresh). The same series as `Metric.tagged(…)` in that order, whose update resolves the
 * series again each time (a new `MetricKey`, hashed with its labels and boundaries, then looked up in
 * the registry): with the two attempt metrics resolved once, the attempt's own CPU in
 * `bench/profile-keyless.ts PROFILE_STORE=stub` fell from ~0.47 to ~0.32 ms a job.
 */
export const series = <Type extends MetricKeyType.MetricKeyType<any, any>>(key: MetricKey.MetricKey<Type>, names: ReadonlyArray<string>) => {
  const cache = new Map<string, Metric.Metric<Type, MetricKeyType.MetricKeyType.InType<Type>, MetricKeyType.MetricKeyType.OutType<Type>>>()
  return (...values: ReadonlyArray<string>) => {
    const id = values.join("\u0000")
    let metric = cache.get(id)
    if (metric === undefined) {
      if (cache.size >= 4096) cache.clear()
      metric = Metric.fromMetricKey(MetricKey.taggedWithLabels(key, names.map((name, i) => MetricLabel.make(name, values[i]!))))
      cache.set(id, metric)
    }
    return metric
  }
}

const attemptsKey = MetricKey.counter("warp_attempts_total", { description: "Finished attempts by outcome, job type and key family" })

/** Finished attempts, tagged `outcome`, `type` and `key_family` (`none` without a key). */
export const attempts = Metric.fromMetricKey(attemptsKey)

/** {@link attempts}' series of one job type, key (its family) and outcome. */
export const attemptsOf: (type: string, key: string | undefined, outcome: string) => Metric.Metric.Counter<number> = ((of) => (type, key, outcome) =>
  of(type, key === undefined ? "none" : keyFamily(key), outcome))(series(attemptsKey, ["type", "key_family", "outcome"]))

const attemptDurationKey = MetricKey.histogram("warp_attempt_duration_seconds", seconds, "Attempt duration, claim to outcome")

/** Attempt duration in seconds (claim to outcome), tagged `type` and `outcome`. */
export const attemptDuration = Metric.fromMetricKey(attemptDurationKey)

/** {@link attemptDuration}'s series of one job type and outcome. */
export const attemptDurationOf: (type: string, outcome: string) => Metric.Metric.Histogram<number> = series(attemptDurationKey, ["type", "outcome"])

const slotWaitKey = MetricKey.histogram("warp_slot_wait_seconds", seconds, "Time from a keyed job's due time to the admission of its slot")

/** Seconds from a keyed job's due time to its admission (its wait for a slot included), tagged `key_family`. */
export const slotWait = Metric.fromMetricKey(slotWaitKey)

/** {@link slotWait}'s series of one key family. */
export const slotWaitOf: (family: string) => Metric.Metric.Histogram<number> = series(slotWaitKey, ["key_family"])
