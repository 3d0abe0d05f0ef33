/**
 * One attempt, read top-down: one Effect program over per-attempt scoped layers, built fresh for every
 * attempt into the attempt's own scope (`Layer.buildWithScope` of a `Layer.fromBuild`: no memo entry, so
 * nothing is shared with another attempt; five composed `Layer.effect`s cost about twice as much CPU per
 * attempt, see `bench/attempt-layers.ts`):
 *
 *   AttemptRecord    what the attempt keeps while it runs (handler ran, handler time, outcome written);
 *                    built first and finalized last, its finalization makes sure the claim ends with
 *                    exactly one finalizing write (the attempt's own; else that of an attempt that did not
 *                    start; else, interrupted, the requeue), then lets the job go
 *   JobContext       the claimed row — unless its claim lapsed or a cancel was asked (`NotStarted`)
 *   ResolvedPolicy   the stamp, or enqueue → handler → contract → global (`Unrunnable` when it cannot run)
 *   Stamp            what the finalizing write persists
 *   ConcurrencySlot  the scope the admitting behaviors' slots are held in; closed by the attempt right
 *                    before its finalizing write, else by the layer's finalization (defect, timeout,
 *                    interruption, lost connection); a statement that released the slot leaves the
 *                    scope only the slot's connection to give back
 *
 * and the program: behaviors (outermost first: those that admit by holding a slot, then the rest around
 * the handler) → handler → finalize, ONE statement: inside a held slot, it releases the slot in the same
 * statement when the store can (the built-in PostgreSQL store and provider on one client) and carries
 * the lane's next claim when it is the last of its batch; otherwise it goes out once the slot is back.
 * An interrupted attempt is requeued by its record's finalization, so nothing is lost.
 *
 * @since 0.3.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { type Attempt, HeldSlot, lostAfterEndText, SlotEnd } from "../attempt/Attempt.js"
import * as AttemptRecord from "../attempt/AttemptRecord.js"
import * as ConcurrencySlot from "../attempt/ConcurrencySlot.js"
import * as JobContext from "../attempt/JobContext.js"
import { type Behavior, compose } from "../attempt/Pipeline.js"
import * as ResolvedPolicy from "../attempt/ResolvedPolicy.js"
import * as Stamp from "../attempt/Stamp.js"
import type { Job } from "../job/Job.js"
import { Outcome } from "../job/Outcome.js"
import { Registry } from "../job/Registry.js"
import * as Telemetry from "../observability/Telemetry.js"
import { GlobalPolicies } from "../policy/GlobalPolicies.js"
import type { FamilyName } from "../policy/PolicyFamily.js"
import type { ConcurrencyPolicy } from "../policy/PolicyValues.js"
import type { FusedRelease, SemaphoreProviderService, Slot } from "../semaphore/SemaphoreProvider.js"
import { type Finalizer, type NextClaim, rowConcurrency } from "./Finalize.js"
import { cancelled, cancelOf, runHandler, runSaga } from "./RunHandler.js"
import type { WorkerState } from "./WorkerState.js"

/** What one worker fiber keeps between attempts. */
export interface FiberState {
  /** Claimed, not yet run. */
  readonly later: Array<Job>
  /** Wait-mode attempts to run before this fiber looks for jobs to reuse a slot again. */
  reuseSkip: number
  /** Slot-reuse look-aheads in a row that found nothing. */
  reuseMisses: number
}

/** An attempt's outcome and, for a Wait-mode key, the key. */
export interface AttemptResult {
  readonly outcome: Outcome
  readonly waitKey: string | undefined
  /** How long its handler ran, ms (0 when it did not run): what a lane's batch sizing calls the job's length. */
  readonly handlerMs: number
}

