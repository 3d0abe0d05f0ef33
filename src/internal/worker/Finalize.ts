/**
 * The attempt's finalizing write. A finished attempt's outcome is kept until it is written: the write
 * is retried for as long as the store does not answer, and it lands only if this attempt still owns
 * the row (the statement checks worker and attempt), so a late write never overrides a newer attempt.
 * If the store answers that the claim was lost meanwhile (the lease ran out during an outage and
 * another attempt took the job), the trail says so. Only a worker that is shutting down gives up,
 * once the lease has run out: the lease then recovers the job.
 *
 * @since 0.3.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type { Job } from "../job/Job.js"
import { type Outcome, stateOf } from "../job/Outcome.js"
import * as Telemetry from "../observability/Telemetry.js"
import type { FusedRelease } from "../semaphore/SemaphoreProvider.js"
import type { CarriedClaim, FetchHint, JobStoreService } from "../store/JobStore.js"
import * as StoreHealth from "./StoreHealth.js"
import { storeRetry, type WorkerState } from "./WorkerState.js"

/** The concurrency key a row carries in its metadata (stamped, or set at enqueue), if any. */
export const rowConcurrency = (job: Job): { readonly key: string; readonly limit: unknown; readonly mode: unknown } | undefined => {
  const value = (job.metadata as any)?.policies?.concurrency?.value
  return typeof value?.key === "string" ? value : undefined
}

/** Writes attempts' results for one worker. */
export interface Finalizer {
  /**
   * Writes `outcome` and `metadata` (the stamp) for `job` (see {@link FinalizeOptions}). Uninterruptible.
   */
  readonly finalize: (job: Job, outcome: Outcome, metadata: unknown, options?: FinalizeOptions) => Effect.Effect<void>
}

/** How an attempt's finalizing write goes out. */
export interface FinalizeOptions {
  /** Whether the attempt's handler ran (else the claim gives its attempt number back); false by default. */
  readonly handlerRan?: boolean | undefined
  /** The attempt's slot stays held after the write (slot reuse: the next job runs under it); see `JobStore.Finalize.holdsSlot`. */
  readonly holdsSlot?: boolean | undefined
  /** Frees the attempt's slot in the same statement (first try only: a write retried after that leaves the slot to its scope). */
  readonly release?: FusedRelease | undefined
  /** The lane's next claim, carried by a statement that frees a slot (`release`). */
  readonly next?: NextClaim | undefined
  /**
   * With `release`: what is written instead when the statement failed on the slot's connection and the
   * store refused to write the outcome without it (`FusedRelease.fallback`: the slot could not be shown
   * held up to the run's end); `used` is told.
   */
  readonly unproven?: { readonly outcome: Outcome; readonly used: () => void } | undefined
}

/** Whether `e`'s cause chain holds a `SemaphoreError` (a fused release refused its fallback). */
const slotRefused = (e: unknown): boolean => {
  let current: unknown = e
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    if ((current as { _tag?: unknown })._tag === "SemaphoreError") return true
    current = (current as { cause?: unknown }).cause
  }
  return false
}

/**
 * The lane's next claim, offered to a finalizing write that frees a slot (`release`): the store may run
 * it in the same statement (see `JobStore.Finalize.claim`), first try only. `claimed` gets the rows and
 * when the statement was sent (their lease counts from then); it is not called when the store did not
 * run the claim.
 */
export interface NextClaim {
  readonly limit: number
  readonly hint: FetchHint
  readonly claimed: (jobs: ReadonlyArray<Job>, sentAt: number) => void
}

