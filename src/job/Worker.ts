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
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as JobMetadata from "../policy/JobMetadata.js"
import { GlobalPolicies } from "../policy/GlobalPolicies.js"
import * as PolicyResolution from "../policy/PolicyResolution.js"
import * as RetryBehavior from "../policy/RetryBehavior.js"
import * as TimeoutBehavior from "../policy/TimeoutBehavior.js"
import { SemaphoreProvider } from "../semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderMemory from "../semaphore/SemaphoreProviderMemory.js"
import { JobStore } from "../store/JobStore.js"
import { type Attempt, CurrentAttempt } from "./Attempt.js"
import type { Job } from "./Job.js"
import { Outcome } from "./Outcome.js"
import { addonSlots, type Behavior, compose } from "./Pipeline.js"
import { Registry } from "./Registry.js"
import * as Saga from "./Saga.js"

/** Worker options. */
export interface WorkerOptions {
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
}

/**
 * The Wait-mode concurrency keys that the fetching worker fiber found full moments ago. A store may
 * leave due rows whose concurrency key (stamped, or set at enqueue) is listed to other fibers
 * (`JobStorePg` does), so a fiber does not keep claiming jobs it can only requeue. It is a hint: with a
 * store that ignores it, the worker backs off one poll interval before it re-runs such a job.
 */
export const contendedKeys: FiberRef.FiberRef<ReadonlyArray<string>> = FiberRef.unsafeMake<ReadonlyArray<string>>([])

/** The concurrency key a row carries in its metadata (stamped, or set at enqueue), if any. */
const rowConcurrencyKey = (job: Job): string | undefined => {
  const key = (job.metadata as any)?.policies?.concurrency?.value?.key
  return typeof key === "string" ? key : undefined
}

/** At most this many contended keys are sent with one fetch (the most recent ones). */
const MAX_CONTENDED_KEYS = 64

/** The core behaviors, inside every addon: retry outside timeout. */
export const coreBehaviors: ReadonlyArray<Behavior> = [RetryBehavior.behavior, TimeoutBehavior.behavior]

/** Attempts by outcome, as an Effect metric (`warp_attempts_total{outcome}`). */
export const attemptsTotal = Metric.counter("warp_attempts_total", { description: "Finished attempts by outcome" })

const renderCause = (cause: Cause.Cause<unknown>): string => Cause.pretty(cause, { renderErrorCause: true })

/** A handle on a running worker. */
export interface WorkerHandle {
  readonly workerId: string
  /** Ids of the jobs this worker is running right now. */
  readonly inFlight: Effect.Effect<ReadonlyArray<string>>
}

/**
 * Starts a worker in the current scope. Requires the store and registry; uses `GlobalPolicies`, a
 * `SemaphoreProvider` (for sagas) and addon behaviors when present.
 */
