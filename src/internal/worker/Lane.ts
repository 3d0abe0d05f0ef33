/**
 * A worker lane: a fiber that claims due jobs and runs their attempts one after another. It claims
 * 1 row at first and doubles (up to `maxBatch`) while full batches of quick jobs run uncontended, and
 * it skips, for a while that doubles, the Wait-mode keys it just found full (the fetch hint), so it
 * does not spin on a key while the holders run. The last attempt of a batch offers the lane's next
 * claim to its finalizing write: one that frees a slot on the slot's connection claims the next row in
 * the same statement, and takes its slot there too (the built-in PostgreSQL store and provider do), so a
 * keyed job costs neither a claim nor a slot scan of its own.
 *
 * @since 0.3.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Job } from "../job/Job.js"
import { Outcome } from "../job/Outcome.js"
import * as Telemetry from "../observability/Telemetry.js"
import type { FetchHint, JobStoreService } from "../store/JobStore.js"
import { type Finalizer, type NextClaim, rowConcurrency } from "./Finalize.js"
import type { Pickup } from "./Pickup.js"
import type { AttemptRunner, FiberState } from "./RunAttempt.js"
import type { WorkerState } from "./WorkerState.js"

/** At most this many contended keys are sent with one fetch (the most recent ones). */
const MAX_CONTENDED_KEYS = 64

/**
 * A batch counts as quick when its handlers ran less than this each, on average. Their own run time,
 * not the lane's wall time per job: that also counts the finalizing round trips and the wait for a busy
 * event loop, so a worker saturated by many quick jobs (which batching helps most: it saves a claim
 * per job) would keep claiming one row at a time.
 */
const BATCH_QUICK_MS = 25

/**
 * Rows a finalizing write claims for its lane (see `Finalize.NextClaim`): one. The statement that frees
 * the attempt's slot and claims the next row also takes that row's slot when it can (the PostgreSQL
 * provider's `FusedRelease.carry`), one slot per statement, so a chain of keyed jobs costs one statement
 * each; the lane batches its own claims as before.
 */
const CARRIED_CLAIM = 1

/**
 * Claims up to `n` rows. Their local lease deadline counts from when the claiming statement was sent,
 * not from when its reply arrived: a reply that comes back late (a stalled connection, a paused
 * process) leaves a claim that may already have run out on the server and been taken by another
 * worker, and the attempt's lapse check keeps its handler from starting. Retried until the store answers.
 */
export const claim =
  (store: JobStoreService, state: WorkerState) =>
  (n: number, hint: FetchHint): Effect.Effect<ReadonlyArray<Job>> => {
    const { config } = state
    return Effect.zip(Clock.currentTimeMillis, store.fetch(config.workerId, n, config.lease, hint)).pipe(
      Effect.tap(([, rows]) => Effect.annotateCurrentSpan(Telemetry.attributes.claimed, rows.length)),
      Effect.withSpan(Telemetry.spans.claim, { attributes: { [Telemetry.attributes.worker]: config.workerId } }, { captureStackTrace: false }),
      state.health.retrying,
      Effect.map(([sent, rows]) => {
        for (const row of rows) state.leaseUntil.set(row.id, sent + config.leaseMs)
        return rows
      })
    )
  }

/** The highest priority among `jobs` (non-empty). */
const highest = (jobs: ReadonlyArray<Job>): number => {
  let top = jobs[0]!.priority
  for (const job of jobs) if (job.priority > top) top = job.priority
  return top
}

/** What a lane is built from. */
export interface LaneOptions {
  readonly state: WorkerState
  readonly finalizer: Finalizer
  readonly runner: AttemptRunner
  readonly claim: (n: number, hint: FetchHint) => Effect.Effect<ReadonlyArray<Job>>
  /** Wakes the lane when idle (see `Pickup`). */
  readonly pickup: Pickup
}

