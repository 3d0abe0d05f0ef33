/**
 * A deterministic runtime for property tests of your handlers: `Warp.layerMemory` (memory store,
 * memory semaphore provider, the worker with the concurrency addon) under a fresh `TestClock`, so a
 * generated {@link Workload} runs in virtual time (no real sleeps) and the run reports every job's
 * state and typed outcomes, the multiset of outcomes, and the most holders seen at once per key.
 *
 * @since 0.2.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as TestClock from "effect/testing/TestClock"
import { LOCK_PREFIX } from "../concurrency/ConcurrencyBehavior.js"
import type { JobContract } from "../job/Contract.js"
import type { AnyHandler, Requirements } from "../job/Handler.js"
import type { JobLog } from "../job/Job.js"
import type { JobState } from "../job/JobState.js"
import { Outcome } from "../job/Outcome.js"
import * as Publisher from "../publisher/Publisher.js"
import type * as Worker from "../worker/Worker.js"
import type * as Declaration from "../policy/Declaration.js"
import { SemaphoreProvider, type SemaphoreProviderService } from "../semaphore/SemaphoreProvider.js"
import * as SemaphoreProviderMemory from "../semaphore/SemaphoreProviderMemory.js"
import { JobStore } from "../store/JobStore.js"
import * as Warp from "../warp/Warp.js"
import { parameters, type Workload, type WorkloadJob } from "./Workload.js"

/**
 * The failure of a handler whose generated result is `fail` (see {@link play}).
 *
 * @since 0.2.0
 * @category errors
 */
export class SimulatedFailure extends Data.TaggedError("SimulatedFailure")<{ readonly index: number }> {
  override get message(): string {
    return `simulated failure of job ${this.index}`
  }
}

/**
 * A run that did not settle: jobs were still pending or processing when the virtual time budget
 * ({@link RunOptions.maxVirtualTime}) ran out.
 *
 * @since 0.2.0
 * @category errors
 */
export class NotSettled extends Data.TaggedError("NotSettled")<{
  readonly afterMs: number
  readonly counts: Readonly<Record<JobState, number>>
}> {
  override get message(): string {
    return `the workload did not settle within ${this.afterMs} virtual ms: ${JSON.stringify(this.counts)}`
  }
}

/**
 * The script of a run: which generated job a job id stands for, and the count of handlers inside
 * per key. {@link run} sets it for its worker; {@link play} reads it.
 */
