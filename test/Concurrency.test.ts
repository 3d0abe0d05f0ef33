import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import {
  Concurrency,
  Contract,
  Handler,
  JobParameters,
  JobStoreMemory,
  Mutex,
  Publisher,
  Registry,
  Semaphore,
  SemaphoreProviderMemory,
  Worker
} from "warp-effect"
import { cancelledText, gateTotal, requeuedText } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import { ConcurrencyLimitManager } from "../src/internal/concurrency/ConcurrencyLimitManager.js"
import { SemaphoreProvider } from "../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import { HolderCounter } from "./support/holders.js"
import { detail, drained } from "./support/runtime.js"
import { pgWorkerEnv } from "./support/env.js"

const Work = Contract.job("Work", Schema.Struct({ key: Schema.String, i: Schema.Number }))

const setups = [
  [
    "memory",
    (handlers: ReadonlyArray<Handler.JobHandler<any, any, never>>) =>
      Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers })),
        Layer.provideMerge(Concurrency.layerMemoryLimits),
        Layer.provideMerge(SemaphoreProviderMemory.layer),
        Layer.provideMerge(JobStoreMemory.layer)
      )
  ],
  [
    "postgres",
    (handlers: ReadonlyArray<Handler.JobHandler<any, any, never>>) => pgWorkerEnv(handlers)
  ]
] as const

for (const [name, env] of setups) {
  describe(`Concurrency addon on ${name}`, () => {
    for (const limit of [1, 2, 5]) {
      it.live(`Semaphore(${limit}) Wait: never more than ${limit} running, every job succeeds once`, () => {
        const holders = new HolderCounter()
        const runs = new Map<number, number>()
        const handler = Handler.job(
          Work,
          ({ i, key }) =>
            holders.hold(key, Effect.sleep("5 millis").pipe(Effect.andThen(Effect.sync(() => runs.set(i, (runs.get(i) ?? 0) + 1))))),
          { policy: [Semaphore("shared", limit)] }
        )
        return Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const ids = yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => i), (i) => p.enqueue(Work, { key: "shared", i }))
          yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 8, pollInterval: "5 millis" }), drained(60_000)))
          expect(holders.max.get("shared")).toBeLessThanOrEqual(limit)
          if (limit > 1) expect(holders.max.get("shared")).toBeGreaterThan(1)
          for (let i = 0; i < 40; i++) expect(runs.get(i)).toBe(1)
          for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
          const counters = yield* (yield* JobStore).counters
          expect(counters.get("stats:succeeded")).toBe(40)
        }).pipe(Effect.provide(env([handler])))
      })
    }

    it.live("Mutex Skip: the surplus job is Deleted with the exact audit text and the handler never runs", () => {
      let runs = 0
      return Effect.gen(function* () {
        const inside = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const handler = Handler.job(
          Work,
          () => Effect.sync(() => runs++).pipe(Effect.andThen(Deferred.succeed(inside, undefined)), Effect.andThen(Deferred.await(release))),
          { policy: [Mutex("report")] }
        )
        return yield* Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const first = yield* p.enqueue(Work, { key: "report", i: 1 })
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "5 millis" })
              yield* Deferred.await(inside)
              const second = yield* p.enqueue(Work, { key: "report", i: 2 })
              // wait until the second job has been decided
              while ((yield* detail(second)).job.state !== "Deleted") yield* Effect.sleep("5 millis")
              const d = yield* detail(second)
              expect(d.logs.at(-1)).toMatchObject({ kind: "Cancelled", message: cancelledText("report", 1) })
              expect(d.logs.at(-1)!.message).toBe("Cancelled — 'report' full (1 slots)")
              yield* Deferred.succeed(release, undefined)
              yield* drained()
            })
          )
          expect((yield* detail(first)).job.state).toBe("Succeeded")
          expect(runs).toBe(1)
          expect((yield* (yield* JobStore).counters).get("stats:deleted")).toBe(1)
        }).pipe(Effect.provide(env([handler])))
      })
    })

    it.live("Mutex Wait (enqueue-time): the surplus job is requeued with the audit text and counter, then runs", () =>
      Effect.gen(function* () {
        const inside = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        let runs = 0
        const handler = Handler.job(Work, ({ i }) =>
          Effect.sync(() => runs++).pipe(
            Effect.andThen(i === 1 ? Deferred.succeed(inside, undefined).pipe(Effect.andThen(Deferred.await(release))) : Effect.void)
          )
        )
        return yield* Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const params = JobParameters.make().withMutex("user:1", "Wait")
          yield* p.enqueue(Work, { key: "user:1", i: 1 }, params)
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "5 millis" })
              yield* Deferred.await(inside)
              const second = yield* p.enqueue(Work, { key: "user:1", i: 2 }, params)
              while (!(yield* detail(second)).logs.some((l) => l.kind === "Requeued")) yield* Effect.sleep("5 millis")
              const d = yield* detail(second)
              expect(d.logs.find((l) => l.kind === "Requeued")!.message).toBe(requeuedText("user:1", 1))
              yield* Deferred.succeed(release, undefined)
              yield* drained()
              expect((yield* detail(second)).job.state).toBe("Succeeded")
            })
          )
          expect(runs).toBe(2)
          expect((yield* (yield* JobStore).counters).get("stats:requeued")).toBeGreaterThanOrEqual(1)
        }).pipe(Effect.provide(env([handler])))
      }))

    it.live("admin override wins over the declared limit; configure() sets key, limit and mode", () => {
      const holders = new HolderCounter()
      const handler = Handler.job(Work, ({ key }) => holders.hold(key, Effect.sleep("10 millis")), { policy: [Semaphore("api", 5)] })
      return Effect.gen(function* () {
        const limits = yield* ConcurrencyLimitManager
        yield* limits.addOrUpdateLimit("api", 2)
        const p = yield* Publisher.Publisher
        yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) => p.enqueue(Work, { key: "api", i }))
        const viaConfigure = JobParameters.make().configure(Concurrency.ConcurrencyMetadata, (m) => {
          m.key = "api"
          m.limit = 5
          m.mode = "Wait"
        })
        yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => p.enqueue(Work, { key: "api", i: 100 + i }, viaConfigure))
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 8, pollInterval: "5 millis" }), drained(60_000)))
        expect(holders.max.get("api")).toBe(2)
      }).pipe(Effect.provide(env([handler])))
    })

    it.live("no key: the provider is never called", () => {
      const failing = Layer.succeed(SemaphoreProvider, {
        tryAcquire: () => Effect.die(new Error("provider must not be called for keyless jobs"))
      })
      const handler = Handler.job(Work, () => Effect.void)
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* Effect.forEach([1, 2, 3], (i) => p.enqueue(Work, { key: "-", i }))
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "5 millis" }), drained()))
        for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
      }).pipe(
        Effect.provide(
          Publisher.layer.pipe(
            Layer.provideMerge(Registry.layer({ handlers: [handler] })),
            Layer.provideMerge(Concurrency.layerMemoryLimits),
            Layer.provideMerge(failing),
            Layer.provideMerge(JobStoreMemory.layer)
          )
        )
      )
    })
  })
}

