/**
 * The worker: a scoped pool of fibers that claim due jobs and run each attempt as one Effect program
 * — policy resolution, the pipeline of behaviors around the handler, and exactly one finalizing write.
 *
 * Closing the worker's scope stops claiming, lets running attempts finish for `gracePeriod`, then
 * interrupts the rest; an interrupted attempt is requeued by its finalizing write, so nothing is lost.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as JobMetadata from "../policy/JobMetadata.js"
import type { ConcurrencyPolicy } from "../policy/PolicyValues.js"
import { GlobalPolicies } from "../policy/GlobalPolicies.js"
import type { Policies } from "../policy/PolicyFamily.js"
import * as PolicyResolution from "../policy/PolicyResolution.js"
import * as RetryBehavior from "../policy/RetryBehavior.js"
import * as TimeoutBehavior from "../policy/TimeoutBehavior.js"
import { hostname } from "node:os"
import { cancelText, type FetchHint, JobStore } from "../store/JobStore.js"
import { type Attempt, CurrentAttempt, CurrentSlot, HeldSlot, type SlotInfo } from "./Attempt.js"
import { type FusedRelease, fusedRelease } from "../semaphore/SemaphoreProviderPg.js"
import type { AttemptInfo } from "./Handler.js"
import type { Job } from "./Job.js"
import { Outcome, stateOf } from "./Outcome.js"
import { type Addon, type AddonServices, type Behavior, compose } from "./Pipeline.js"
import * as Telemetry from "../observability/Telemetry.js"
import { Registry } from "./Registry.js"
import * as StoreHealth from "./StoreHealth.js"
import * as Saga from "./Saga.js"

/** Worker options. */
export interface WorkerOptions<A extends ReadonlyArray<Addon<any>> = ReadonlyArray<Addon<never>>> {
  /**
   * The addons of the pipeline (e.g. `[Concurrency.addon, RateLimitAddon.addon]`), placed by their
   * `order`; the worker needs the services they name. Without an addon, the worker ignores its family
   * (still resolved and stamped, like any policy).
   */
  readonly addons?: A
  /** Fibers running attempts at once (default 4). */
  readonly concurrency?: number
  /** Idle wait between empty fetches (default 100 ms). */
  readonly pollInterval?: Duration.DurationInput
  /** Claim lease, renewed by a heartbeat every third of it (default 30 s). */
  readonly lease?: Duration.DurationInput
  /** How long closing the scope waits for running attempts before interrupting them (default 10 s). */
  readonly gracePeriod?: Duration.DurationInput
  /** This worker's id in claims and audit entries (default random). */
  readonly workerId?: string
  /**
   * Slot reuse for Wait-mode concurrency keys — opt-in, off by default (`{}` turns it on with 64 jobs,
   * 250 ms). A fiber holding a slot of key k finalizes its job, then claims the next due job whose
   * policy is the same key, limit and mode and runs it under the same slot, until none is due or either
   * bound is reached; then it releases the slot. Off by default because an admin limit change reaches a
   * reusing holder only at its release, not at the next pickup as the spec says.
   */
  readonly slotReuse?: false | { readonly maxJobs?: number; readonly maxDuration?: Duration.DurationInput } | undefined
  /**
   * Most rows one fiber claims per fetch (default 8). A fiber starts at 1 and doubles while full
   * batches of quick jobs run uncontended; 1 turns batching off (one claim per attempt).
   */
  readonly maxBatch?: number
  /**
   * How often the worker asks the store whether an operator cancelled a job it is running (default
   * 1 s; see `JobStoreService.requestCancel`). Asked only while it holds jobs.
   */
  readonly cancelCheckInterval?: Duration.DurationInput
}

/** The concurrency policy a row carries in its metadata (stamped, or set at enqueue), if any. */
const rowConcurrency = (job: Job): { readonly key: string; readonly limit: unknown; readonly mode: unknown } | undefined => {
  const value = (job.metadata as any)?.policies?.concurrency?.value
  return typeof value?.key === "string" ? value : undefined
}

/** At most this many contended keys are sent with one fetch (the most recent ones). */
const MAX_CONTENDED_KEYS = 64

/** What one worker fiber keeps between attempts. */
interface FiberState {
  /** Claimed, not yet run. */
  readonly later: Array<Job>
  /** Wait-mode attempts to run before this fiber looks for jobs to reuse a slot again. */
  reuseSkip: number
  /** Slot-reuse look-aheads in a row that found nothing. */
  reuseMisses: number
}