/** Runs attempts for one worker. */
export interface AttemptRunner {
  /**
   * Runs a claimed job: through every behavior, then (holding a Wait-mode slot) the jobs that may reuse
   * it. `next`: the lane's next claim, which the finalizing write carries when it frees the attempt's
   * slot in its own statement (see `Finalize.NextClaim`).
   */
  readonly run: (job: Job, fiber: FiberState, next?: NextClaim) => Effect.Effect<AttemptResult>
  /**
   * Runs `job` under the slot of `policy` the calling fiber holds, if its resolved policy is exactly
   * `policy` and the slot admits it; otherwise hands it to `later` (run once the slot is released) and
   * says false. Its finalizing write is not awaited: it is forked and added to `writes`, which the
   * caller awaits before it releases the slot (see `SlotReuse`).
   */
  readonly runUnderSlot: (job: Job, policy: ConcurrencyPolicy, later: Array<Job>, writes: Array<Fiber.Fiber<void>>) => Effect.Effect<boolean>
}

/** The pieces an attempt runner is built from. */
export interface RunnerOptions {
  readonly state: WorkerState
  /** The policy families this worker enforces (its core and its addons'): a job resolved to another fails. */
  readonly enforced: ReadonlySet<FamilyName>
  readonly finalizer: Finalizer
  readonly registry: Registry["Service"]
  /** The pipeline's behaviors, outermost first. */
  readonly behaviors: ReadonlyArray<Behavior>
  /** The store's locks (saga serialization). */
  readonly locks: SemaphoreProviderService
  /** While a fiber holds a Wait-mode slot of `policy`: runs the next due jobs of it under the same slot. */
  readonly reuseSlot: (policy: ConcurrencyPolicy, later: Array<Job>) => Effect.Effect<number>
}

const defectToFailed = Effect.catchDefect((d: unknown) => Effect.succeed(Outcome.Failed({ error: `Defect in pipeline: ${String(d)}` })))

/** The services of an attempt's layers. */
type Services = AttemptRecord.AttemptRecord | JobContext.JobContext | ResolvedPolicy.ResolvedPolicy | Stamp.Stamp | ConcurrencySlot.ConcurrencySlot

/** The Wait-mode slot the calling fiber holds, for an attempt run under it (slot reuse). */
interface UnderSlot {
  readonly policy: ConcurrencyPolicy
  /** The chain's finalizing writes, in flight while the next jobs run (awaited before the slot's release). */
  readonly writes: Array<Fiber.Fiber<void>>
}

