/**
 * The worker: a scoped pool of lanes that claim due jobs and run each attempt as one Effect program
 * — over the attempt's scoped layers (record, context, resolved policy, stamp, concurrency slot), the
 * pipeline of behaviors around the handler, and exactly one finalizing write (see `RunAttempt`).
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
import * as ConcurrencySlot from "../attempt/ConcurrencySlot.js"
import type { Addon, AddonServices, Behavior } from "../attempt/Pipeline.js"
import type { InvalidArgument } from "../error/InvalidArgument.js"
import type { Job } from "../job/Job.js"
import * as Retention from "../job/Retention.js"
import { Registry, type RegistryService } from "../job/Registry.js"
import * as Telemetry from "../observability/Telemetry.js"
import * as Enforcement from "../policy/Enforcement.js"
import { GlobalPolicies } from "../policy/GlobalPolicies.js"
import type { FamilyName, Policies } from "../policy/PolicyFamily.js"
import type { ConcurrencyPolicy } from "../policy/PolicyValues.js"
import * as RetryBehavior from "../retry/RetryBehavior.js"
import { SemaphoreProvider } from "../semaphore/SemaphoreProvider.js"
import { JobStore } from "../store/JobStore.js"
import * as TimeoutBehavior from "../timeout/TimeoutBehavior.js"
import * as Finalize from "./Finalize.js"
import * as Lane from "./Lane.js"
import * as Pickup from "./Pickup.js"
import * as Pruner from "./Pruner.js"
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

/**
 * The first policy that a registered handler or contract, a recurring job's contract or a global default
 * declares and that `enforced` does not cover, as the error the worker's build fails with.
 */
export const checkEnforced = (
  registry: RegistryService,
  globals: Policies,
  enforced: ReadonlySet<FamilyName>
): Enforcement.UnenforcedPolicy | undefined => {
  const sites: Array<readonly [string, Policies]> = []
  for (const handler of registry.handlers) {
    if (handler._tag === "JobHandler" || handler._tag === "MessageHandler") {
      sites.push([`handler '${handler.name}' of contract '${handler.contract.name}'`, handler.policies])
    }
    if (handler._tag !== "RequestHandler" && handler._tag !== "StreamHandler") {
      sites.push([`contract '${handler.contract.name}'`, handler.contract.policies])
    }
  }
  for (const r of registry.recurring) sites.push([`contract '${r.contract.name}' (recurring)`, r.contract.policies])
  sites.push(["the global defaults (GlobalPolicies)", globals])
  for (const [site, policies] of sites) {
    const missing = Enforcement.unenforced(policies, enforced)
    if (missing.length > 0) return Enforcement.unenforcedPolicy(missing[0]!, site)
  }
  return undefined
}

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
 *
 * Fails with `UnenforcedPolicy` when a registered handler or contract (or a global default) declares a
 * policy family that neither the worker's core (retry, timeout) nor one of `addons` enforces — e.g. a
 * `Mutex` with no `Concurrency.addon` — rather than run such jobs with the policy ignored; and with
 * `InvalidArgument` when its `retention` (or a registered contract's) cannot be honoured.
 *
 * Unless `retention: false`, the worker prunes finished jobs (see `Pruner`): one process at a time
 * across the store, whichever worker takes the store's retention guard first, with its own plan.
 */
export const make = <const A extends ReadonlyArray<Addon<any>> = []>(
  options: WorkerOptions<A> = {}
): Effect.Effect<WorkerHandle, Enforcement.UnenforcedPolicy | InvalidArgument, Scope.Scope | JobStore | Registry | AddonServices<A>> =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const registry = yield* Registry
    const enforced = new Set<FamilyName>([...Enforcement.core, ...(options.addons ?? []).flatMap((a) => a.enforces ?? [])])
    const refused = checkEnforced(registry, yield* (yield* GlobalPolicies).current, enforced)
    if (refused !== undefined) return yield* refused
    const retention =
      options.retention === false ? undefined : yield* Effect.fromResult(Retention.resolve(options.retention ?? {}, Pruner.overridesOf(registry)))
    // the addons' behaviors by their order (outermost first), then the core ones. The provider they see
    // takes the slots an admitting behavior asks for into the attempt's own slot scope (see
    // `ConcurrencySlot`): released with it, right before the finalizing write or by its finalization.
    const provider = yield* Effect.serviceOption(SemaphoreProvider)
    const addons: Array<Behavior> = []
    for (const addon of [...(options.addons ?? [])].sort((a, b) => a.order - b.order)) {
      addons.push(
        yield* Option.isSome(provider)
          ? Effect.provideService(addon.behavior, SemaphoreProvider, ConcurrencySlot.acquiringInto(provider.value))
          : addon.behavior
      )
    }
    const state = yield* WorkerState.make(WorkerState.config(options))
    const { config } = state

    const finalizer = Finalize.make(store, state)
    const claim = Lane.claim(store, state)
    let reuseSlot: (policy: ConcurrencyPolicy, later: Array<Job>) => Effect.Effect<number> = () => Effect.succeed(0)
    const runner = RunAttempt.make({
      state,
      enforced,
      finalizer,
      registry,
      behaviors: [...addons, ...coreBehaviors],
      locks: store.locks,
      reuseSlot: (policy, later) => Effect.suspend(() => reuseSlot(policy, later))
    })
    reuseSlot = SlotReuse.make({ state, finalizer, claim, runUnderSlot: runner.runUnderSlot })

    // instant pickup: the store's hints wake idle lanes (see `Pickup`); relayed from before the lanes start
    const pickup = yield* Pickup.make(store, state)
    const relay = yield* Effect.forkDetach(pickup.run)
    const lanes = yield* Effect.forEach(Array.from({ length: config.lanes }), () =>
      Effect.forkDetach(Lane.lane({ state, finalizer, runner, claim, pickup }))
    )
    const beat = yield* Effect.forkDetach(Watchers.heartbeat(store, state))
    const watch = yield* Effect.forkDetach(Watchers.cancelWatch(store, state))
    const reporter = yield* Effect.forkDetach(Watchers.reportSoon(store, state))
    const pruner = retention === undefined ? undefined : yield* Effect.forkDetach(Pruner.loop(store, retention))

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Deferred.succeed(state.stopping, undefined)
        const all = Fiber.joinAll(lanes)
        // finalizers run uninterruptibly: the wait itself must be interruptible for the timeout to fire
        const done = yield* Effect.timeoutOption(Effect.interruptible(all), config.grace)
        if (Option.isNone(done)) yield* Fiber.interruptAll(lanes)
        yield* Fiber.interrupt(relay)
        yield* Fiber.interrupt(beat)
        yield* Fiber.interrupt(watch)
        yield* Fiber.interrupt(reporter)
        if (pruner !== undefined) yield* Fiber.interrupt(pruner)
        // a worker that cannot reach its store leaves its entry, shown as stale
        yield* store.removeWorker(config.workerId).pipe(Effect.timeout("2 seconds"), Effect.ignore)
      })
    )

    return { workerId: config.workerId, inFlight: Effect.sync(() => [...state.inFlight]) }
  })

/** A worker as a Layer: starts when the layer is built, shuts down gracefully when it is released. */
export const layer = <const A extends ReadonlyArray<Addon<any>> = []>(
  options: WorkerOptions<A> = {}
): Layer.Layer<never, Enforcement.UnenforcedPolicy | InvalidArgument, JobStore | Registry | AddonServices<A>> => Layer.effectDiscard(make(options))