/** Most rows a worker fiber claims at once (see the loop). */
const BATCH_MAX = 8

/** A batch counts as quick when its jobs took less than this each, on average. */
const BATCH_QUICK_MS = 25

/** How deep into the due rows a slot holder looks for the next job of its key. */
const SAME_SLOT_DEPTH = 256

/** The core behaviors, inside every addon: retry outside timeout. */
export const coreBehaviors: ReadonlyArray<Behavior> = [RetryBehavior.behavior, TimeoutBehavior.behavior]

/** Attempts by outcome, job type and key family, as an Effect metric (`warp_attempts_total`). */
export const attemptsTotal = Telemetry.attempts

const renderCause = (cause: Cause.Cause<unknown>): string => Cause.pretty(cause, { renderErrorCause: true })

/** A handle on a running worker. */
export interface WorkerHandle {
  readonly workerId: string
  /** Ids of the jobs this worker is running right now. */
  readonly inFlight: Effect.Effect<ReadonlyArray<string>>
}

/**
 * Starts a worker in the current scope. Requires the store, the registry and the services of the
 * addons it is given. Global defaults come from `GlobalPolicies` (a reference: none unless provided),
 * read at every attempt; saga handlers are serialized per correlation through the store's own locks
 * (`JobStore.locks`), which span every process sharing the store.
 */