/** One lane: runs until the worker stops; rows claimed and not started go back to the queue. */
export const lane = (options: LaneOptions): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { state } = options
    const { config } = state
    const idle = Effect.raceFirst(Effect.sleep(config.pollInterval), Deferred.await(state.stopping))
    const firstSkipMs = Math.max(1, Duration.toMillis(config.pollInterval))
    const maxSkipMs = firstSkipMs * 16
    // Wait-mode keys this lane found full, skipped at fetch until `until`; the skip doubles while the
    // key stays full for this lane and ends once it gets a slot of it. Other lanes (the holder first of
    // all) keep running the key's jobs.
    const skipping = new Map<string, { until: number; ms: number }>()
    // idle after an empty claim: until a hint of due work (a freed slot of a key ends its skip), the
    // next Scheduled row's time, or the poll interval (see `Pickup`)
    const waker = options.pickup.join((key) => void skipping.delete(key))
    // the hints seen when the lane's last claim was sent
    let seen = waker.epoch()
    const fiber: FiberState = { later: [], reuseSkip: 0, reuseMisses: 0 }
    const later = fiber.later
    // the size of the next claim, and of the claim that brought the rows running now
    let batch = 1
    let asked = 1
    /** The next claim's size after a batch of `fetched` rows asked as `asked`: doubles while batches come back full, run smoothly and quickly. */
    const grown = (fetched: number, smooth: boolean, handlersMs: number) =>
      smooth && handlersMs < BATCH_QUICK_MS * fetched && fetched === asked ? Math.min(config.maxBatch, asked * 2) : 1
    /** The keys to leave to other lanes now (all but `except`, the key of the job about to take a slot). */
    const contendedAt = (now: number, except?: string): FetchHint => {
      const contended: Array<string> = []
      for (const [key, s] of skipping) {
        if (s.until > now) {
          if (key !== except) contended.push(key)
        } else if (now - s.until > maxSkipMs) skipping.delete(key)
      }
      return { contended: contended.slice(-MAX_CONTENDED_KEYS) }
    }
    // the row claimed by the last finalizing write of a batch (see `Finalize.NextClaim`): the next
    // batch, claimed without a statement of its own; an empty list: that claim found nothing due
    let carried: Array<Job> | undefined
    const claimed: NextClaim["claimed"] = (jobs, sentAt) => {
      for (const job of jobs) {
        state.inFlight.add(job.id)
        state.leaseUntil.set(job.id, sentAt + config.leaseMs)
      }
      carried = [...jobs]
    }
    return Effect.gen(function* () {
      // read synchronously where a job boundary asks the time only now and then (`LaneWake.urgent`)
      const clock = yield* Clock.Clock
      while (!(yield* Deferred.isDone(state.stopping))) {
        let jobs: Array<Job> = later.splice(0)
        let fetched = 0
        if (jobs.length === 0 && carried !== undefined) {
          jobs = carried
          fetched = jobs.length
          asked = CARRIED_CLAIM
          carried = undefined
        } else if (jobs.length === 0) {
          asked = batch
          seen = waker.epoch()
          waker.claiming(batch)
          jobs = [...(yield* options.claim(batch, contendedAt(yield* Clock.currentTimeMillis)))]
          fetched = jobs.length
          for (const job of jobs) state.inFlight.add(job.id)
        }
        if (jobs.length === 0) {
          batch = 1
          yield* options.pickup.emptyClaim
          yield* waker.idle(seen)
          continue
        }
        let handlersMs = 0
        let smooth = true
        let contendedUnknown = false
        while (jobs.length > 0) {
          if (yield* Deferred.isDone(state.stopping)) {
            later.push(...jobs.splice(0))
            break
          }
          // rows of a higher priority than all this batch has left came due, and no idle lane took them:
          // claim one first (see `Pickup`), so it waits for the job running now, not for the batch
          if (jobs.length > 0 && waker.urgent(() => highest(jobs), () => clock.currentTimeMillisUnsafe())) {
            const first = yield* options.claim(1, contendedAt(yield* Clock.currentTimeMillis))
            for (const row of first) state.inFlight.add(row.id)
            jobs.unshift(...first)
          }
          const job = jobs.shift()!
          // the store ignored the hint: do not spin on a key this lane just found full
          const rowKey = rowConcurrency(job)?.key
          if (rowKey !== undefined && (skipping.get(rowKey)?.until ?? 0) > (yield* Clock.currentTimeMillis)) yield* waker.idleOn(rowKey)
          state.inFlight.add(job.id)
          // the batch's last job: its finalizing write may claim the next row (see `CARRIED_CLAIM`)
          const next: NextClaim | undefined = jobs.length === 0 && later.length === 0 && carried === undefined
            ? { limit: CARRIED_CLAIM, hint: contendedAt(yield* Clock.currentTimeMillis, rowKey), claimed }
            : undefined
          if (next !== undefined) seen = waker.epoch()
          const { handlerMs, outcome, waitKey } = yield* options.runner.run(job, fiber, next).pipe(
            // interrupted mid-batch: the rows not started go back to the queue with the rest
            Effect.onInterrupt(() => Effect.sync(() => later.push(...jobs.splice(0))))
          )
          handlersMs += handlerMs
          // a requeue with a time: this worker's timer fires by then
          if (outcome._tag === "Requeued" && outcome.at !== undefined) yield* options.pickup.dueAt(outcome.at.getTime())
          if (outcome._tag === "Requeued") smooth = false
          if (outcome._tag === "Requeued" && outcome.at === undefined) {
            if (waitKey === undefined) {
              contendedUnknown = true
            } else {
              const ms = Math.min(maxSkipMs, (skipping.get(waitKey)?.ms ?? firstSkipMs / 2) * 2)
              skipping.delete(waitKey)
              skipping.set(waitKey, { until: (yield* Clock.currentTimeMillis) + ms, ms })
            }
          } else if (waitKey !== undefined) {
            skipping.delete(waitKey)
          }
        }
        if (fetched > 0) {
          batch = grown(fetched, smooth, handlersMs)
        }
        // An immediate requeue for another reason is due again at once: back off one poll interval so
        // this lane does not spin on it.
        if (contendedUnknown) yield* idle
      }
    }).pipe(
      Effect.ensuring(Effect.sync(waker.leave)),
      // claimed but not started (stopping, or interrupted): back to the queue
      Effect.ensuring(
        Effect.suspend(() =>
          Effect.forEach([...later.splice(0), ...(carried?.splice(0) ?? [])], (job) =>
            options.finalizer
              .finalize(job, Outcome.Requeued({ reason: `Claim released (worker ${config.workerId} shutting down)`, keepsPlace: true }), job.metadata)
              .pipe(Effect.ensuring(Effect.sync(() => state.inFlight.delete(job.id))))
          )
        )
      )
    )
  })
