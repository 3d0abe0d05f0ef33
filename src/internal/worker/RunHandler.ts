/**
 * The innermost step of an attempt: the handler itself, its result as a typed `Outcome`, the operator's
 * cancel (a cancel asked while it runs interrupts it, its finalizers first, and the attempt ends
 * Deleted), and a saga's per-correlation serialization through the store's locks.
 *
 * @since 0.3.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { type Attempt, CurrentAttempt, CurrentSlot, interruptFork, lapsedText, lostAfterEndText, lostText, untilLost } from "../attempt/Attempt.js"
import type { AttemptRecordState } from "../attempt/AttemptRecord.js"
import type { AttemptInfo, SlotInfo } from "../job/Handler.js"
import type { Job } from "../job/Job.js"
import { Outcome } from "../job/Outcome.js"
import * as Saga from "../job/Saga.js"
import type { SemaphoreProviderService } from "../semaphore/SemaphoreProvider.js"
import { cancelText } from "../store/JobStore.js"
import { rowConcurrency } from "./Finalize.js"
import type { WorkerState } from "./WorkerState.js"

/** A failed handler's cause as its attempt's error (an error's own `cause` chain included). */
const renderCause = (cause: Cause.Cause<unknown>): string => Cause.pretty(cause)

/** The outcome of an attempt an operator cancelled (its handler interrupted, if it had started). */
export const cancelled = (job: Job, cause: string, running: boolean): Outcome =>
  Outcome.Deleted({ reason: cancelText(cause, running ? { attempt: job.attempt } : undefined) })

/** A cancel asked for `job` before its handler started, if any. */
export const cancelOf = (state: WorkerState, job: Job): string | undefined => state.cancelAsked.get(job.id) ?? job.cancelRequested

/** The handler's own run, as an outcome: success, a saga's step, or a failure with its cause. */
const handlerOutcome = (attempt: Attempt, slot: SlotInfo | undefined): Effect.Effect<Outcome> => {
  const h = attempt.registered.handler
  const info: AttemptInfo = { jobId: attempt.job.id, type: attempt.job.type, attempt: attempt.job.attempt, ...(slot === undefined ? {} : { slot }) }
  const body: Effect.Effect<unknown, unknown, never> =
    h._tag === "StreamHandler"
      ? Stream.runDrain(h.run(attempt.payload, info) as Stream.Stream<unknown, unknown, never>)
      : (h.run as (p: unknown, i: typeof info) => Effect.Effect<unknown, unknown, never>)(attempt.payload, info)
  return body.pipe(
    Effect.provide(attempt.registered.context),
    Effect.provideService(CurrentAttempt, attempt),
    Effect.exit,
    Effect.map((exit) =>
      Exit.isSuccess(exit)
        ? h._tag === "SagaHandler"
          ? Saga.SagaStep.$match(exit.value as Saga.SagaStep, {
              Complete: () => Outcome.Succeeded(),
              Reschedule: ({ after, reason }) => Outcome.Requeued({ reason, at: new Date(Date.now() + Duration.toMillis(after)) })
            })
          : Outcome.Succeeded()
        : Outcome.Failed({ error: renderCause(exit.cause) })
    )
  )
}

/**
 * Runs the handler, unless the job was cancelled; a cancel asked while it runs interrupts it (its
 * finalizers run first) and the attempt ends as Deleted. Notes in the attempt's `record` that it ran.
 */
export const runHandler = (state: WorkerState, record: AttemptRecordState, attempt: Attempt, keySource?: string): Effect.Effect<Outcome> =>
  Effect.suspend(() => {
    const job = attempt.job
    const asked = cancelOf(state, job)
    if (asked !== undefined) return Effect.succeed(cancelled(job, asked, false))
    record.handlerRan = true
    const concurrency = attempt.policies.concurrency
    const key = concurrency?.key
    if (key !== undefined) {
      state.runningKeys.set(job.id, key)
      // a key the row does not carry yet (resolved from the handler or contract): reported soon, so
      // that the dashboard shows the job holding it before the finalizing write stamps it
      if (rowConcurrency(job)?.key !== key) {
        state.unstamped.set(job.id, { limit: concurrency?.limit ?? 1, source: keySource ?? "unknown" })
        Queue.offerUnsafe(state.reportSoon, undefined)
      }
    }
    // the handler runs in a fiber of its own; a cancel interrupts that fiber (its finalizers run first,
    // awaited here) and names the attempt's outcome, unless the handler had ended first
    let cancelCause: string | undefined
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Effect.forkChild(restore(Effect.flatMap(CurrentSlot, (slot) => handlerOutcome(attempt, slot))), { uninterruptible: "inherit" }), (fiber) => {
        state.cancelSignals.set(job.id, (cause) =>
          Effect.suspend(() => {
            cancelCause ??= cause
            return interruptFork(fiber)
          })
        )
        return restore(Fiber.await(fiber)).pipe(
          Effect.onInterrupt(() => Fiber.interrupt(fiber)),
          Effect.map((exit) =>
            Exit.isSuccess(exit)
              ? exit.value
              : cancelCause !== undefined
                ? cancelled(job, cancelCause, true)
                : Outcome.Failed({ error: renderCause(exit.cause) })
          )
        )
      })
    ).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          state.cancelSignals.delete(job.id)
          state.runningKeys.delete(job.id)
          state.unstamped.delete(job.id)
        })
      )
    )
  })

/** A saga step: serialized per correlation through `locks` (the store's own, spanning every process). */
export const runSaga = (
  state: WorkerState,
  record: AttemptRecordState,
  locks: SemaphoreProviderService,
  attempt: Attempt,
  h: Saga.SagaHandler
): Effect.Effect<Outcome, never, Scope.Scope> =>
  Effect.gen(function* () {
    const name = Saga.lockName(h.contract.name, h.correlate(attempt.payload))
    const slot = yield* locks.tryAcquire(name, 1, 0)
    if (Option.isNone(slot)) {
      return Outcome.Requeued({ reason: `Saga correlation '${name}' busy`, at: new Date((yield* Clock.currentTimeMillis) + 50) })
    }
    // like a concurrency slot: the handler is interrupted if the lock is lost while it runs, and a run
    // whose lock lapsed meanwhile (its process paused or cut off past the deadline) is not recorded
    const lock = slot.value
    const what = `Lock of saga correlation '${name}'`
    // the end of the run: a lock found lost after it keeps the outcome only if its provider shows it
    // stayed held up to the end (see `Slot.heldThrough`)
    let verdict: Effect.Effect<boolean | undefined> | undefined
    let ended: Outcome | undefined
    const outcome = yield* untilLost(
      Effect.tap(runHandler(state, record, attempt), (o) =>
        lock.heldThrough === undefined
          ? Effect.void
          : Effect.map(lock.heldThrough, (v) => {
              verdict = v
              ended = o
            })
      ),
      lock.lost,
      () =>
        verdict === undefined
          ? Effect.succeed(Outcome.Requeued({ reason: lostText(what), keepsPlace: true }))
          : Effect.map(verdict, (held) => (held === true && ended !== undefined ? ended : Outcome.Requeued({ reason: lostAfterEndText(what), keepsPlace: true })))
    )
    if (lock.lapsed !== undefined && (yield* lock.lapsed)) return Outcome.Requeued({ reason: lapsedText(what), keepsPlace: true })
    if (verdict !== undefined && (yield* verdict) === false) return Outcome.Requeued({ reason: lostAfterEndText(what), keepsPlace: true })
    return outcome
  }).pipe(Effect.catch((e) => Effect.succeed(Outcome.Failed({ error: e.message }))))
