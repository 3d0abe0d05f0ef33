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

/** Span names. */
export const spans = {
  enqueue: "warp.enqueue",
  publish: "warp.publish",
  claim: "warp.claim",
  attempt: "warp.attempt",
  admission: "warp.admission",
  insertBatch: "warp.insert.batch",
  prune: "warp.retention.prune"
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
  worker: "warp.worker.id",
  pruned: "warp.retention.pruned",
  prunedTombstones: "warp.retention.tombstones",
  pruneBatches: "warp.retention.batches",
  pruneBacklog: "warp.retention.backlog",
  pruneRan: "warp.retention.ran"
} as const

/** The metric family of a key: its text up to the first ':' (bounded cardinality). */
export const keyFamily = (key: string): string => key.split(":")[0]!

const seconds = Metric.exponentialBoundaries({ start: 0.001, factor: 2, count: 16 })

/**
 * A metric's series by attribute values, each series built once and kept (up to 4,096 per metric, then
 * built afresh). The same series as `Metric.withAttributes(…)` over the base metric, whose update merges
 * the attributes into the context and computes the series key again each time: a series built with its
 * attributes computes its key once (with the two attempt metrics resolved once, the attempt's own CPU in
 * `bench/profile-keyless.ts PROFILE_STORE=stub` fell from ~0.47 to ~0.32 ms a job).
 */
export const series = <M>(make: (attributes: Readonly<Record<string, string>>) => M, names: ReadonlyArray<string>) => {
  const cache = new Map<string, M>()
  return (...values: ReadonlyArray<string>): M => {
    const id = values.join("\u0000")
    let metric = cache.get(id)
    if (metric === undefined) {
      if (cache.size >= 4096) cache.clear()
      const attributes: Record<string, string> = {}
      names.forEach((name, i) => {
        attributes[name] = values[i]!
      })
      metric = make(attributes)
      cache.set(id, metric)
    }
    return metric
  }
}

const attemptsOptions = { description: "Finished attempts by outcome, job type and key family" }

/** Finished attempts, tagged `outcome`, `type` and `key_family` (`none` without a key). */
export const attempts: Metric.Counter<number> = Metric.counter("warp_attempts_total", attemptsOptions)

/** {@link attempts}' series of one job type, key (its family) and outcome. */
export const attemptsOf: (type: string, key: string | undefined, outcome: string) => Metric.Counter<number> = ((of) => (type, key, outcome) =>
  of(type, key === undefined ? "none" : keyFamily(key), outcome))(
  series((attributes) => Metric.counter("warp_attempts_total", { ...attemptsOptions, attributes }), ["type", "key_family", "outcome"])
)

const attemptDurationOptions = { boundaries: seconds, description: "Attempt duration, claim to outcome" }

/** Attempt duration in seconds (claim to outcome), tagged `type` and `outcome`. */
export const attemptDuration: Metric.Histogram<number> = Metric.histogram("warp_attempt_duration_seconds", attemptDurationOptions)

/** {@link attemptDuration}'s series of one job type and outcome. */
export const attemptDurationOf: (type: string, outcome: string) => Metric.Histogram<number> = series(
  (attributes) => Metric.histogram("warp_attempt_duration_seconds", { ...attemptDurationOptions, attributes }),
  ["type", "outcome"]
)

const slotWaitOptions = { boundaries: seconds, description: "Time from a keyed job's due time to the admission of its slot" }

/** Seconds from a keyed job's due time to its admission (its wait for a slot included), tagged `key_family`. */
export const slotWait: Metric.Histogram<number> = Metric.histogram("warp_slot_wait_seconds", slotWaitOptions)

/** {@link slotWait}'s series of one key family. */
export const slotWaitOf: (family: string) => Metric.Histogram<number> = series(
  (attributes) => Metric.histogram("warp_slot_wait_seconds", { ...slotWaitOptions, attributes }),
  ["key_family"]
)

const prunedOptions = { description: "Finished jobs removed by retention, by the state they ended in" }

/** Finished jobs removed by retention, tagged `state` (`warp_retention_pruned_total`). */
export const prunedOf: (state: string) => Metric.Counter<number> = series(
  (attributes) => Metric.counter("warp_retention_pruned_total", { ...prunedOptions, attributes }),
  ["state"]
)

/** Tombstones of pruned jobs removed once their age passed (`warp_retention_tombstones_pruned_total`). */
export const tombstonesPruned: Metric.Counter<number> = Metric.counter("warp_retention_tombstones_pruned_total", {
  description: "Tombstones of pruned jobs removed"
})

/** Seconds one prune run took, all its batches (`warp_retention_prune_seconds`). */
export const pruneDuration: Metric.Histogram<number> = Metric.histogram("warp_retention_prune_seconds", {
  boundaries: seconds,
  description: "Duration of one retention run (all its batches)"
})

/** Finished rows expired and not removed yet after the last run, counted up to 100,000 (`warp_retention_backlog`). */
export const pruneBacklog: Metric.Gauge<number> = Metric.gauge("warp_retention_backlog", {
  description: "Expired finished rows not removed yet (counted up to 100,000)"
})