describe("Concurrency addon registration", () => {
  it.live("without the addon, a handler's declared concurrency policy stops the worker from starting: nothing runs, nothing is lost", () => {
    const holders = new HolderCounter()
    const handler = Handler.job(Work, ({ key }) => holders.hold(key, Effect.sleep("20 millis")), { policy: [Mutex("k", { mode: "Wait" })] })
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const ids = yield* Effect.forEach([1, 2, 3, 4], (i) => p.enqueue(Work, { key: "k", i }))
      const exit = yield* Effect.exit(Effect.scoped(Worker.make({ concurrency: 4, pollInterval: "5 millis" })))
      expect(Exit.isFailure(exit) && Cause.pretty(exit.cause)).toContain(
        "UnenforcedPolicy: handler 'Work' of contract 'Work' declares a concurrency (Mutex / Semaphore) policy, but this worker has no addon that enforces it"
      )
      expect(holders.max.get("k")).toBeUndefined()
      for (const id of ids) expect((yield* detail(id)).job.state).toBe("Enqueued")
    }).pipe(
      Effect.provide(
        Publisher.layer.pipe(Layer.provideMerge(Registry.layer({ handlers: [handler] })), Layer.provideMerge(JobStoreMemory.layer))
      )
    )
  })

  it.live("Mutex(k) and Semaphore(k, 3) on one key share one pool: at most 3 at once", () => {
    const holders = new HolderCounter()
    const A = Contract.job("A", Schema.Struct({ i: Schema.Number }), { policy: [Mutex("pool", { mode: "Wait" })] })
    const B = Contract.job("B", Schema.Struct({ i: Schema.Number }), { policy: [Semaphore("pool", 3)] })
    const handlers = [Handler.job(A, () => holders.hold("pool", Effect.sleep("10 millis"))), Handler.job(B, () => holders.hold("pool", Effect.sleep("10 millis")))]
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      yield* Effect.forEach(Array.from({ length: 15 }, (_, i) => i), (i) => Effect.andThen(p.enqueue(A, { i }), p.enqueue(B, { i })))
      yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 8, pollInterval: "5 millis" }), drained(60_000)))
      expect(holders.max.get("pool")).toBeLessThanOrEqual(3)
      expect(holders.max.get("pool")).toBeGreaterThan(1)
    }).pipe(Effect.provide(setups[1][1](handlers)))
  })

  it.live("gate results are counted as an Effect metric per result and key family", () => {
    const handler = Handler.job(Work, () => Effect.void, { policy: [Semaphore("metric-family:a", 2)] })
    return Effect.gen(function* () {
      const counter = (result: string) =>
        Metric.value(Metric.withAttributes(gateTotal, { result, key_family: "metric-family" })).pipe(Effect.map((s) => s.count))
      const before = yield* counter("Acquired")
      const p = yield* Publisher.Publisher
      yield* Effect.forEach([1, 2, 3], (i) => p.enqueue(Work, { key: "x", i }))
      yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis" }), drained()))
      expect((yield* counter("Acquired")) - before).toBe(3)
    }).pipe(Effect.provide(setups[0][1]([handler])))
  })
})

describe("Semaphore declarations", () => {
  it("reject a limit that is not an integer >= 1, at declaration and at enqueue", () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => Semaphore("k", bad)).toThrow(/InvalidPolicy|integer >= 1/)
      expect(JobParameters.make().withSemaphore("k", bad).error?._tag).toBe("InvalidPolicy")
    }
    expect(() => Mutex("   ")).toThrow(/empty/)
    expect(() => Mutex("x".repeat(10_000))).toThrow(/at most/)
    expect(Mutex("ключ:🙂").value.key).toBe("ключ:🙂")
  })
})
