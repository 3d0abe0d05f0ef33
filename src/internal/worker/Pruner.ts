/**
 * The worker's retention fiber: every `interval` it prunes finished jobs expired under the worker's
 * plan (`JobStoreService.prune`), batch after batch until a batch comes back short or the run has taken
 * one interval, then counts the expired rows left. A run that stopped on its time with its last batch
 * full (expired rows left) is followed by the next run at once, not after an interval: under a load
 * that expires rows faster than one interval's work prunes, the pruner keeps pruning instead of
 * falling behind by half. Only one process prunes at a time (the store's
 * guard): a worker that finds another pruning skips its run. Each run is a span (`warp.retention.prune`)
 * and feeds the retention metrics (rows pruned by state, tombstones removed, run duration, backlog).
 *
 * @since 1.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type { RegistryService } from "../job/Registry.js"
import * as Retention from "../job/Retention.js"
import * as Telemetry from "../observability/Telemetry.js"
import type { JobStoreService } from "../store/JobStore.js"

/** Expired rows are counted up to this many after a run (the backlog gauge). */
export const BACKLOG_CAP = 100_000

/** The retention overrides of the contracts a registry knows (handlers' and recurring entries'), by job type. */
export const overridesOf = (registry: RegistryService): Array<readonly [string, Retention.RetentionOverride]> => {
  const out = new Map<string, Retention.RetentionOverride>()
  for (const h of registry.handlers) {
    if (h._tag !== "RequestHandler" && h.contract.retention !== undefined) out.set(h.contract.name, h.contract.retention)
  }
  for (const r of registry.recurring) if (r.contract.retention !== undefined) out.set(r.contract.name, r.contract.retention)
  return [...out]
}

/** What one run did. */
export interface PruneRun {
  /** False: another process held the retention guard; this run did nothing. */
  readonly ran: boolean
  readonly pruned: Readonly<Record<Retention.TerminalState, number>>
  readonly tombstones: number
  readonly batches: number
  readonly ms: number
  /** Expired rows left (up to {@link BACKLOG_CAP}); undefined when the run did not run. */
  readonly backlog: number | undefined
  /** The run stopped on its time budget with its last batch full: expired rows are left, prune again at once. */
  readonly more: boolean
}

/** One run: batches until one comes back short, the guard is taken elsewhere, or `budgetMs` has passed. */
export const runOnce = (store: JobStoreService, plan: Retention.RetentionPlan, budgetMs: number): Effect.Effect<PruneRun, unknown> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const pruned = { Succeeded: 0, Failed: 0, Deleted: 0 }
    let tombstones = 0
    let batches = 0
    let ran = true
    let more = false
    while (true) {
      const r = yield* store.prune(plan)
      if (!r.ran) {
        ran = batches > 0
        break
      }
      batches++
      for (const s of Retention.terminal) pruned[s] += r.pruned[s]
      tombstones += r.tombstones
      if (!r.full) break
      if ((yield* Clock.currentTimeMillis) - started >= budgetMs) {
        more = true
        break
      }
    }
    const backlog = ran ? yield* store.expiredBacklog(plan, BACKLOG_CAP) : undefined
    const ms = (yield* Clock.currentTimeMillis) - started
    for (const s of Retention.terminal) if (pruned[s] > 0) yield* Metric.update(Telemetry.prunedOf(s), pruned[s])
    if (tombstones > 0) yield* Metric.update(Telemetry.tombstonesPruned, tombstones)
    if (ran) {
      yield* Metric.update(Telemetry.pruneDuration, ms / 1000)
      yield* Metric.update(Telemetry.pruneBacklog, backlog ?? 0)
    }
    yield* Effect.annotateCurrentSpan({
      [Telemetry.attributes.pruneRan]: ran,
      [Telemetry.attributes.pruned]: pruned.Succeeded + pruned.Failed + pruned.Deleted,
      [Telemetry.attributes.prunedTombstones]: tombstones,
      [Telemetry.attributes.pruneBatches]: batches,
      ...(backlog === undefined ? {} : { [Telemetry.attributes.pruneBacklog]: backlog })
    })
    return { ran, pruned, tombstones, batches, ms, backlog, more }
  }).pipe(Effect.withSpan(Telemetry.spans.prune, {}, { captureStackTrace: false }))

/**
 * Runs forever: one run every `intervalMs`, and another at once after a run that stopped on its time
 * with expired rows left (`PruneRun.more`); a failed run is logged and retried at the next tick.
 */
export const loop = (store: JobStoreService, resolved: Retention.Resolved): Effect.Effect<never> => {
  const run: Effect.Effect<PruneRun | undefined> = runOnce(store, resolved.plan, resolved.intervalMs).pipe(
    Effect.tap((r) =>
      r.ran && r.pruned.Succeeded + r.pruned.Failed + r.pruned.Deleted + r.tombstones > 0
        ? Effect.logDebug(`retention: pruned ${JSON.stringify(r.pruned)}, ${r.tombstones} tombstones in ${r.ms} ms; backlog ${r.backlog}`)
        : Effect.void
    ),
    Effect.catch((e) => Effect.as(Effect.logWarning("retention: prune failed; retried at the next interval", e), undefined))
  )
  return Effect.sleep(Duration.millis(resolved.intervalMs)).pipe(
    Effect.andThen(Effect.repeat(run, { while: (r) => r?.more === true })),
    Effect.forever
  )
}
