/**
 * Slot reuse (opt-in): while a fiber holds a Wait-mode slot of a key, it claims the next due jobs of
 * the same key, limit and mode and runs them under that slot, so a hot key pays one admission for a
 * chain of jobs.
 *
 * @since 0.3.0
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { Job } from "../job/Job.js"
import { Outcome } from "../job/Outcome.js"
import type { ConcurrencyPolicy } from "../policy/PolicyValues.js"
import type { FetchHint } from "../store/JobStore.js"
import { type Finalizer, rowConcurrency } from "./Finalize.js"
import type { WorkerState } from "./WorkerState.js"

/** How deep into the due rows a slot holder looks for the next job of its key. */
export const SAME_SLOT_DEPTH = 256

/** What slot reuse is built from. */
export interface SlotReuseOptions {
  readonly state: WorkerState
  readonly finalizer: Finalizer
  /** Claims up to `n` rows with `hint`. */
  readonly claim: (n: number, hint: FetchHint) => Effect.Effect<ReadonlyArray<Job>>
  /** Runs a job under the held slot (its finalizing write forked into `writes`), or hands it to `later` and says false. */
  readonly runUnderSlot: (job: Job, policy: ConcurrencyPolicy, later: Array<Job>, writes: Array<Fiber.Fiber<void>>) => Effect.Effect<boolean>
}

/**
 * While the calling fiber holds a slot of `policy`: the next due jobs of it, under the same slot. Claims
 * grow 1, 2, 4 .. `maxBatch` rows at a time (the time bound is checked before each claim, so a chain
 * may run up to `maxBatch` - 1 jobs past it); rows of another policy, or that the slot no longer admits,
 * run after the release, through the gate, and claimed rows are handed back to the queue if the fiber is
 * interrupted. A job's finalizing write is not awaited before the next job starts: the writes of a chain
 * go out together in the finalizer's batched statements, and all of them have landed before this returns
 * (so before the slot is released, and before the worker's lanes end). Says how many ran.
 */
export const make =
  (options: SlotReuseOptions) =>
  (policy: ConcurrencyPolicy, later: Array<Job>): Effect.Effect<number> => {
    const { state } = options
    const { config } = state
    const claimed: Array<Job> = []
    // the chain's finalizing writes, in flight while the next jobs run; all landed before this returns
    // (so before the slot is released)
    const writes: Array<Fiber.Fiber<void>> = []
    let ran = 0
    return Effect.gen(function* () {
      const reuse = config.reuse
      if (reuse === undefined) return 0
      const start = yield* Clock.currentTimeMillis
      const hint: FetchHint = { contended: [], sameSlot: { key: policy.key, limit: policy.limit, depth: SAME_SLOT_DEPTH } }
      let batch = 1
      while (ran < reuse.maxJobs) {
        const stop = yield* Deferred.isDone(state.stopping)
        if (stop || (yield* Clock.currentTimeMillis) - start >= reuse.maxMs) return ran
        const jobs = yield* options.claim(Math.min(batch, reuse.maxJobs - ran), hint)
        if (jobs.length === 0) return ran
        for (const job of jobs) state.inFlight.add(job.id)
        claimed.push(...jobs)
        while (claimed.length > 0) {
          const job = claimed[0]!
          const row = rowConcurrency(job)
          // a row of another policy (the store ignored the hint), or the worker stopping: after the release
          if (row?.key !== policy.key || row.limit !== policy.limit || row.mode !== "Wait" || (yield* Deferred.isDone(state.stopping))) {
            later.push(...claimed.splice(0))
            return ran
          }
          claimed.shift()
          if (!(yield* options.runUnderSlot(job, policy, later, writes))) {
            later.push(...claimed.splice(0))
            return ran
          }
          ran++
        }
        batch = Math.min(config.maxBatch, batch * 2)
      }
      return ran
    }).pipe(
      Effect.ensuring(Effect.suspend(() => Fiber.awaitAll(writes.splice(0)))),
      Effect.onInterrupt(() =>
        Effect.forEach(claimed.splice(0), (job) =>
          options.finalizer
            .finalize(job, Outcome.Requeued({ reason: `Claim released (worker ${config.workerId} interrupted)`, keepsPlace: true }), job.metadata)
            .pipe(Effect.ensuring(Effect.sync(() => state.inFlight.delete(job.id))))
        )
      )
    )
  }