/** The finalizer of a worker over `store`. */
export const make = (store: JobStoreService, state: WorkerState): Finalizer => {
  const { health, inFlight, leaseUntil, stopping } = state

  /** The trail of a job whose finished attempt's result could not be written before another attempt took it. */
  const lostInOutage = (job: Job, outcome: Outcome, seconds: number) =>
    Effect.gen(function* () {
      const now = yield* Effect.result(store.get(job.id))
      const current = now._tag === "Success" && now.success._tag === "Some" ? now.success.value.job : undefined
      // the row says what this write would have said, at this attempt: an earlier try of the write
      // landed, only its answer was lost (the connection broke after the statement) — nothing was lost.
      // (A Requeued result read back as Enqueued may also be another claim's requeue: the job runs
      // again either way.)
      const target = stateOf(outcome, new Date(yield* Clock.currentTimeMillis))
      const terminalOrQueued = current !== undefined && current.state !== "Processing"
      if (terminalOrQueued && current.attempt === job.attempt && (current.state === target || (target === "Scheduled" && current.state === "Enqueued"))) {
        return yield* Effect.logInfo(`${job.id}: result of attempt ${job.attempt} (${outcome._tag}) was written; its acknowledgement was lost`)
      }
      // the run that replaces it: the attempt running or done now, or (queued again: a claim that never
      // ran its handler gave its number back) the next claim's
      const next =
        current === undefined
          ? undefined
          : current.state === "Enqueued" || current.state === "Scheduled"
            ? current.attempt + 1
            : current.attempt > job.attempt
              ? current.attempt
              : undefined
      const rerun = next === undefined ? "" : `; re-run as attempt ${next}`
      const text = `Result of attempt ${job.attempt} (${outcome._tag}) lost in a database outage of ${seconds.toFixed(1)} s${rerun}`
      yield* Effect.logWarning(`${job.id}: ${text}`)
      yield* store.appendLog(job.id, "Recovered", text).pipe(Effect.retry({ schedule: storeRetry, times: 20 }), Effect.ignore)
    })

  const finalize = (job: Job, given: Outcome, metadata: unknown, options?: FinalizeOptions) =>
    Effect.gen(function* () {
      let outcome = given
      let failedAt: number | undefined
      let delay = 50
      let rejected = 0
      const handlerRan = options?.handlerRan === true
      const next = options?.next
      let fused = options?.release
      // rows the write claimed for the lane (see `NextClaim`), shown on the attempt's span
      let carried: number | undefined
      while (true) {
        // taken before the call: a return of the store seen meanwhile by any call ends the back-off
        const returned = health.nextReturn()
        // the lane's next claim rides on the first try of a write on the slot's connection (not once the
        // worker is stopping: its rows would only go back to the queue)
        let claim: CarriedClaim | undefined
        if (fused !== undefined && next !== undefined && !(yield* Deferred.isDone(stopping))) {
          const sent = yield* Clock.currentTimeMillis
          claim = {
            limit: next.limit,
            lease: state.config.lease,
            hint: next.hint,
            claimed: (jobs) => {
              carried = jobs.length
              next.claimed(jobs, sent)
            }
          }
        }
        // the slot's connection died under the statement and the slot cannot be shown held up to the
        // run's end (the store refused to write without it): its requeue is written instead, at once
        // (not an outage of the store: kept out of its health)
        const unproven = fused !== undefined ? options?.unproven : undefined
        const refused = { refused: true } as const
        const result = yield* Effect.result(
          health.observe(
            store.finalize({ job, workerId: state.config.workerId, outcome, metadata, handlerRan, holdsSlot: options?.holdsSlot, release: fused, claim }).pipe(
              Effect.catchIf((e) => unproven !== undefined && slotRefused(e), () => Effect.succeed(refused))
            )
          )
        )
        fused = undefined
        if (result._tag === "Success" && result.success === refused && unproven !== undefined) {
          outcome = unproven.outcome
          unproven.used()
          continue
        }
        const now = yield* Clock.currentTimeMillis
        if (result._tag === "Success") {
          if (failedAt !== undefined) yield* Metric.modify(StoreHealth.finalizesPending, -1)
          if (carried !== undefined) yield* Effect.annotateCurrentSpan(Telemetry.attributes.claimed, carried)
          if (result.success) {
            yield* Effect.annotateCurrentSpan(Telemetry.attributes.outcome, outcome._tag)
            yield* Metric.update(Telemetry.attemptsOf(job.type, rowConcurrency(job)?.key, outcome._tag), 1)
          } else if (failedAt !== undefined) {
            yield* lostInOutage(job, outcome, (now - failedAt) / 1000)
          } else {
            yield* Effect.logWarning(`claim on ${job.id} lost before finalize`)
          }
          return
        }
        if (failedAt === undefined) {
          failedAt = now
          yield* Metric.modify(StoreHealth.finalizesPending, 1)
        }
        // a statement the server keeps rejecting is not an outage: after a few tries the lease recovers the job
        if (!StoreHealth.isOutage(result.failure) && ++rejected >= 8) {
          yield* Metric.modify(StoreHealth.finalizesPending, -1)
          inFlight.delete(job.id)
          return yield* Effect.logError(`finalize of ${job.id} rejected by the job store; the lease will recover it`, result.failure)
        }
        if ((yield* Deferred.isDone(stopping)) && now >= (leaseUntil.get(job.id) ?? 0)) {
          yield* Metric.modify(StoreHealth.finalizesPending, -1)
          return yield* Effect.logError(
            `result of attempt ${job.attempt} of ${job.id} (${outcome._tag}) not written: the job store was unreachable until the worker stopped; the lease will recover the job`
          )
        }
        yield* Effect.raceFirst(Effect.sleep(delay), returned)
        delay = Math.min(500, delay * 2)
      }
    }).pipe(Effect.uninterruptible)

  return { finalize }
}