export const make = <const A extends ReadonlyArray<Addon<any>> = []>(
  options: WorkerOptions<A> = {}
): Effect.Effect<WorkerHandle, never, Scope.Scope | JobStore | Registry | AddonServices<A>> =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const registry = yield* Registry
    const globalPolicies = yield* GlobalPolicies
    const semaphores = store.locks
    // The concurrency gate is the outermost behavior; the worker wraps it around the others itself so
    // that it can reuse a held slot.
    let gate: Behavior | undefined
    const addons: Array<Behavior> = []
    for (const addon of [...(options.addons ?? [])].sort((a, b) => a.order - b.order)) {
      const behavior: Behavior = yield* addon.behavior
      if (addon.name === "concurrency") gate = behavior
      else addons.push(behavior)
    }
    const innerBehaviors = [...addons, ...coreBehaviors]

    const workerId = options.workerId ?? `worker-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
    const concurrency = options.concurrency ?? 4
    const pollInterval = Duration.decode(options.pollInterval ?? "100 millis")
    const lease = Duration.decode(options.lease ?? "30 seconds")
    const grace = Duration.decode(options.gracePeriod ?? "10 seconds")
    const inFlight = new Set<string>()
    const stopping = yield* Deferred.make<void>()
    const maxBatch = Math.max(1, Math.floor(options.maxBatch ?? BATCH_MAX))
    const reuse =
      options.slotReuse === undefined || options.slotReuse === false
        ? undefined
        : {
            maxJobs: Math.max(1, options.slotReuse?.maxJobs ?? 64),
            maxMs: Duration.toMillis(Duration.decode(options.slotReuse?.maxDuration ?? "250 millis"))
          }

    const health = StoreHealth.make(workerId)
    const cancelCheck = Duration.decode(options.cancelCheckInterval ?? "1 second")
    /** Cancels asked for jobs this worker holds: the cause, by job id. */
    const cancelAsked = new Map<string, string>()
    /** The concurrency key of each running handler (it holds a slot of it), by job id. */
    const runningKeys = new Map<string, string>()
    /** The running handlers' cancel signals, by job id. */
    const cancelSignals = new Map<string, Deferred.Deferred<string>>()
    /** Store calls that failed are retried quickly (the store's return is noticed within half a second). */
    const storeRetry = Schedule.exponential("50 millis").pipe(Schedule.union(Schedule.spaced("500 millis")))
    /** Jobs whose handler started in their current claim (a claim whose handler never ran is not an attempt). */
    const ran = new Set<string>()
    /** When each claimed job's lease runs out unless a heartbeat renews it (local clock, epoch ms). */
    const leaseUntil = new Map<string, number>()
    const leaseMs = Duration.toMillis(lease)
    const heartbeatMs = Math.max(10, leaseMs / 3)

    /**
     * The attempt's finalizing write. A finished attempt's outcome is kept until it is written: the write
     * is retried for as long as the store does not answer, and it lands only if this attempt still owns
     * the row (the statement checks worker and attempt), so a late write never overrides a newer
     * attempt. If the store answers that the claim was lost meanwhile (the lease ran out during an outage
     * and another attempt took the job), the trail says so. Only a worker that is shutting down gives
     * up, once the lease has run out: the lease then recovers the job.
     */
    const finalize = (job: Job, outcome: Outcome, metadata: unknown, release?: FusedRelease) =>
      Effect.gen(function* () {
        let failedAt: number | undefined
        let delay = 50
        let rejected = 0
        // the slot's release goes with the first try only: a write retried after that leaves the slot to the scope
        let fused = release
        while (true) {
          const result = yield* Effect.either(
            health.observe(store.finalize({ job, workerId, outcome, metadata, handlerRan: ran.has(job.id), release: fused }))
          )
          fused = undefined
          const now = yield* Clock.currentTimeMillis
          if (result._tag === "Right") {
            if (failedAt !== undefined) yield* Metric.incrementBy(StoreHealth.finalizesPending, -1)
            ran.delete(job.id)
            if (result.right) {
              yield* Effect.annotateCurrentSpan(Telemetry.attributes.outcome, outcome._tag)
              yield* Metric.increment(Metric.tagged(Telemetry.tagged(attemptsTotal, job.type, rowConcurrency(job)?.key), "outcome", outcome._tag))
            } else if (failedAt !== undefined) {
              yield* lostInOutage(job, outcome, (now - failedAt) / 1000)
            } else {
              yield* Effect.logWarning(`claim on ${job.id} lost before finalize`)
            }
            return
          }
          if (failedAt === undefined) {
            failedAt = now
            yield* Metric.incrementBy(StoreHealth.finalizesPending, 1)
          }
          // a statement the server keeps rejecting is not an outage: after a few tries the lease recovers the job
          if (!StoreHealth.isOutage(result.left) && ++rejected >= 8) {
            yield* Metric.incrementBy(StoreHealth.finalizesPending, -1)
            inFlight.delete(job.id)
            ran.delete(job.id)
            return yield* Effect.logError(`finalize of ${job.id} rejected by the job store; the lease will recover it`, result.left)
          }
          if ((yield* Deferred.isDone(stopping)) && now >= (leaseUntil.get(job.id) ?? 0)) {
            yield* Metric.incrementBy(StoreHealth.finalizesPending, -1)
            ran.delete(job.id)
            return yield* Effect.logError(
              `result of attempt ${job.attempt} of ${job.id} (${outcome._tag}) not written: the job store was unreachable until the worker stopped; the lease will recover the job`
            )
          }
          yield* Effect.sleep(delay)
          delay = Math.min(500, delay * 2)
        }
      }).pipe(Effect.uninterruptible)

    /** The trail of a job whose finished attempt's result could not be written before another attempt took it. */
    const lostInOutage = (job: Job, outcome: Outcome, seconds: number) =>
      Effect.gen(function* () {
        const now = yield* Effect.either(store.get(job.id))
        const current = now._tag === "Right" && now.right._tag === "Some" ? now.right.value.job : undefined
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

    /** The outcome of an attempt an operator cancelled (its handler interrupted, if it had started). */
    const cancelled = (job: Job, cause: string, running: boolean): Outcome =>
      Outcome.Deleted({ reason: cancelText(cause, running ? { attempt: job.attempt } : undefined) })

    /** A cancel asked for `job` before its handler started, if any. */
    const cancelOf = (job: Job): string | undefined => cancelAsked.get(job.id) ?? job.cancelRequested

    /**
     * Runs the handler, unless the job was cancelled; a cancel asked while it runs interrupts it (its
     * finalizers run first) and the attempt ends as Deleted.
     */
    const runHandler = (attempt: Attempt): Effect.Effect<Outcome> =>
      Effect.suspend(() => {
        const job = attempt.job
        const asked = cancelOf(job)
        if (asked !== undefined) return Effect.succeed(cancelled(job, asked, false))
        ran.add(job.id)
        const key = attempt.policies.concurrency?.key
        if (key !== undefined) runningKeys.set(job.id, key)
        const signal = Deferred.unsafeMake<string>(FiberId.none)
        cancelSignals.set(job.id, signal)
        return Effect.raceFirst(
          handlerOutcome(attempt),
          Effect.map(Deferred.await(signal), (reason) => cancelled(job, reason, true))
        ).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              cancelSignals.delete(job.id)
              runningKeys.delete(job.id)
            })
          )
        )
      })

    const handlerOutcome = (attempt: Attempt): Effect.Effect<Outcome> => Effect.flatMap(CurrentSlot, (slot) => handlerOutcomeIn(attempt, slot))

    const handlerOutcomeIn = (attempt: Attempt, slot: SlotInfo | undefined): Effect.Effect<Outcome> => {
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

    const runSaga = (attempt: Attempt, h: Saga.SagaHandler): Effect.Effect<Outcome, never, Scope.Scope> =>
      Effect.gen(function* () {
        const name = Saga.lockName(h.contract.name, h.correlate(attempt.payload))
        const slot = yield* semaphores.tryAcquire(name, 1, 0)
        if (Option.isNone(slot)) {
          return Outcome.Requeued({ reason: `Saga correlation '${name}' busy`, at: new Date((yield* Clock.currentTimeMillis) + 50) })
        }
        return yield* runHandler(attempt)
      }).pipe(Effect.catchAll((e) => Effect.succeed(Outcome.Failed({ error: e.message }))))

    /** Prepares an attempt, or says why the job cannot run. */
    const prepare = (job: Job, now: Date, globals: Policies): Either.Either<{ attempt: Attempt; metadata: unknown }, string> => {
      const registered = registry.lookup(job.type, job.handler)
      if (Option.isNone(registered)) {
        return Either.left(
          `Unknown job type '${job.type}'${job.handler === null ? "" : ` (handler '${job.handler}')`}: no handler is registered for it in worker ${workerId}`
        )
      }
      const handler = registered.value.handler
      const placement = PolicyResolution.checkPlacement(handler)
      if (placement !== undefined) return Either.left(placement)
      const contract = (handler as { contract: any }).contract
      const payload = Schema.decodeUnknownEither(contract.schema as Schema.Schema<unknown, unknown>)(job.payload)
      if (Either.isLeft(payload)) {
        return Either.left(`Payload does not match the schema of '${job.type}': ${ParseResult.TreeFormatter.formatErrorSync(payload.left)}`)
      }
      const stored = JobMetadata.decode(job.metadata)
      if (Either.isLeft(stored)) return Either.left(`Job metadata is invalid: ${stored.left}`)
      const resolution = PolicyResolution.resolve({ stored: stored.right, handler, contract, globals, now, payload: payload.right })
      if (resolution.failure !== undefined) return Either.left(resolution.failure)
      return Either.right({
        attempt: { job, workerId, registered: registered.value, payload: payload.right, policies: resolution.effective },
        metadata: JobMetadata.encode(resolution.metadata)
      })
    }

    /**
     * A claim whose lease may have run out before its handler starts (its reply came back late, or the
     * claim waited behind other work past a lease no heartbeat renewed) is not started: the row may
     * already be another worker's. It goes back to the queue through the finalizing write, which lands
     * only if this claim still owns the row, and takes no attempt (its handler never ran).
     */
    const claimLapsed = (job: Job, now: number): Outcome | undefined => {
      const until = leaseUntil.get(job.id)
      return until !== undefined && now >= until
        ? Outcome.Requeued({ reason: `Claim of attempt ${job.attempt} lapsed before its handler started (lease ${leaseMs} ms); back to the queue` })
        : undefined
    }

    /** The interrupted attempt's finalizing write: back to the queue, nothing lost. */
    const requeueInterrupted = (job: Job) =>
      finalize(job, Outcome.Requeued({ reason: `Attempt interrupted (worker ${workerId} shutting down)` }), job.metadata)

    const defectToFailed = Effect.catchAllDefect((d: unknown) => Effect.succeed(Outcome.Failed({ error: `Defect in pipeline: ${String(d)}` })))

    /**
     * Runs `job` under the slot of `policy` this fiber holds, if its resolved policy is exactly
     * `policy`; otherwise hands it to `later` (run once the slot is released) and says false.
     */
    const runUnderSlot = (job: Job, policy: ConcurrencyPolicy, later: Array<Job>): Effect.Effect<boolean> => {
      let done = false
      return Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const lapsed = claimLapsed(job, now)
        if (lapsed !== undefined) {
          yield* Effect.uninterruptible(Effect.tap(finalize(job, lapsed, job.metadata), () => (done = true)))
          return true
        }
        const prepared = prepare(job, new Date(now), yield* globalPolicies.current)
        if (Either.isLeft(prepared)) {
          yield* Effect.uninterruptible(Effect.tap(finalize(job, Outcome.Failed({ error: prepared.left }), job.metadata), () => (done = true)))
          return true
        }
        const { attempt, metadata } = prepared.right
        const p = attempt.policies.concurrency
        if (attempt.registered.handler._tag === "SagaHandler" || p?.key !== policy.key || p.limit !== policy.limit || p.mode !== "Wait") {
          done = true
          later.push(job)
          return false
        }
        const outcome = yield* Effect.scoped(compose(innerBehaviors, attempt, runHandler(attempt))).pipe(defectToFailed)
        yield* Effect.uninterruptible(Effect.tap(finalize(job, outcome, metadata), () => (done = true)))
        return true
      }).pipe(
        Effect.onInterrupt(() => (done ? Effect.void : requeueInterrupted(job))),
        Effect.ensuring(Effect.sync(() => later.includes(job) || inFlight.delete(job.id)))
      )
    }

    /**
     * While this fiber holds a slot of `policy`: the next due jobs of it, under the same slot. Claims
     * grow 1, 2, 4 .. `maxBatch` rows at a time (the time bound is checked before each claim, so a chain
     * may run up to `maxBatch` - 1 jobs past it); rows of another policy run after the release, through the gate, and
     * claimed rows are handed back to the queue if the fiber is interrupted.
     */
    const reuseSlot = (policy: ConcurrencyPolicy, later: Array<Job>): Effect.Effect<number> => {
      const claimed: Array<Job> = []
      let ran = 0
      return Effect.gen(function* () {
        if (reuse === undefined) return 0
        const start = yield* Clock.currentTimeMillis
        const hint: FetchHint = { contended: [], sameSlot: { key: policy.key, limit: policy.limit, depth: SAME_SLOT_DEPTH } }
        let batch = 1
        while (ran < reuse.maxJobs) {
          const over = () =>
            Effect.map(
              Effect.all([Deferred.isDone(stopping), Clock.currentTimeMillis]),
              ([stop, now]) => stop || now - start >= reuse.maxMs
            )
          if (yield* over()) return ran
          const jobs = yield* fetchMany(Math.min(batch, reuse.maxJobs - ran), hint)
          if (jobs.length === 0) return ran
          for (const job of jobs) inFlight.add(job.id)
          claimed.push(...jobs)
          while (claimed.length > 0) {
            const job = claimed[0]!
            const row = rowConcurrency(job)
            // a row of another policy (the store ignored the hint), or the worker stopping: after the release
            if (row?.key !== policy.key || row.limit !== policy.limit || row.mode !== "Wait" || (yield* Deferred.isDone(stopping))) {
              later.push(...claimed.splice(0))
              return ran
            }
            claimed.shift()
            if (!(yield* runUnderSlot(job, policy, later))) {
              later.push(...claimed.splice(0))
              return ran
            }
            ran++
          }
          batch = Math.min(maxBatch, batch * 2)
        }
        return ran
      }).pipe(
        Effect.onInterrupt(() =>
          Effect.forEach(claimed.splice(0), (job) =>
            finalize(job, Outcome.Requeued({ reason: `Claim released (worker ${workerId} interrupted)` }), job.metadata).pipe(
              Effect.ensuring(Effect.sync(() => inFlight.delete(job.id)))
            )
          )
        )
      )
    }

    /**
     * Runs one attempt (and, holding a Wait-mode slot, the jobs that reuse it); says the attempt's
     * outcome and its Wait-mode key, if any. Jobs claimed that cannot reuse the slot go to
     * `fiber.later`. A fiber whose slots found nothing to reuse tries again only after 1, 3, 7 ..
     * 31 more attempts, so keys spread thin over a backlog do not pay a look-ahead per job.
     */
    const runAttempt = (job: Job, fiber: FiberState): Effect.Effect<{ readonly outcome: Outcome; readonly waitKey: string | undefined }> => {
      const later = fiber.later
      let recorded: Outcome | undefined
      const finalizeOnce = (outcome: Outcome, metadata: unknown, release?: FusedRelease) =>
        recorded !== undefined
          ? Effect.void
          : Effect.uninterruptible(Effect.tap(finalize(job, outcome, metadata, release), () => (recorded = outcome)))
      /** Inside the gate: the finalizing write that also releases the held slot, when the store can run it so. */
      const finalizeReleasing = (outcome: Outcome, metadata: unknown) =>
        Effect.flatMap(HeldSlot, (slot) => {
          const release = slot === undefined ? undefined : fusedRelease(slot)
          return release === undefined ? Effect.void : finalizeOnce(outcome, metadata, release)
        })
      return Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const lapsed = claimLapsed(job, nowMs)
        if (lapsed !== undefined) {
          yield* finalizeOnce(lapsed, job.metadata)
          return { outcome: lapsed, waitKey: undefined }
        }
        const asked = cancelOf(job)
        if (asked !== undefined) {
          const outcome = cancelled(job, asked, false)
          yield* finalizeOnce(outcome, job.metadata)
          return { outcome, waitKey: undefined }
        }
        const now = new Date(nowMs)
        const prepared = prepare(job, now, yield* globalPolicies.current)
        if (Either.isLeft(prepared)) {
          const failed = Outcome.Failed({ error: prepared.left })
          yield* finalizeOnce(failed, job.metadata)
          return { outcome: failed, waitKey: undefined }
        }
        const { attempt, metadata } = prepared.right
        const h = attempt.registered.handler
        const policy = attempt.policies.concurrency
        const wait = h._tag !== "SagaHandler" && policy?.mode === "Wait" ? policy : undefined
        if (policy !== undefined) yield* Effect.annotateCurrentSpan({ [Telemetry.attributes.key]: policy.key, [Telemetry.attributes.limit]: policy.limit })
        let program: Effect.Effect<Outcome, never, Scope.Scope>
        if (h._tag === "SagaHandler") {
          program = runSaga(attempt, h)
        } else {
          const body = compose(innerBehaviors, attempt, runHandler(attempt))
          // holding the slot: finalize this attempt first, then let the next jobs of the key reuse it
          const next =
            wait === undefined || wait.total !== undefined || reuse === undefined || fiber.reuseSkip-- > 0
              ? policy === undefined
                ? body
                : Effect.tap(body, (outcome) => finalizeReleasing(outcome, metadata))
              : Effect.tap(body, (outcome) =>
                  Effect.zipRight(
                    finalizeOnce(outcome, metadata),
                    Effect.map(reuseSlot(wait, later), (ran) => {
                      fiber.reuseMisses = ran > 0 ? 0 : Math.min(5, fiber.reuseMisses + 1)
                      fiber.reuseSkip = 2 ** fiber.reuseMisses - 1
                    })
                  )
                )
          program = gate === undefined ? next : gate.wrap(attempt, next)
        }
        const outcome = yield* Effect.scoped(program).pipe(
          defectToFailed,
          policy === undefined ? identity : Effect.annotateLogs(Telemetry.attributes.key, policy.key)
        )
        yield* finalizeOnce(outcome, metadata)
        return { outcome: recorded ?? outcome, waitKey: wait?.key }
      }).pipe(
        Effect.onInterrupt(() => (recorded !== undefined ? Effect.void : requeueInterrupted(job))),
        Effect.ensuring(Effect.sync(() => inFlight.delete(job.id))),
        instrumentAttempt(job)
      )
    }

    /** The attempt's span (`warp.attempt`), log annotations (job id, type, key) and duration metric. */
    const instrumentAttempt =
      (job: Job) =>
      <A extends { readonly outcome: Outcome }, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
        const key = rowConcurrency(job)?.key
        const annotations: Record<string, unknown> = {
          [Telemetry.attributes.jobId]: job.id,
          [Telemetry.attributes.jobType]: job.type,
          [Telemetry.attributes.attempt]: job.attempt,
          [Telemetry.attributes.worker]: workerId
        }
        if (key !== undefined) annotations[Telemetry.attributes.key] = key
        return self.pipe(
          Effect.timed,
          Effect.tap(([elapsed, { outcome }]) =>
            Metric.update(
              Metric.tagged(Metric.tagged(Telemetry.attemptDuration, "type", job.type), "outcome", outcome._tag),
              Duration.toSeconds(elapsed)
            )
          ),
          Effect.map(([, result]) => result),
          Effect.annotateLogs(annotations),
          Effect.withSpan(Telemetry.spans.attempt, { attributes: annotations })
        )
      }

    /**
     * Claims up to `n` rows. Their local lease deadline counts from when the claiming statement was
     * sent, not from when its reply arrived: a reply that comes back late (a stalled connection, a
     * paused process) leaves a claim that may already have run out on the server and been taken by
     * another worker, and {@link claimLapsed} keeps its handler from starting.
     */
    const fetchMany = (n: number, hint: FetchHint = { contended: [] }) =>
      Effect.zip(Clock.currentTimeMillis, store.fetch(workerId, n, lease, hint)).pipe(
        Effect.tap(([, rows]) => Effect.annotateCurrentSpan(Telemetry.attributes.claimed, rows.length)),
        Effect.withSpan(Telemetry.spans.claim, { attributes: { [Telemetry.attributes.worker]: workerId } }),
        health.observe,
        Effect.retry(storeRetry),
        Effect.orDie,
        Effect.map(([sent, rows]) => {
          for (const row of rows) leaseUntil.set(row.id, sent + leaseMs)
          return rows
        })
      )

    const idle = Effect.raceFirst(Effect.sleep(pollInterval), Deferred.await(stopping))
    const firstSkipMs = Math.max(1, Duration.toMillis(pollInterval))
    const maxSkipMs = firstSkipMs * 16

    const loop: Effect.Effect<void> = Effect.suspend(() => {
      // Per fiber: Wait-mode keys this fiber found full, skipped at fetch until `until`; the skip
      // doubles while the key stays full for this fiber and ends once it gets a slot of it. Other
      // fibers (the holder first of all) keep running the key's jobs.
      const skipping = new Map<string, { until: number; ms: number }>()
      // claimed, not yet run: rows claimed while holding a slot they could not reuse, and the rest of
      // a batch
      const fiber: FiberState = { later: [], reuseSkip: 0, reuseMisses: 0 }
      const later = fiber.later
      // rows claimed per fetch: doubles (up to BATCH_MAX) while full batches of quick jobs run with no
      // contention, back to 1 otherwise, so slow or contended jobs are never held back in a batch
      let batch = 1
      return Effect.gen(function* () {
        while (!(yield* Deferred.isDone(stopping))) {
          let jobs: Array<Job> = later.splice(0)
          let fetched = 0
          if (jobs.length === 0) {
            const now = yield* Clock.currentTimeMillis
            const contended: Array<string> = []
            for (const [key, s] of skipping) {
              if (s.until > now) contended.push(key)
              else if (now - s.until > maxSkipMs) skipping.delete(key)
            }
            jobs = [...(yield* fetchMany(batch, { contended: contended.slice(-MAX_CONTENDED_KEYS) }))]
            fetched = jobs.length
            for (const job of jobs) inFlight.add(job.id)
          }
          if (jobs.length === 0) {
            batch = 1
            yield* idle
            continue
          }
          const started = yield* Clock.currentTimeMillis
          let smooth = true
          let contendedUnknown = false
          while (jobs.length > 0) {
            if (yield* Deferred.isDone(stopping)) {
              later.push(...jobs.splice(0))
              break
            }
            const job = jobs.shift()!
            // the store ignored the hint: do not spin on a key this fiber just found full
            const rowKey = rowConcurrency(job)?.key
            if (rowKey !== undefined && (skipping.get(rowKey)?.until ?? 0) > (yield* Clock.currentTimeMillis)) yield* idle
            inFlight.add(job.id)
            const { outcome, waitKey } = yield* runAttempt(job, fiber).pipe(
              // interrupted mid-batch: the rows not started go back to the queue with the rest
              Effect.onInterrupt(() => Effect.sync(() => later.push(...jobs.splice(0))))
            )
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
            const quick = (yield* Clock.currentTimeMillis) - started < BATCH_QUICK_MS * fetched
            batch = smooth && quick && fetched === batch ? Math.min(maxBatch, batch * 2) : 1
          }
          // An immediate requeue for another reason is due again at once: back off one poll interval
          // so this fiber does not spin on it.
          if (contendedUnknown) yield* idle
        }
      }).pipe(
        // claimed but not started (stopping, or interrupted): back to the queue
        Effect.ensuring(
          Effect.suspend(() =>
            Effect.forEach(later.splice(0), (job) =>
              finalize(job, Outcome.Requeued({ reason: `Claim released (worker ${workerId} shutting down)` }), job.metadata).pipe(
                Effect.ensuring(Effect.sync(() => inFlight.delete(job.id)))
              )
            )
          )
        )
      )
    })

    /** Renews the leases of the jobs in flight; a failed renewal is retried until the store answers. */
    const heartbeat = Effect.suspend(() => {
      const ids = [...inFlight]
      return Effect.flatMap(Clock.currentTimeMillis, (started) =>
        health.observe(store.heartbeat(workerId, ids, lease)).pipe(
          Effect.retry(storeRetry),
          Effect.tap(() =>
            Effect.sync(() => {
              for (const id of ids) if (inFlight.has(id)) leaseUntil.set(id, started + leaseMs)
              for (const id of leaseUntil.keys()) if (!inFlight.has(id)) leaseUntil.delete(id)
            })
          ),
          Effect.zipRight(report)
        )
      )
    }).pipe(Effect.repeat(Schedule.spaced(Duration.millis(heartbeatMs))))

    /** This worker's entry in the store's registry (`JobStoreService.workers`), renewed with each heartbeat. */
    const report = Effect.suspend(() => {
      const outage = health.lastOutage()
      const held = new Map<string, number>()
      for (const key of runningKeys.values()) held.set(key, (held.get(key) ?? 0) + 1)
      return store.reportWorker({
        slots: [...held].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, n]) => ({ key, held: n })),
        workerId,
        host: hostname(),
        pid: process.pid,
        lanes: concurrency,
        inFlight: inFlight.size,
        heartbeatMs,
        lastOutage: outage === undefined ? undefined : { ms: outage.ms, endedAt: new Date(outage.endedAt) }
      })
    }).pipe(health.observe, Effect.catchAll((e) => Effect.logDebug("worker registry report failed", e)))

    /** Learns of the cancels asked for jobs this worker holds, and signals their handlers. */
    const cancelWatch = Effect.suspend(() => {
      for (const id of cancelAsked.keys()) if (!inFlight.has(id)) cancelAsked.delete(id)
      const ids = [...inFlight]
      if (ids.length === 0) return Effect.void
      return store.cancelRequests(workerId, ids).pipe(
        Effect.flatMap((asked) =>
          Effect.forEach(asked, ({ cause, id }) =>
            Effect.suspend(() => {
              if (!inFlight.has(id) || cancelAsked.has(id)) return Effect.void
              cancelAsked.set(id, cause)
              const signal = cancelSignals.get(id)
              return Effect.zipRight(
                Effect.logInfo(`cancel of ${id}: ${cause}`),
                signal === undefined ? Effect.void : Deferred.succeed(signal, cause)
              )
            })
          )
        ),
        // the store is out of reach: the heartbeat and the finalize report it; asked again at the next tick
        Effect.catchAll(() => Effect.void)
      )
    }).pipe(Effect.repeat(Schedule.spaced(cancelCheck)))

    const fibers = yield* Effect.forEach(Array.from({ length: concurrency }), () => Effect.forkDaemon(loop))
    const beat = yield* Effect.forkDaemon(heartbeat)
    const watch = yield* Effect.forkDaemon(cancelWatch)

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Deferred.succeed(stopping, undefined)
        const all = Fiber.joinAll(fibers)
        // finalizers run uninterruptibly: the wait itself must be interruptible for the timeout to fire
        const done = yield* Effect.timeout(Effect.interruptible(all), grace).pipe(Effect.option)
        if (Option.isNone(done)) yield* Fiber.interruptAll(fibers)
        yield* Fiber.interrupt(beat)
        yield* Fiber.interrupt(watch)
        // a worker that cannot reach its store leaves its entry, shown as stale
        yield* store.removeWorker(workerId).pipe(Effect.timeout("2 seconds"), Effect.ignore)
      })
    )

    return { workerId, inFlight: Effect.sync(() => [...inFlight]) }
  })

/** A worker as a Layer: starts when the layer is built, shuts down gracefully when it is released. */
export const layer = <const A extends ReadonlyArray<Addon<any>> = []>(
  options: WorkerOptions<A> = {}
): Layer.Layer<never, never, JobStore | Registry | AddonServices<A>> => Layer.scopedDiscard(make(options))
