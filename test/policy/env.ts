import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import {
  CircuitBreakerAddon,
  Concurrency,
  GlobalPolicies,
  JobMetadata,
  JobStoreMemory,
  JobStorePg,
  Publisher,
  RateLimitAddon,
  Registry,
  SemaphoreProviderMemory,
  SemaphoreProviderPg,
  Worker
} from "warp-effect"
import type { CircuitBreakerState } from "../../src/internal/circuitbreaker/CircuitBreakerState.js"
import type { ConcurrencyLimitManager } from "../../src/internal/concurrency/ConcurrencyLimitManager.js"
import type { AnyHandler } from "../../src/internal/job/Handler.js"
import type { Addon, AddonServices } from "../../src/internal/attempt/Pipeline.js"
import type { UnenforcedPolicy } from "../../src/internal/policy/Enforcement.js"
import type { InvalidArgument } from "../../src/internal/error/InvalidArgument.js"
import type { Recurring } from "../../src/internal/job/Recurring.js"
import type * as Declaration from "../../src/internal/policy/Declaration.js"
import type { RateLimiter } from "../../src/internal/ratelimit/RateLimiter.js"
import type { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { freshPgLayer } from "../support/db.js"

/** What outlives a deploy: the store, the semaphore provider and every addon with its shared state. */
export type Infra =
  | JobStore
  | SemaphoreProvider
  | ConcurrencyLimitManager
  | RateLimiter
  | CircuitBreakerState

/** The infrastructure of one backend, on fresh state per use. */
export const backends: ReadonlyArray<readonly [string, () => Layer.Layer<Infra, unknown>]> = [
  [
    "memory",
    () =>
      Layer.mergeAll(JobStoreMemory.layer, Concurrency.layerMemoryLimits, RateLimitAddon.layerMemory, CircuitBreakerAddon.layerMemory).pipe(
        Layer.provideMerge(SemaphoreProviderMemory.layer)
      )
  ],
  [
    "postgres",
    () =>
      Layer.mergeAll(JobStorePg.layer, Concurrency.layer, RateLimitAddon.layer, CircuitBreakerAddon.layer).pipe(
        Layer.provideMerge(SemaphoreProviderPg.layer()),
        Layer.provideMerge(freshPgLayer(30) as Layer.Layer<SqlClient.SqlClient, unknown>)
      )
  ]
]

/** One deploy: a registry (handlers, recurring entries) and its global defaults, with a publisher. */
export const deploy = (input: {
  readonly handlers: ReadonlyArray<AnyHandler>
  readonly recurring?: ReadonlyArray<Recurring>
  readonly globals?: ReadonlyArray<Declaration.Declaration>
}): Layer.Layer<Publisher.Publisher | Registry.Registry | GlobalPolicies.GlobalPolicies, never, JobStore> =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: input.handlers as ReadonlyArray<AnyHandler>, recurring: input.recurring ?? [] }) as Layer.Layer<Registry.Registry>),
    Layer.provideMerge(GlobalPolicies.layer(input.globals ?? []))
  )

/** Every addon, as the infrastructure above provides their services. */
export const allAddons = [Concurrency.addon, CircuitBreakerAddon.addon, RateLimitAddon.addon] as const

/** Runs `body` with a worker of the deploy (every addon on) in context, in its own scope (the worker stops after). */
export const withWorker = <A, E, R, const Ad extends ReadonlyArray<Addon<any>> = typeof allAddons>(
  body: Effect.Effect<A, E, R>,
  options: Worker.WorkerOptions<Ad> = {}
): Effect.Effect<A, E | UnenforcedPolicy | InvalidArgument, Exclude<R, Scope.Scope> | JobStore | Registry.Registry | AddonServices<Ad>> =>
  Effect.scoped(
    Effect.andThen(Worker.make<Ad>({ concurrency: 2, pollInterval: "5 millis", addons: allAddons as unknown as Ad, ...options }), body)
  )

/** The decoded metadata of one job, as the store's detail view shows it. */
export const metadataOf = (id: string) =>
  Effect.gen(function* () {
    const d = Option.getOrThrow(yield* (yield* JobStore).get(id))
    const m = JobMetadata.decode(d.job.metadata)
    if (Result.isFailure(m)) return yield* Effect.die(new Error(m.failure))
    return m.success
  })

/** Waits (bounded polling of the store) until `predicate` holds for job `id`. */
export const until = (id: string, predicate: (d: import("../../src/internal/job/Job.js").JobDetail) => boolean, timeoutMs = 20_000) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const start = Date.now()
    while (true) {
      const d = Option.getOrThrow(yield* store.get(id))
      if (predicate(d)) return d
      if (Date.now() - start > timeoutMs) return yield* Effect.die(new Error(`job ${id} never reached the condition; last state ${d.job.state}`))
      yield* Effect.sleep("5 millis")
    }
  })

/**
 * A meeting point for `parties` fibers: each `arrive` waits until all have arrived (or `timeout`).
 * Used to make "these ran side by side" deterministic instead of a matter of scheduling luck.
 */
export const meeting = (parties: number, timeout: import("effect/Duration").Input = "5 seconds") => {
  let arrived = 0
  const all = Effect.runSync(Deferred.make<void>())
  return {
    arrive: Effect.suspend(() => {
      arrived++
      return arrived >= parties ? Deferred.succeed(all, undefined) : Effect.void
    }).pipe(Effect.andThen(Deferred.await(all).pipe(Effect.timeout(timeout), Effect.ignore)))
  }
}

/** Two sides that each signal their arrival and wait (bounded) for the other's. */
export const pair = (timeout: import("effect/Duration").Input = "5 seconds") => {
  const [l, r] = [Effect.runSync(Deferred.make<void>()), Effect.runSync(Deferred.make<void>())]
  const side = (mine: Deferred.Deferred<void>, other: Deferred.Deferred<void>) =>
    Deferred.succeed(mine, undefined).pipe(Effect.andThen(Deferred.await(other).pipe(Effect.timeout(timeout), Effect.ignore)))
  return { left: side(l, r), right: side(r, l) }
}
