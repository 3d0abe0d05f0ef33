/**
 * The worker: a scoped pool of lanes that claim due jobs and run each attempt as one Effect program
 * — the attempt's layers (context, resolved policy, stamp), the pipeline of behaviors around the
 * handler, and exactly one finalizing write (see `RunAttempt`).
 *
 * Closing the worker's scope stops claiming, lets running attempts finish for `gracePeriod`, then
 * interrupts the rest; an interrupted attempt is requeued by its finalizing write, so nothing is lost.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Addon, AddonServices, Behavior } from "../attempt/Pipeline.js"
import type { Job } from "../job/Job.js"
import { Registry } from "../job/Registry.js"
import * as Telemetry from "../observability/Telemetry.js"
import type { ConcurrencyPolicy } from "../policy/PolicyValues.js"
import * as RetryBehavior from "../retry/RetryBehavior.js"
import { JobStore } from "../store/JobStore.js"
import * as TimeoutBehavior from "../timeout/TimeoutBehavior.js"
import * as Finalize from "./Finalize.js"
import * as Lane from "./Lane.js"
import * as RunAttempt from "./RunAttempt.js"
import * as SlotReuse from "./SlotReuse.js"
import * as Watchers from "./Watchers.js"
import * as WorkerState from "./WorkerState.js"

/** Worker options. */
export type WorkerOptions<A extends ReadonlyArray<Addon<any>> = ReadonlyArray<Addon<never>>> = WorkerState.WorkerOptions<A>

/** The core behaviors, inside every addon: retry outside timeout. */
export const coreBehaviors: ReadonlyArray<Behavior> = [RetryBehavior.behavior, TimeoutBehavior.behavior]

/** Attempts by outcome, job type and key family, as an Effect metric (`warp_attempts_total`). */
export const attemptsTotal = Telemetry.attempts

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
    // the addons' behaviors by their order (outermost first), then the core ones
    const addons: Array<Behavior> = []
    for (const addon of [...(options.addons ?? [])].sort((a, b) => a.order - b.order)) addons.push(yield* addon.behavior)
    const state = yield* WorkerState.make(WorkerState.config(options))
    const { config } = state

    const finalizer = Finalize.make(store, state)
    const claim = Lane.claim(store, state)
    let reuseSlot: (policy: ConcurrencyPolicy, later: Array<Job>) => Effect.Effect<number> = () => Effect.succeed(0)
    const runner = RunAttempt.make({
      state,
      finalizer,
      registry,
      behaviors: [...addons, ...coreBehaviors],
      locks: store.locks,
      reuseSlot: (policy, later) => Effect.suspend(() => reuseSlot(policy, later))
    })
    reuseSlot = SlotReuse.make({ state, finalizer, claim, runUnderSlot: runner.runUnderSlot })

    const lanes = yield* Effect.forEach(Array.from({ length: config.lanes }), () =>
      Effect.forkDetach(Lane.lane({ state, finalizer, runner, claim }))
    )
    const beat = yield* Effect.forkDetach(Watchers.heartbeat(store, state))
    const watch = yield* Effect.forkDetach(Watchers.cancelWatch(store, state))
    const reporter = yield* Effect.forkDetach(Watchers.reportSoon(store, state))

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Deferred.succeed(state.stopping, undefined)
        const all = Fiber.joinAll(lanes)
        // finalizers run uninterruptibly: the wait itself must be interruptible for the timeout to fire
        const done = yield* Effect.timeoutOption(Effect.interruptible(all), config.grace)
        if (Option.isNone(done)) yield* Fiber.interruptAll(lanes)
        yield* Fiber.interrupt(beat)
        yield* Fiber.interrupt(watch)
        yield* Fiber.interrupt(reporter)
        // a worker that cannot reach its store leaves its entry, shown as stale
        yield* store.removeWorker(config.workerId).pipe(Effect.timeout("2 seconds"), Effect.ignore)
      })
    )

    return { workerId: config.workerId, inFlight: Effect.sync(() => [...state.inFlight]) }
  })

/** A worker as a Layer: starts when the layer is built, shuts down gracefully when it is released. */
export const layer = <const A extends ReadonlyArray<Addon<any>> = []>(
  options: WorkerOptions<A> = {}
): Layer.Layer<never, never, JobStore | Registry | AddonServices<A>> => Layer.effectDiscard(make(options))