export const make = (options: WorkerOptions = {}): Effect.Effect<WorkerHandle, never, Scope.Scope | JobStore | Registry> =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const registry = yield* Registry
    const globals = Option.getOrElse(yield* Effect.serviceOption(GlobalPolicies), () => ({}))
    const semaphores = yield* Option.match(yield* Effect.serviceOption(SemaphoreProvider), {
      onNone: () => SemaphoreProviderMemory.make,
      onSome: Effect.succeed
    })
    const addons: Array<Behavior> = []
    for (const tag of addonSlots) {
      const provider = yield* Effect.serviceOption(tag)
      if (Option.isSome(provider)) addons.push(provider.value.behavior)
    }
    const behaviors = [...addons, ...coreBehaviors]

    const workerId = options.workerId ?? `worker-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
    const concurrency = options.concurrency ?? 4
    const pollInterval = Duration.decode(options.pollInterval ?? "100 millis")
    const lease = Duration.decode(options.lease ?? "30 seconds")
    const grace = Duration.decode(options.gracePeriod ?? "10 seconds")
    const inFlight = new Set<string>()
    const stopping = yield* Deferred.make<void>()

    const storeRetry = Schedule.exponential("50 millis").pipe(
      Schedule.union(Schedule.spaced("2 seconds")),
      Schedule.tapInput((e: unknown) => Effect.logWarning(`job store unavailable, retrying: ${String((e as any)?.message ?? e)}`))
    )

    const finalize = (job: Job, outcome: Outcome, metadata: unknown) =>
      store.finalize({ job, workerId, outcome, metadata }).pipe(
        Effect.retry({ schedule: storeRetry, times: 8 }),
        Effect.tap((ok) => (ok ? Metric.increment(Metric.tagged(attemptsTotal, "outcome", outcome._tag)) : Effect.logWarning(`claim on ${job.id} lost before finalize`))),
        Effect.catchAll((e) => Effect.logError(`finalize of ${job.id} failed; the lease will recover it`, e)),
        Effect.uninterruptible
      )

    const runHandler = (attempt: Attempt): Effect.Effect<Outcome> => {
      const h = attempt.registered.handler
      const info = { jobId: attempt.job.id, type: attempt.job.type, attempt: attempt.job.attempt }
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
    const prepare = (job: Job, now: Date): Either.Either<{ attempt: Attempt; metadata: unknown }, string> => {
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
      const resolution = PolicyResolution.resolve({ stored: stored.right, handler, contract, globals, now })
      return Either.right({
        attempt: { job, workerId, registered: registered.value, payload: payload.right, policies: resolution.effective },
        metadata: JobMetadata.encode(resolution.metadata)
      })
    }

    /** Runs one attempt; says its outcome and, for a Wait-mode concurrency policy, its key. */
    const runAttempt = (job: Job): Effect.Effect<{ readonly outcome: Outcome; readonly waitKey: string | undefined } | undefined> =>
      Effect.gen(function* () {
        const now = new Date(yield* Clock.currentTimeMillis)
        const prepared = prepare(job, now)
        if (Either.isLeft(prepared)) {
          const failed = Outcome.Failed({ error: prepared.left })
          yield* finalize(job, failed, job.metadata)
          return { outcome: failed, waitKey: undefined }
        }
        const { attempt, metadata } = prepared.right
        const h = attempt.registered.handler
        const program = h._tag === "SagaHandler" ? runSaga(attempt, h) : compose(behaviors, attempt, runHandler(attempt))
        const outcome = yield* Effect.scoped(program).pipe(
          Effect.catchAllDefect((d) => Effect.succeed(Outcome.Failed({ error: `Defect in pipeline: ${String(d)}` })))
        )
        yield* finalize(job, outcome, metadata)
        const policy = attempt.policies.concurrency
        return { outcome, waitKey: h._tag !== "SagaHandler" && policy?.mode === "Wait" ? policy.key : undefined }
      }).pipe(
        Effect.onInterrupt(() =>
          finalize(job, Outcome.Requeued({ reason: `Attempt interrupted (worker ${workerId} shutting down)` }), job.metadata)
        ),
        Effect.ensuring(Effect.sync(() => inFlight.delete(job.id)))
      )

    const fetchOne = store.fetch(workerId, 1, lease).pipe(Effect.retry(storeRetry), Effect.orDie)

    const idle = Effect.raceFirst(Effect.sleep(pollInterval), Deferred.await(stopping))
    const firstSkipMs = Math.max(1, Duration.toMillis(pollInterval))
    const maxSkipMs = firstSkipMs * 16

    const loop: Effect.Effect<void> = Effect.gen(function* () {
      // Per fiber: Wait-mode keys this fiber found full, skipped at fetch until `until`; the skip
      // doubles while the key stays full for this fiber and ends once it gets a slot of it. Other
      // fibers (the holder first of all) keep running the key's jobs.
      const skipping = new Map<string, { until: number; ms: number }>()
      while (!(yield* Deferred.isDone(stopping))) {
        const now = yield* Clock.currentTimeMillis
        const contended: Array<string> = []
        for (const [key, s] of skipping) {
          if (s.until > now) contended.push(key)
          else if (now - s.until > maxSkipMs) skipping.delete(key)
        }
        const jobs = yield* Effect.locally(fetchOne, contendedKeys, contended.slice(-MAX_CONTENDED_KEYS))
        if (jobs.length === 0) {
          yield* idle
          continue
        }
        let contendedUnknown = false
        for (const job of jobs) {
          // the store ignored the hint: do not spin on a key this fiber just found full
          const rowKey = rowConcurrencyKey(job)
          if (rowKey !== undefined && (skipping.get(rowKey)?.until ?? 0) > (yield* Clock.currentTimeMillis)) yield* idle
          inFlight.add(job.id)
          const result = yield* runAttempt(job)
          if (result === undefined) continue
          const { outcome, waitKey } = result
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
        // An immediate requeue for another reason is due again at once: back off one poll interval
        // so this fiber does not spin on it.
        if (contendedUnknown) yield* idle
      }
    })

    const heartbeat = Effect.suspend(() => store.heartbeat(workerId, [...inFlight], lease)).pipe(
      Effect.catchAll((e) => Effect.logWarning("heartbeat failed", e)),
      Effect.repeat(Schedule.spaced(Duration.millis(Math.max(10, Duration.toMillis(lease) / 3))))
    )

    const fibers = yield* Effect.forEach(Array.from({ length: concurrency }), () => Effect.forkDaemon(loop))
    const beat = yield* Effect.forkDaemon(heartbeat)

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Deferred.succeed(stopping, undefined)
        const all = Fiber.joinAll(fibers)
        // finalizers run uninterruptibly: the wait itself must be interruptible for the timeout to fire
        const done = yield* Effect.timeout(Effect.interruptible(all), grace).pipe(Effect.option)
        if (Option.isNone(done)) yield* Fiber.interruptAll(fibers)
        yield* Fiber.interrupt(beat)
      })
    )

    return { workerId, inFlight: Effect.sync(() => [...inFlight]) }
  })

/** A worker as a Layer: starts when the layer is built, shuts down gracefully when it is released. */
export const layer = (options: WorkerOptions = {}): Layer.Layer<never, never, JobStore | Registry> =>
  Layer.scopedDiscard(make(options))