/** Builds a worker's attempt runner. */
export const make = (options: RunnerOptions): AttemptRunner => {
  const { finalizer, state } = options
  const { config } = state
  // the behaviors up to the last one that holds a slot admit the attempt (outside its slot); the rest,
  // and the handler, run inside it
  let lastHolder = -1
  options.behaviors.forEach((b, i) => {
    if (b.holdsSlot === true) lastHolder = i
  })
  const outer = options.behaviors.slice(0, lastHolder + 1)
  const inner = options.behaviors.slice(lastHolder + 1)

  // ── the attempt ────────────────────────────────────────────────────────────────────────────────

  /**
   * The attempt: its story over its layers, built fresh for it in a scope that closes with it. The
   * layers are built uninterruptibly and the story runs interruptibly, so an interruption always finds
   * the record's finalization in place. `under`: the Wait-mode slot the calling fiber holds (see
   * {@link underHeldSlot}); the result is undefined when the job was handed back to run after its release.
   */
  const attempt = (job: Job, fiber: FiberState, under: UnderSlot | undefined, next?: NextClaim): Effect.Effect<AttemptResult | undefined> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.scopedWith((scope) =>
          Effect.flatMap(Layer.buildWithScope(layers(job, now), scope), (built) => Effect.provideContext(restore(story(fiber, under, next)), built))
        )
      )
    ).pipe(
      // (their finalizing write went out from the record's finalization)
      Effect.catchTags({
        NotStarted: (e) => Effect.succeed(ended(e.outcome)),
        Unrunnable: (e) => Effect.succeed(ended(Outcome.Failed({ error: e.reason })))
      })
    )

  // ── its layers ─────────────────────────────────────────────────────────────────────────────────

  /**
   * AttemptRecord → JobContext → ResolvedPolicy → Stamp → ConcurrencySlot, for one attempt of `job`
   * begun at `now`: one layer, built fresh for the attempt (`Layer.fromBuild`: no memo entry), that
   * builds each service in turn with the function its own layer wraps (`JobContext.layer`,
   * `ResolvedPolicy.layer`, `Stamp.layer`, `ConcurrencySlot.layer`), its finalizers in the attempt's
   * scope. Composed from those five layers instead (`Layer.provideMerge`, a memo map of the attempt's
   * own: a memo entry, a deferred and scopes per layer), the same services cost ~100 µs more CPU per
   * attempt, ~15% of a keyless job's worker CPU on PostgreSQL (`bench/profile-keyless.ts`; in isolation,
   * `bench/attempt-layers.ts`: ~30 µs for five layers, ~12 µs for one, ~9 µs for a plain context).
   */
  const layers = (job: Job, now: number): Layer.Layer<Services, JobContext.NotStarted | ResolvedPolicy.Unrunnable> =>
    Layer.fromBuild((_, scope) =>
      Effect.gen(function* () {
        const record = yield* Scope.provide(attemptRecord(job), scope)
        const refused = notStarted(job, now)
        if (refused !== undefined) return yield* new JobContext.NotStarted({ outcome: refused })
        const context: JobContext.JobContextValue = { job, workerId: config.workerId, startedAt: new Date(now) }
        const globals = yield* (yield* GlobalPolicies).current
        const resolved = yield* Effect.fromResult(ResolvedPolicy.resolve(context, options.registry, globals, options.enforced))
        return Context.make(AttemptRecord.AttemptRecord, record).pipe(
          Context.add(JobContext.JobContext, context),
          Context.add(ResolvedPolicy.ResolvedPolicy, resolved),
          Context.add(Stamp.Stamp, Stamp.of(resolved)),
          Context.add(ConcurrencySlot.ConcurrencySlot, yield* ConcurrencySlot.make(scope))
        )
      })
    )

  /**
   * The attempt's record. Its finalization (the last of the attempt's) writes what the attempt did not:
   * the outcome of a job that did not start (`NotStarted`, `Unrunnable`), or the requeue of an
   * interrupted attempt; then the job leaves the worker's in-flight set, unless its job was handed back
   * or its write is still on its way (under a reused slot: the write's own fiber lets it go).
   */
  const attemptRecord = (job: Job): Effect.Effect<AttemptRecord.AttemptRecordState, never, Scope.Scope> =>
    Effect.acquireRelease(Effect.sync(AttemptRecord.make), (record, exit) =>
      Effect.suspend(() => {
        const unwritten = AttemptRecord.settled(record) ? undefined : unwrittenOutcome(exit)
        return (unwritten === undefined ? Effect.void : finalizer.finalize(job, unwritten, job.metadata, { handlerRan: record.handlerRan })).pipe(
          Effect.ensuring(Effect.sync(() => record.deferred || record.writing || state.inFlight.delete(job.id)))
        )
      })
    )

  /** What an attempt that wrote nothing writes, by how it ended: not started, unrunnable, or interrupted. */
  const unwrittenOutcome = (exit: Exit.Exit<unknown, unknown>): Outcome | undefined => {
    if (Exit.isSuccess(exit)) return undefined
    const error = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
    if (error instanceof JobContext.NotStarted) return error.outcome
    if (error instanceof ResolvedPolicy.Unrunnable) return Outcome.Failed({ error: error.reason })
    return Exit.hasInterrupts(exit)
      ? Outcome.Requeued({ reason: `Attempt interrupted (worker ${config.workerId} shutting down)`, keepsPlace: true })
      : undefined
  }

  /**
   * Why a claimed job must not start, if it must not. A claim whose lease may have run out before its
   * handler starts (its reply came back late, or it waited behind other work past a lease no heartbeat
   * renewed) goes back to the queue: the row may already be another worker's (the write lands only if
   * this claim still owns it), and it takes no attempt. A job an operator cancelled meanwhile ends
   * Deleted without running.
   */
  const notStarted = (job: Job, now: number): Outcome | undefined => {
    const until = state.leaseUntil.get(job.id)
    if (until !== undefined && now >= until) {
      return Outcome.Requeued({
        reason: `Claim of attempt ${job.attempt} lapsed before its handler started (lease ${config.leaseMs} ms); back to the queue`,
        keepsPlace: true
      })
    }
    const asked = cancelOf(state, job)
    return asked === undefined ? undefined : cancelled(job, asked, false)
  }

  // ── its story: behaviors → handler → finalize ──────────────────────────────────────────────────

  const story = (fiber: FiberState, under: UnderSlot | undefined, next: NextClaim | undefined) =>
    Effect.gen(function* () {
      const record = yield* AttemptRecord.AttemptRecord
      const { job } = yield* JobContext.JobContext
      const { attempt, metadata: resolved } = yield* ResolvedPolicy.ResolvedPolicy
      const { metadata } = yield* Stamp.Stamp
      const slot = yield* ConcurrencySlot.ConcurrencySlot
      const h = attempt.registered.handler
      const policy = attempt.policies.concurrency
      // where the key in force was declared (the stamp this attempt writes says it)
      const keySource = resolved.policies.concurrency?.source ?? (policy === undefined ? undefined : "global")
      /** The handler, timed (the lane sizes its claims by how long handlers take, not by its own wall time). */
      const handler = timed(record, runHandler(state, record, attempt, keySource))
      /**
       * The finalizing write (once); `release`: the held slot's, freed in the same statement, with the lane's
       * next claim; `holds`: the slot stays held after it (slot reuse), so the write frees no slot.
       */
      const finalize = (outcome: Outcome, release?: Slot, holds = false) => finalizeOnce(job, record, slot, outcome, metadata, release, next, policy?.key, holds)

      if (under !== undefined) return yield* underHeldSlot(job, fiber, under, attempt, record, handler, finalize)

      const wait = h._tag !== "SagaHandler" && policy?.mode === "Wait" ? policy : undefined
      if (policy !== undefined) yield* Effect.annotateCurrentSpan({ [Telemetry.attributes.key]: policy.key, [Telemetry.attributes.limit]: policy.limit })
      // behaviors: the admitting ones take their slots into the attempt's slot scope; inside the slot,
      // the others around the handler, then (holding it) the finalizing write that can release it
      const body: Effect.Effect<Outcome, never, Scope.Scope> =
        h._tag === "SagaHandler"
          ? timed(record, runSaga(state, record, options.locks, attempt, h))
          : compose(outer, attempt, Effect.provideService(inSlot(record, fiber, attempt, handler, finalize, wait), ConcurrencySlot.SlotScope, undefined)).pipe(
              Effect.provideService(ConcurrencySlot.SlotScope, slot.scope)
            )
      const outcome = yield* Effect.scoped(body).pipe(
        defectToFailed,
        policy === undefined ? identity : Effect.annotateLogs(Telemetry.attributes.key, policy.key)
      )
      // finalize: the slot is given back first (when the statement did not already release it), then the
      // one statement — unless it went out inside the slot
      yield* ConcurrencySlot.release(slot)
      yield* finalize(outcome)
      return { outcome: record.outcome ?? outcome, waitKey: wait?.key, handlerMs: record.handlerMs }
    })

  /**
   * Inside the admitted slot: the inner behaviors around the handler, the lapse check, then the
   * finalizing write while the slot is still held — releasing it in the same statement when the store
   * can; or, reusing a Wait-mode slot, the write and then the next due jobs of the key under the slot.
   */
  const inSlot = (
    record: AttemptRecord.AttemptRecordState,
    fiber: FiberState,
    attempt: Attempt,
    handler: Effect.Effect<Outcome>,
    finalize: (outcome: Outcome, release?: Slot, holds?: boolean) => Effect.Effect<void>,
    wait: ConcurrencyPolicy | undefined
  ): Effect.Effect<Outcome, never, Scope.Scope> => {
    const inside = Effect.flatMap(compose(inner, attempt, handler), lapseChecked(record))
    const reusing = wait !== undefined && wait.total === undefined && config.reuse !== undefined && !(fiber.reuseSkip-- > 0)
    if (reusing) {
      return Effect.tap(inside, (outcome) =>
        Effect.andThen(
          // written while the slot stays held for the next jobs of the key
          finalize(outcome, undefined, true),
          Effect.map(options.reuseSlot(wait, fiber.later), (ran) => {
            fiber.reuseMisses = ran > 0 ? 0 : Math.min(5, fiber.reuseMisses + 1)
            fiber.reuseSkip = 2 ** fiber.reuseMisses - 1
          })
        )
      )
    }
    if (attempt.policies.concurrency === undefined) return inside
    return Effect.tap(inside, (outcome) =>
      Effect.flatMap(HeldSlot, (held) => (held?.fusedRelease?.() === undefined ? Effect.void : finalize(outcome, held)))
    )
  }

  /**
   * An attempt under the Wait-mode slot the calling fiber holds: run only if its policy is exactly that
   * one and the slot admits it (else handed back to `later`, to run after the release: undefined). Its
   * finalizing write is forked into `under.writes` (the slot is held until every write of the chain has
   * landed), so the writes of a chain share the batched finalizing statements while the next job runs.
   */
  const underHeldSlot = (
    job: Job,
    fiber: FiberState,
    under: UnderSlot,
    attempt: Attempt,
    record: AttemptRecord.AttemptRecordState,
    handler: Effect.Effect<Outcome>,
    finalize: (outcome: Outcome, release?: Slot, holds?: boolean) => Effect.Effect<void>
  ): Effect.Effect<AttemptResult | undefined> =>
    Effect.gen(function* () {
      const policy = attempt.policies.concurrency
      if (
        attempt.registered.handler._tag === "SagaHandler" || policy?.key !== under.policy.key || policy.limit !== under.policy.limit ||
        policy.mode !== "Wait" || !(yield* admittedUnder(attempt))
      ) {
        record.deferred = true
        fiber.later.push(job)
        return undefined
      }
      const outcome = yield* Effect.scoped(Effect.flatMap(compose(inner, attempt, handler), lapseChecked(record))).pipe(defectToFailed)
      // forked and recorded in one uninterruptible step: an interruption sees either no write (and the
      // record's finalization requeues the job) or the write on its way, which owns the job's in-flight entry
      yield* Effect.uninterruptible(
        Effect.map(
          Effect.forkDetach(finalize(outcome, undefined, true).pipe(Effect.ensuring(Effect.sync(() => state.inFlight.delete(job.id)))), { uninterruptible: "inherit" }),
          (write) => {
            record.writing = true
            under.writes.push(write)
          }
        )
      )
      return { outcome, waitKey: policy.key, handlerMs: record.handlerMs }
    })

  // ── its pieces ─────────────────────────────────────────────────────────────────────────────────

  /**
   * The finalizing write of `record`'s attempt, once (uninterruptible); `release`: the slot it frees in
   * the same statement (of `key`). Should that statement fail on the slot's connection (it died), the
   * store writes the outcome through its pool only if the slot proves it stayed held up to the run's end
   * (`Slot.heldThrough`, marked before the statement is sent: an instant after the end, so a stricter
   * question); else
   * the attempt is requeued as a slot lost after its handler ended.
   */
  const finalizeOnce = (
    job: Job,
    record: AttemptRecord.AttemptRecordState,
    slot: ConcurrencySlot.ConcurrencySlotState,
    outcome: Outcome,
    metadata: unknown,
    release: Slot | undefined,
    next: NextClaim | undefined,
    key: string | undefined,
    holds: boolean
  ): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (record.outcome !== undefined) return Effect.void
      const offered = release?.fusedRelease?.()
      return Effect.uninterruptible(
        Effect.gen(function* () {
          let fused: FusedRelease | undefined = offered
          let written = outcome
          let unproven: { readonly outcome: Outcome; readonly used: () => void } | undefined
          if (offered !== undefined && release !== undefined) {
            const verdict = release.heldThrough === undefined ? Effect.succeed(false) : yield* release.heldThrough
            fused = { ...offered, fallback: Effect.map(verdict, (held) => held === true) }
            unproven = {
              outcome: Outcome.Requeued({ reason: lostAfterEndText(`Slot of '${key ?? release.name}'`), keepsPlace: true }),
              used: () => void (written = unproven!.outcome)
            }
          }
          yield* finalizer.finalize(job, outcome, metadata, { handlerRan: record.handlerRan, holdsSlot: holds, release: fused, next: fused === undefined ? undefined : next, unproven })
          record.outcome = written
          // the provider no longer offers the release: the statement ran it (or the slot was lost meanwhile)
          if (release !== undefined && offered !== undefined) slot.releasedByStatement = release.fusedRelease?.() === undefined
        })
      )
    })

  /** The handler's run, its time added to the attempt's record. */
  const timed = <R>(record: AttemptRecord.AttemptRecordState, run: Effect.Effect<Outcome, never, R>): Effect.Effect<Outcome, never, R> =>
    Effect.map(Effect.timed(run), ([elapsed, outcome]) => {
      record.handlerMs += Duration.toMillis(elapsed)
      return outcome
    })

  /**
   * The end of the run inside the slot (the handler and the behaviors around it), told to the gate
   * (`SlotEnd`) before the finalizing write (under a reused slot too): a slot lost after it is judged
   * at it, and a run whose slot lapsed meanwhile (its process paused or cut off past the provider's
   * deadline) is requeued, whatever its handler returned. The instant is kept in the attempt's record.
   */
  const lapseChecked =
    (record: AttemptRecord.AttemptRecordState) =>
    (outcome: Outcome): Effect.Effect<Outcome> =>
      Effect.flatMap(SlotEnd, (end) => {
        record.handlerEndedAt ??= performance.now()
        return end(outcome)
      })

  /**
   * Whether the slot the calling fiber holds admits `attempt` too: every behavior that holds a slot
   * says so (`Behavior.admitsUnder`), for the slot it holds. The admitting behaviors are the ones in
   * force around a reused slot, so a job runs under it only where its own admission would have given it
   * that slot (an admin override lowered below the slot's index sends it through the gate instead).
   */
  const admittedUnder = (attempt: Attempt): Effect.Effect<boolean> =>
    Effect.flatMap(HeldSlot, (slot) =>
      slot === undefined
        ? Effect.succeed(false)
        : Effect.reduce(outer.filter((b) => b.holdsSlot === true), () => true, (ok, b) =>
            ok && b.admitsUnder !== undefined ? b.admitsUnder(attempt, slot) : Effect.succeed(false)
          )
    )

  /** The result of an attempt that did not start. */
  const ended = (outcome: Outcome): AttemptResult => ({ outcome, waitKey: undefined, handlerMs: 0 })

  /** The attempt's span (`warp.attempt`), log annotations (job id, type, key) and duration metric. */
  const instrument =
    (job: Job) =>
    <E, R>(self: Effect.Effect<AttemptResult, E, R>): Effect.Effect<AttemptResult, E, R> => {
      const key = rowConcurrency(job)?.key
      const annotations: Record<string, unknown> = {
        [Telemetry.attributes.jobId]: job.id,
        [Telemetry.attributes.jobType]: job.type,
        [Telemetry.attributes.attempt]: job.attempt,
        [Telemetry.attributes.worker]: config.workerId
      }
      if (key !== undefined) annotations[Telemetry.attributes.key] = key
      return self.pipe(
        Effect.timed,
        Effect.tap(([elapsed, { outcome }]) =>
          Metric.update(Telemetry.attemptDurationOf(job.type, outcome._tag), Duration.toSeconds(elapsed))
        ),
        Effect.map(([, result]) => result),
        Effect.annotateLogs(annotations),
        Effect.withSpan(Telemetry.spans.attempt, { attributes: annotations }, { captureStackTrace: false })
      )
    }

  return {
    run: (job, fiber, next) =>
      instrument(job)(
        Effect.flatMap(attempt(job, fiber, undefined, next), (result) =>
          // only an attempt under a held slot hands its job back
          result === undefined ? Effect.die(new Error(`attempt of ${job.id} deferred outside a held slot`)) : Effect.succeed(result)
        )
      ),
    runUnderSlot: (job, policy, later, writes) =>
      Effect.map(attempt(job, { later, reuseSkip: 0, reuseMisses: 0 }, { policy, writes }), (result) => result !== undefined)
  }
}
