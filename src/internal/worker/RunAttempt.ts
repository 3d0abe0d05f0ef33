/**
 * One attempt as one Effect program over per-attempt scoped layers:
 *
 *   JobContext (the claimed row) → ResolvedPolicy (the stamp, or resolved once) → Stamp (what the
 *   finalizing write persists) → behaviors, outermost first (the concurrency slot is held by the
 *   behavior that admits, in the attempt's scope) → handler → the finalizing write.
 *
 * Inside a held slot the finalizing write also releases it, when the store can (the built-in
 * PostgreSQL store and provider on one client), and carries the lane's next claim when it is the last
 * of its batch; otherwise the scope's finalizer releases it — on
 * success, failure, defect, timeout and interruption alike. An interrupted attempt is requeued by its
 * finalizing write, so nothing is lost.
 *
 * @since 0.3.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { identity } from "effect/Function"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import { HeldSlot, SlotLapse } from "../attempt/Attempt.js"
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
import { fusedRelease } from "../semaphore/SemaphoreProviderPg.js"
import type { SemaphoreProviderService } from "../semaphore/SemaphoreProvider.js"
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

/** Builds a worker's attempt runner. */
export const make = (options: RunnerOptions): AttemptRunner => {
  const { finalizer, state } = options
  const { config } = state
  // the behaviors up to the last one that holds a slot run outside it; the rest (and the handler) inside
  let lastHolder = -1
  options.behaviors.forEach((b, i) => {
    if (b.holdsSlot === true) lastHolder = i
  })
  const outer = options.behaviors.slice(0, lastHolder + 1)
  const inner = options.behaviors.slice(lastHolder + 1)

  /**
   * The attempt's layers — its context, its resolved policy (over the context), its stamp (over the
   * policy) — built for each attempt and provided to its program as one context. They are built by the
   * functions their `layer`s wrap (`ResolvedPolicy.resolve`, `Stamp.of`) rather than through
   * `Effect.provide(layer)`: the three layers hold no resource to release, and building them as layers
   * (a memo map, a scope and deferreds per layer) cost about 180 µs of CPU per attempt, a fifth of a
   * no-op attempt's cost, for the same services (see bench/README.md, "Profiling the keyless path").
   */
  const withLayers =
    (job: Job, startedAt: Date) =>
    <A, E>(program: Effect.Effect<A, E, JobContext.JobContext | ResolvedPolicy.ResolvedPolicy | Stamp.Stamp>) =>
      Effect.flatMap(GlobalPolicies, (globals) =>
        Effect.flatMap(globals.current, (current): Effect.Effect<A, E | ResolvedPolicy.Unrunnable> => {
          const context: JobContext.JobContextValue = { job, workerId: config.workerId, startedAt }
          const resolved = ResolvedPolicy.resolve(context, options.registry, current, options.enforced)
          return Result.isFailure(resolved)
            ? Effect.fail(resolved.failure)
            : Effect.provideContext(
                program,
                Context.make(JobContext.JobContext, context).pipe(
                  Context.add(ResolvedPolicy.ResolvedPolicy, resolved.success),
                  Context.add(Stamp.Stamp, Stamp.of(resolved.success))
                )
              )
        })
      )

  /**
   * Whether the slot the calling fiber holds admits `attempt` too: every behavior that holds a slot
   * says so (`Behavior.admitsUnder`), for the slot it holds. The admitting behaviors are the ones in
   * force around a reused slot, so a job runs under it only where its own admission would have given it
   * that slot (an admin override lowered below the slot's index sends it through the gate instead).
   */
  const admittedUnder = (attempt: Parameters<Behavior["wrap"]>[0]): Effect.Effect<boolean> =>
    Effect.flatMap(HeldSlot, (slot) =>
      slot === undefined
        ? Effect.succeed(false)
        : Effect.reduce(outer.filter((b) => b.holdsSlot === true), () => true, (ok, b) =>
            ok && b.admitsUnder !== undefined ? b.admitsUnder(attempt, slot) : Effect.succeed(false)
          )
    )

  /**
   * A claim whose lease may have run out before its handler starts (its reply came back late, or the
   * claim waited behind other work past a lease no heartbeat renewed) is not started: the row may
   * already be another worker's. It goes back to the queue through the finalizing write, which lands
   * only if this claim still owns the row, and takes no attempt (its handler never ran).
   */
  const claimLapsed = (job: Job, now: number): Outcome | undefined => {
    const until = state.leaseUntil.get(job.id)
    return until !== undefined && now >= until
      ? Outcome.Requeued({
        reason: `Claim of attempt ${job.attempt} lapsed before its handler started (lease ${config.leaseMs} ms); back to the queue`,
        keepsPlace: true
      })
      : undefined
  }

  /**
   * A run whose slot lapsed meanwhile (its process paused or cut off past the provider's deadline) is
   * requeued, whatever its handler returned: asked of the gate's `SlotLapse` after the handler, before
   * the finalizing write (under a reused slot too).
   */
  const lapseChecked = (outcome: Outcome): Effect.Effect<Outcome> =>
    Effect.map(
      Effect.flatMap(SlotLapse, (check) => check),
      (reason) => (reason === undefined ? outcome : Outcome.Requeued({ reason, keepsPlace: true }))
    )

  /** The interrupted attempt's finalizing write: back to the queue, nothing lost. */
  const requeueInterrupted = (job: Job) =>
    finalizer.finalize(job, Outcome.Requeued({ reason: `Attempt interrupted (worker ${config.workerId} shutting down)`, keepsPlace: true }), job.metadata)

  /**
   * The attempt. `under`: the Wait-mode slot the calling fiber holds; the job runs under it only if its
   * policy is exactly that one and the slot admits it (else it goes to `later`, and the result is
   * undefined), and its finalizing write is forked into `under.writes`.
   */
  const attempt = (
    job: Job,
    fiber: FiberState,
    under: { readonly policy: ConcurrencyPolicy; readonly writes: Array<Fiber.Fiber<void>> } | undefined,
    next?: NextClaim
  ): Effect.Effect<AttemptResult | undefined> => {
    let recorded: Outcome | undefined
    /** Under a reused slot: the finalizing write, forked (it owns the job's `inFlight` entry until it lands). */
    let writing = false
    let deferred = false
    let handlerMs = 0
    /** The handler's run, timed (the lane sizes its claims by how long handlers take, not by its own wall time). */
    const timed = <R>(run: Effect.Effect<Outcome, never, R>): Effect.Effect<Outcome, never, R> =>
      Effect.map(Effect.timed(run), ([elapsed, outcome]) => {
        handlerMs += Duration.toMillis(elapsed)
        return outcome
      })
    const handler = (a: Parameters<typeof runHandler>[1], keySource: string | undefined) => timed(runHandler(state, a, keySource))
    const finalizeOnce = (outcome: Outcome, metadata: unknown, release?: Parameters<Finalizer["finalize"]>[3]) =>
      recorded !== undefined
        ? Effect.void
        : Effect.uninterruptible(
            Effect.map(finalizer.finalize(job, outcome, metadata, release, release === undefined ? undefined : next), () => {
              recorded = outcome
            })
          )
    const ended = (outcome: Outcome, metadata: unknown): Effect.Effect<AttemptResult> =>
      Effect.as(finalizeOnce(outcome, metadata), { outcome, waitKey: undefined, handlerMs: 0 })

    /** The program over the attempt's layers. */
    const program = Effect.gen(function* () {
      const { attempt, metadata: resolved } = yield* ResolvedPolicy.ResolvedPolicy
      const { metadata } = yield* Stamp.Stamp
      const h = attempt.registered.handler
      const policy = attempt.policies.concurrency
      // where the key in force was declared (the stamp this attempt writes says it)
      const keySource = resolved.policies.concurrency?.source ?? (policy === undefined ? undefined : "global")
      if (under !== undefined) {
        if (
          h._tag === "SagaHandler" || policy?.key !== under.policy.key || policy.limit !== under.policy.limit || policy.mode !== "Wait" ||
          !(yield* admittedUnder(attempt))
        ) {
          deferred = true
          fiber.later.push(job)
          return undefined
        }
        const outcome = yield* Effect.scoped(Effect.flatMap(compose(inner, attempt, handler(attempt, keySource)), lapseChecked)).pipe(defectToFailed)
        // the next job of the chain runs while this write is in flight (the slot is held until every
        // write of the chain has landed), so the writes of a chain share the batched finalizing statements
        // (forked and recorded in one uninterruptible step: an interruption sees either no write, and
        // requeues the job, or the write on its way)
        yield* Effect.uninterruptible(
          Effect.map(
            Effect.forkDetach(finalizeOnce(outcome, metadata).pipe(Effect.ensuring(Effect.sync(() => state.inFlight.delete(job.id)))), { uninterruptible: "inherit" }),
            (write) => {
              writing = true
              under.writes.push(write)
            }
          )
        )
        return { outcome, waitKey: policy.key, handlerMs }
      }
      const wait = h._tag !== "SagaHandler" && policy?.mode === "Wait" ? policy : undefined
      if (policy !== undefined) yield* Effect.annotateCurrentSpan({ [Telemetry.attributes.key]: policy.key, [Telemetry.attributes.limit]: policy.limit })
      let body: Effect.Effect<Outcome, never, Scope.Scope>
      if (h._tag === "SagaHandler") {
        body = timed(runSaga(state, options.locks, attempt, h))
      } else {
        const inside = Effect.flatMap(compose(inner, attempt, handler(attempt, keySource)), lapseChecked)
        // holding the slot: finalize first (releasing the slot in the same statement when the store can),
        // or, reusing the slot, finalize and let the next jobs of the key run under it
        const reusing = wait !== undefined && wait.total === undefined && config.reuse !== undefined && !(fiber.reuseSkip-- > 0)
        const inSlot = reusing
          ? Effect.tap(inside, (outcome) =>
              Effect.andThen(
                finalizeOnce(outcome, metadata),
                Effect.map(options.reuseSlot(wait, fiber.later), (ran) => {
                  fiber.reuseMisses = ran > 0 ? 0 : Math.min(5, fiber.reuseMisses + 1)
                  fiber.reuseSkip = 2 ** fiber.reuseMisses - 1
                })
              )
            )
          : policy === undefined
            ? inside
            : Effect.tap(inside, (outcome) =>
                Effect.flatMap(HeldSlot, (slot) => {
                  const release = slot === undefined ? undefined : fusedRelease(slot)
                  return release === undefined ? Effect.void : finalizeOnce(outcome, metadata, release)
                })
              )
        body = compose(outer, attempt, inSlot)
      }
      const outcome = yield* Effect.scoped(body).pipe(
        defectToFailed,
        policy === undefined ? identity : Effect.annotateLogs(Telemetry.attributes.key, policy.key)
      )
      yield* finalizeOnce(outcome, metadata)
      return { outcome: recorded ?? outcome, waitKey: wait?.key, handlerMs }
    })

    return Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const lapsed = claimLapsed(job, now)
      if (lapsed !== undefined) return yield* ended(lapsed, job.metadata)
      const asked = cancelOf(state, job)
      if (asked !== undefined) return yield* ended(cancelled(job, asked, false), job.metadata)
      return yield* program.pipe(
        withLayers(job, new Date(now)),
        Effect.catchTag("Unrunnable", (e) => ended(Outcome.Failed({ error: e.reason }), job.metadata))
      )
    }).pipe(
      Effect.onInterrupt(() => (recorded !== undefined || writing || deferred ? Effect.void : requeueInterrupted(job))),
      Effect.ensuring(Effect.sync(() => deferred || writing || state.inFlight.delete(job.id)))
    )
  }

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