interface Script {
  /** The generated job behind a job id (waits until its enqueue has returned). */
  readonly jobOf: (jobId: string) => Effect.Effect<WorkloadJob>
  /** Runs `body` counted as one handler inside `key`. */
  readonly inside: <A, E, R>(key: string, body: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

const currentScript = Context.Reference<Script | undefined>("warp-effect/testing/TestRuntime/currentScript", { defaultValue: () => undefined })

/**
 * Plays the generated part of the job `jobId` inside your handler (or inside a fake of a service
 * your handler calls): it counts as one holder of the job's key (for {@link RunResult.maxInside}),
 * waits the job's duration on the clock, then returns, fails with {@link SimulatedFailure} or dies,
 * as generated. It dies when called outside {@link run}.
 *
 * @since 0.2.0
 * @category handlers
 */
export const play = (jobId: string): Effect.Effect<void, SimulatedFailure> =>
  Effect.gen(function* () {
    const script = yield* currentScript
    if (script === undefined) return yield* Effect.die(new Error("TestRuntime.play runs only inside TestRuntime.run"))
    const job = yield* script.jobOf(jobId)
    const body = Effect.gen(function* () {
      if (job.durationMs > 0) yield* Effect.sleep(job.durationMs)
      else yield* Effect.yieldNow
      if (job.result === "fail") return yield* new SimulatedFailure({ index: job.index })
      if (job.result === "die") return yield* Effect.die(new Error(`simulated defect in job ${job.index}`))
    })
    yield* job.concurrency === null ? body : script.inside(job.concurrency.key, body)
  })

/**
 * An `enqueue` for {@link RunOptions}: enqueues `contract` with the payload you build from the
 * generated job, carrying the job's concurrency declaration as enqueue-time parameters.
 *
 * @since 0.2.0
 * @category enqueue
 */
export const enqueueWith =
  <A, I>(contract: JobContract<string, A, I>, payload: (job: WorkloadJob) => A) =>
  (job: WorkloadJob): Effect.Effect<string, Publisher.PublishError, Publisher.Publisher> =>
    Effect.flatMap(Publisher.Publisher, (p) => p.enqueue(contract, payload(job), parameters(job)))

/**
 * Options of {@link run}.
 *
 * @since 0.2.0
 * @category models
 */
export interface RunOptions<H extends ReadonlyArray<AnyHandler>, E, R> {
  /** Your handlers. */
  readonly handlers: H
  /** The generated schedule. */
  readonly workload: Workload
  /** Enqueues one generated job (at its arrival time); returns its id, or the child ids of a message. */
  readonly enqueue: (job: WorkloadJob) => Effect.Effect<string | ReadonlyArray<string>, E, Publisher.Publisher | R>
  /** Worker options (default: 4 fibers, poll interval 10 ms, lease 1 hour, grace period 0). */
  readonly worker?: Omit<Worker.WorkerOptions, "addons"> | undefined
  /** Global default declarations (`Warp.layerMemory`'s `globals`). */
  readonly globals?: ReadonlyArray<Declaration.Declaration> | undefined
  /** Your own semaphore provider instead of the memory one. */
  readonly semaphoreProvider?: Layer.Layer<SemaphoreProvider> | undefined
  /** How far virtual time may run before the run fails with {@link NotSettled} (default 1 hour). */
  readonly maxVirtualTime?: Duration.Input | undefined
  /** Keep the worker's log lines (default false: a property test's hundreds of runs stay quiet). */
  readonly logs?: boolean | undefined
}

/**
 * What happened to one generated job.
 *
 * @since 0.2.0
 * @category models
 */
export interface JobResult {
  readonly job: WorkloadJob
  readonly id: string
  /** Its final state. */
  readonly state: JobState
  /** The outcome of each of its attempts, in order, read back from its audit trail. */
  readonly outcomes: ReadonlyArray<Outcome>
  /** How many times its handler played its part ({@link play}). */
  readonly runs: number
  readonly logs: ReadonlyArray<JobLog>
}

/**
 * The multiset of attempt outcomes of a run, by tag.
 *
 * @since 0.2.0
 * @category models
 */
export type Tally = Readonly<Record<Outcome["_tag"], number>>

/**
 * The result of {@link run}.
 *
 * @since 0.2.0
 * @category models
 */
export interface RunResult {
  /** One entry per job id (a message contributes one per child), in workload order. */
  readonly jobs: ReadonlyArray<JobResult>
  /** How many attempts ended in each outcome, over the whole run. */
  readonly tally: Tally
  /** How many jobs ended in each state. */
  readonly states: Readonly<Record<JobState, number>>
  /** Per workload key: the most handlers inside {@link play} at once. */
  readonly maxInside: ReadonlyMap<string, number>
  /** Per concurrency key: the most slots held at once in the semaphore provider. */
  readonly maxHolders: ReadonlyMap<string, number>
  /** The virtual time the run took, in milliseconds. */
  readonly elapsedMs: number
}

const outcomeOf = (log: JobLog): Option.Option<Outcome> => {
  switch (log.kind) {
    case "Succeeded":
      return Option.some(Outcome.Succeeded())
    case "Failed":
      return Option.some(Outcome.Failed({ error: log.message }))
    case "Cancelled":
      return Option.some(Outcome.Deleted({ reason: log.message }))
    case "Requeued":
      return Option.some(Outcome.Requeued({ reason: log.message }))
    default:
      return Option.none()
  }
}

/** Counts the most concurrent holders of each name, around any provider. */
class Peaks {
  readonly now = new Map<string, number>()
  readonly max = new Map<string, number>()
  enter(name: string) {
    const n = (this.now.get(name) ?? 0) + 1
    this.now.set(name, n)
    this.max.set(name, Math.max(this.max.get(name) ?? 0, n))
  }
  exit(name: string) {
    this.now.set(name, this.now.get(name)! - 1)
  }
}

const counting = (inner: SemaphoreProviderService, peaks: Peaks): SemaphoreProviderService => ({
  tryAcquire: (name, limit, timeout) =>
    Effect.tap(inner.tryAcquire(name, limit, timeout), (slot) =>
      Option.isSome(slot) && name.startsWith(LOCK_PREFIX)
        ? Effect.andThen(
            Effect.sync(() => peaks.enter(name.slice(LOCK_PREFIX.length))),
            Effect.addFinalizer(() => Effect.sync(() => peaks.exit(name.slice(LOCK_PREFIX.length))))
          )
        : Effect.void
    )
})

const pending = (c: Readonly<Record<JobState, number>>) => c.Enqueued + c.Scheduled + c.Processing

/**
 * Runs a workload through your handlers on `Warp.layerMemory` under a fresh `TestClock`: each job
 * is enqueued (through `options.enqueue`) at its arrival offset, the worker runs them, and virtual
 * time advances one poll interval at a time until nothing is pending or processing. Same workload,
 * same handlers: same result. `enqueue` and your handlers get the services `Warp.layerMemory`
 * provides (`Publisher`, `JobStore`, ...); provide the others they need around the run.
 *
 * @since 0.2.0
 * @category running
 */
export const run = <const H extends ReadonlyArray<AnyHandler>, E = never, R = never>(
  options: RunOptions<H, E, R>
): Effect.Effect<RunResult, E | NotSettled, Exclude<Requirements<H[number]> | R, Warp.Services>> => {
  const workerOptions: Omit<Worker.WorkerOptions, "addons"> = {
    concurrency: 4,
    pollInterval: "10 millis",
    lease: "1 hour",
    gracePeriod: 0,
    workerId: "test-runtime",
    // every job's trail stays readable at the end of a run, however much virtual time it spans
    retention: false,
    ...options.worker
  }
  const step = Duration.toMillis(workerOptions.pollInterval ?? "10 millis")
  const budget = Duration.toMillis(options.maxVirtualTime ?? "1 hour")
  const peaks = new Peaks()
  const inside = new Peaks()
  const runs = new Map<string, number>()
  return Effect.gen(function* () {
    const known = new Map<string, Deferred.Deferred<WorkloadJob>>()
    const slot = (id: string) =>
      Effect.suspend(() => {
        const d = known.get(id)
        if (d !== undefined) return Effect.succeed(d)
        return Effect.tap(Deferred.make<WorkloadJob>(), (made) => Effect.sync(() => known.set(id, made)))
      })
    const script: Script = {
      jobOf: (id) =>
        Effect.flatMap(slot(id), Deferred.await).pipe(
          Effect.tap(() => Effect.sync(() => runs.set(id, (runs.get(id) ?? 0) + 1)))
        ),
      inside: (key, body) =>
        Effect.acquireUseRelease(
          Effect.sync(() => inside.enter(key)),
          () => body,
          () => Effect.sync(() => inside.exit(key))
        )
    }
    const provider = Layer.effect(
      SemaphoreProvider,
      Effect.map(SemaphoreProvider, (p) => counting(p, peaks))
    ).pipe(Layer.provide(options.semaphoreProvider ?? SemaphoreProviderMemory.layer))
    const warp = Warp.layerMemory({
      handlers: options.handlers,
      worker: workerOptions,
      globals: options.globals,
      semaphoreProvider: provider
    })

    const body = Effect.gen(function* () {
      const start = yield* Clock.currentTimeMillis
      const ids: Array<ReadonlyArray<string>> = options.workload.jobs.map(() => [])
      const byArrival = [...options.workload.jobs].sort((a, b) => a.arrivalMs - b.arrivalMs || a.index - b.index)
      const arrived = yield* Deferred.make<void, E>()
      yield* Effect.forkScoped(
        Effect.gen(function* () {
          let at = 0
          for (const job of byArrival) {
            if (job.arrivalMs > at) yield* Effect.sleep(job.arrivalMs - at)
            at = Math.max(at, job.arrivalMs)
            const got = yield* options.enqueue(job)
            const list = typeof got === "string" ? [got] : got
            ids[job.index] = list
            for (const id of list) yield* Effect.flatMap(slot(id), (d) => Deferred.succeed(d, job))
          }
        }).pipe(Deferred.into(arrived))
      )
      const store = yield* JobStore
      let elapsed = 0
      // the next step: one poll interval, or straight to the next due row when only scheduled rows
      // (retry backoffs, future schedules) are left, so a backoff of minutes costs a few wake-ups
      const nextStep = Effect.gen(function* () {
        const counts = yield* Effect.orDie(store.countByState)
        if (counts.Enqueued + counts.Processing > 0 || counts.Scheduled === 0) return step
        const page = yield* Effect.orDie(store.list({ state: "Scheduled", limit: 1000, offset: 0 }))
        const now = yield* Clock.currentTimeMillis
        const due = Math.min(...page.rows.map((r) => r.scheduleTime.getTime()))
        return Math.max(step, Math.ceil((due - now) / step) * step)
      })
      while (true) {
        const delta = Math.min(yield* nextStep, Math.max(step, budget - elapsed))
        yield* TestClock.adjust(delta)
        elapsed += delta
        const done = yield* Deferred.poll(arrived)
        if (Option.isSome(done)) {
          yield* done.value
          const counts = yield* Effect.orDie(store.countByState)
          if (pending(counts) === 0) break
          if (elapsed >= budget) return yield* new NotSettled({ afterMs: elapsed, counts })
        } else if (elapsed >= budget) {
          return yield* new NotSettled({ afterMs: elapsed, counts: yield* Effect.orDie(store.countByState) })
        }
      }
      const end = yield* Clock.currentTimeMillis
      const jobs: Array<JobResult> = []
      for (const job of options.workload.jobs) {
        for (const id of ids[job.index]!) {
          const detail = Option.getOrThrow(yield* Effect.orDie(store.get(id)))
          jobs.push({
            job,
            id,
            state: detail.job.state,
            outcomes: detail.logs.flatMap((l) => Option.toArray(outcomeOf(l))),
            runs: runs.get(id) ?? 0,
            logs: detail.logs
          })
        }
      }
      const tally = { Succeeded: 0, Failed: 0, Deleted: 0, Requeued: 0 }
      for (const j of jobs) for (const o of j.outcomes) tally[o._tag]++
      const states = yield* Effect.orDie(store.countByState)
      return {
        jobs,
        tally,
        states,
        maxInside: new Map(inside.max),
        maxHolders: new Map(peaks.max),
        elapsedMs: end - start
      } satisfies RunResult
    })
    // `local`: a fresh memory store and provider for every run, never ones memoized by an outer `provide`
    return yield* Effect.scoped(body).pipe(Effect.provide(warp, { local: true }), Effect.provideService(currentScript, script))
  }).pipe(
    options.logs === true ? (self) => self : Effect.provideService(References.MinimumLogLevel, "None"),
    Effect.provide(TestClock.layer(), { local: true })
  ) as Effect.Effect<RunResult, E | NotSettled, Exclude<Requirements<H[number]> | R, Warp.Services>>
}
