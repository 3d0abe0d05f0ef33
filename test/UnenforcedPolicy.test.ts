import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import {
  CircuitBreaker,
  Concurrency,
  Contract,
  GlobalPolicies,
  Handler,
  JobParameters,
  Mutex,
  Publisher,
  RateLimit,
  Registry,
  Retry,
  SemaphoreProviderMemory,
  Warp,
  Worker
} from "warp-effect"
import { detail, drained } from "./support/runtime.js"
import { stores } from "./support/stores.js"

const Plain = Contract.job("Plain", Schema.Struct({ n: Schema.Number }))
const Limited = Contract.job("Limited", Schema.Struct({ n: Schema.Number }), { policy: [RateLimit("smtp", 5, "1 second")] })

/** The worker's build under `handlers` and `addons` (memory store), as an Exit. */
const build = (
  handlers: ReadonlyArray<Handler.AnyHandler>,
  addons: ReadonlyArray<typeof Concurrency.addon> = [],
  globals: Parameters<typeof GlobalPolicies.layer>[0] = []
) =>
  Effect.scoped(Worker.make({ addons, pollInterval: "10 millis" })).pipe(
    Effect.exit,
    Effect.provide(
      Layer.mergeAll(Registry.layer({ handlers }), GlobalPolicies.layer(globals)).pipe(
        Layer.provideMerge(Concurrency.layerMemoryLimits),
        Layer.provideMerge(SemaphoreProviderMemory.layer),
        Layer.provideMerge(stores[0]![1]())
      )
    )
  )

const failureOf = <A, E>(exit: Exit.Exit<A, E>): Worker.UnenforcedPolicy => {
  expect(Exit.isFailure(exit)).toBe(true)
  const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
  expect(error).toBeInstanceOf(Worker.UnenforcedPolicy)
  return error as Worker.UnenforcedPolicy
}

describe("a declared policy that nothing enforces is an error", () => {
  it.live("a handler's Mutex without Concurrency.addon: the worker does not start, and says which family and the fix", () =>
    Effect.gen(function* () {
      const handler = Handler.job(Plain, () => Effect.void, { policy: [Mutex("smtp")] })
      const error = failureOf(yield* build([handler]))
      expect(error.family).toBe("concurrency")
      expect(error.site).toBe("handler 'Plain' of contract 'Plain'")
      expect(error.message).toContain("concurrency (Mutex / Semaphore)")
      expect(error.message).toContain("Concurrency.addon")
      // with the addon the same registration starts
      expect(Exit.isSuccess(yield* build([handler], [Concurrency.addon]))).toBe(true)
    }))

  it.live("a contract's RateLimit without its addon; a global CircuitBreaker without its addon", () =>
    Effect.gen(function* () {
      const limited = failureOf(yield* build([Handler.job(Limited, () => Effect.void)], [Concurrency.addon]))
      expect(limited.family).toBe("rateLimit")
      expect(limited.site).toBe("contract 'Limited'")
      expect(limited.message).toContain("RateLimitAddon.addon")
      const global = failureOf(yield* build([Handler.job(Plain, () => Effect.void)], [], [CircuitBreaker("payments", 3, "1 second")]))
      expect(global.family).toBe("circuitBreaker")
      expect(global.site).toBe("the global defaults (GlobalPolicies)")
      // retry and timeout are the worker's own: no addon needed
      expect(Exit.isSuccess(yield* build([Handler.job(Plain, () => Effect.void, { policy: [Retry(2)] })]))).toBe(true)
    }))

  it.live("Warp.layer without rateLimit: true refuses a RateLimit contract at build", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(Warp.layerMemory({ handlers: [Handler.job(Limited, () => Effect.void)] }))))
      expect(failureOf(exit).family).toBe("rateLimit")
      const ok = yield* Effect.exit(Effect.scoped(Layer.build(Warp.layerMemory({ handlers: [Handler.job(Limited, () => Effect.void)], rateLimit: true }))))
      expect(Exit.isSuccess(ok)).toBe(true)
    }))

  for (const [name, storeLayer] of stores) {
    it.live(`${name}: a job enqueued with a Mutex on a worker without the addon ends Failed, its handler never run, with a readable text`, () =>
      Effect.gen(function* () {
        const runs = yield* Ref.make(0)
        const handlers = [Handler.job(Plain, () => Ref.update(runs, (n) => n + 1))]
        return yield* Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const keyed = yield* p.enqueue(Plain, { n: 1 }, JobParameters.make().withMutex("user:1", "Wait"))
          const plain = yield* p.enqueue(Plain, { n: 2 })
          yield* Effect.scoped(Effect.andThen(Worker.make({ concurrency: 2, pollInterval: "10 millis" }), drained()))
          const d = yield* detail(keyed)
          expect(d.job.state).toBe("Failed")
          expect(d.logs.at(-1)!.message).toMatch(
            /^Policy not enforced — worker .+ has no addon for concurrency \(Mutex \/ Semaphore\); the job was not run \(add Concurrency\.addon/
          )
          expect((yield* detail(plain)).job.state).toBe("Succeeded")
          expect(yield* Ref.get(runs)).toBe(1)
        }).pipe(Effect.provide(Publisher.layer.pipe(Layer.provideMerge(Registry.layer({ handlers })), Layer.provideMerge(storeLayer()))))
      }))
  }
})
