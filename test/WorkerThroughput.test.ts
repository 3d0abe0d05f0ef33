import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import { gateTotal } from "../src/internal/concurrency/ConcurrencyBehavior.js"
import * as Option from "effect/Option"
import pg from "pg"
import { Concurrency, Contract, Handler, JobParameters, Publisher, SemaphoreProvider, Worker } from "warp-effect"
import { JobStore } from "../src/internal/store/JobStore.js"
import { HolderCounter } from "./support/holders.js"
import { detail, drained } from "./support/runtime.js"
import { pgWorkerEnv } from "./support/env.js"

const Work = Contract.job("Work", Schema.Struct({ key: Schema.String, i: Schema.Number }))

const env = pgWorkerEnv

/** Gate acquisitions of keys in family `family` so far in this process. */
const acquired = (family: string) =>
  Metric.value(Metric.withAttributes(gateTotal, { result: "Acquired", key_family: family })).pipe(Effect.map((s) => s.count))

describe("Worker on PostgreSQL: slot reuse, contended keys, batches", () => {
  it.live("keyed jobs, one claim per attempt (maxBatch 1): each attempt's finalizing write claims the next and takes its slot, so the lane runs neither a claim nor a slot scan of its own", () => {
    let fetches = 0
    // the provider's own slot scans (statements that try slot locks without touching warp_jobs), counted at the driver
    let scans = 0
    const query = pg.Client.prototype.query
    const counting = function (this: unknown, ...args: Array<any>) {
      const text = typeof args[0] === "string" ? args[0] : args[0]?.text
      if (typeof text === "string" && text.includes("pg_try_advisory_lock") && !text.includes("warp_jobs")) scans++
      return (query as any).apply(this, args)
    }
    const runs = new Map<number, number>()
    const handler = Handler.job(Work, ({ i }) => Effect.sync(() => runs.set(i, (runs.get(i) ?? 0) + 1)))
    // the store with its `fetch` calls counted (the claims a lane runs on its own)
    const counted = Layer.effect(
      JobStore,
      Effect.map(JobStore, (store): JobStore["Service"] => ({ ...store, fetch: (...args) => Effect.tap(store.fetch(...args), () => Effect.sync(() => void fetches++)) }))
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const ids = yield* Effect.forEach(Array.from({ length: 30 }, (_, i) => i), (i) =>
        p.enqueue(Work, { key: `carry:${i}`, i }, JobParameters.make().withSemaphore(`carry:${i}`, 1, "Wait")))
      yield* Effect.acquireUseRelease(
        Effect.sync(() => void (pg.Client.prototype.query = counting as any)),
        () => Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 1, maxBatch: 1, pollInterval: "20 millis" }), drained(60_000))),
        () => Effect.sync(() => void (pg.Client.prototype.query = query))
      )
      for (let i = 0; i < 30; i++) expect(runs.get(i)).toBe(1)
      for (const id of ids) {
        const d = yield* detail(id)
        expect([d.job.state, d.job.attempt]).toEqual(["Succeeded", 1])
      }
      // without the carried claim: 30 claims or more (one per attempt, then the polls of an idle lane);
      // without the carried admission: 30 scans (one per attempt)
      expect(fetches).toBeLessThan(10)
      expect(scans).toBeGreaterThan(0)
      expect(scans).toBeLessThan(10)
    }).pipe(Effect.provide(Layer.provideMerge(counted, env([handler]))))
  })

  for (const reuse of [true, false]) {
    it.live(`Mutex Wait on one key, slot reuse ${reuse ? "on" : "off"}: one holder at a time, every job once${reuse ? ", fewer gate passes than jobs" : ", one gate pass per job"}`, () => {
      const holders = new HolderCounter()
      const runs = new Map<number, number>()
      const family = `reuse${reuse}`
      const handler = Handler.job(Work, ({ i, key }) =>
        holders.hold(key, Effect.sleep("2 millis").pipe(Effect.andThen(Effect.sync(() => runs.set(i, (runs.get(i) ?? 0) + 1)))))
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const params = JobParameters.make().withMutex(`${family}:1`, "Wait")
        const ids = yield* Effect.forEach(Array.from({ length: 60 }, (_, i) => i), (i) => p.enqueue(Work, { key: `${family}:1`, i }, params))
        const before = yield* acquired(family)
        yield* Effect.scoped(
          Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 6, pollInterval: "5 millis", ...(reuse ? { slotReuse: {} } : { slotReuse: false }) }), drained(60_000))
        )
        const passes = (yield* acquired(family)) - before
        expect(holders.max.get(`${family}:1`)).toBe(1)
        for (let i = 0; i < 60; i++) expect(runs.get(i)).toBe(1)
        for (const id of ids) expect((yield* detail(id)).job.state).toBe("Succeeded")
        if (reuse) expect(passes).toBeLessThan(60)
        else expect(passes).toBe(60)
      }).pipe(Effect.provide(env([handler])))
    })
  }

  for (const reuse of [false, true]) {
  it.live(`Semaphore(3) Wait, slot reuse ${reuse ? "on" : "off"}: never more than 3 running, and the key's Mutex jobs one at a time${reuse ? " (a Mutex job never chained under a semaphore slot)" : ""}`, () => {
    const holders = new HolderCounter()
    const mutexHolders = new HolderCounter()
    let runs = 0
    const handler = Handler.job(Work, ({ i, key }) =>
      holders.hold(
        key,
        (i % 2 === 0 ? mutexHolders.hold(key, Effect.sleep("3 millis")) : Effect.sleep("3 millis")).pipe(Effect.andThen(Effect.sync(() => runs++)))
      )
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      yield* Effect.forEach(Array.from({ length: 60 }, (_, i) => i), (i) =>
        p.enqueue(Work, { key: "api", i }, i % 2 === 0 ? JobParameters.make().withMutex("api", "Wait") : JobParameters.make().withSemaphore("api", 3))
      )
      yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 8, pollInterval: "5 millis", ...(reuse ? { slotReuse: {} } : {}) }), drained(60_000)))
      expect(holders.max.get("api")).toBeLessThanOrEqual(3)
      expect(mutexHolders.max.get("api")).toBe(1)
      expect(runs).toBe(60)
    }).pipe(Effect.provide(env([handler])))
  })
  }

  it.live("closing the worker while it holds a batch of claims hands every unstarted claim back: nothing is left Processing", () => {
    let runs = 0
    const handler = Handler.job(Work, () => Effect.sync(() => runs++))
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      yield* Effect.forEach(Array.from({ length: 300 }, (_, i) => i), (i) => p.enqueue(Work, { key: "-", i }))
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "5 millis" })
          while (runs < 40) yield* Effect.sleep("2 millis")
        })
      )
      const counts = yield* (yield* JobStore).countByState
      expect(counts.Processing).toBe(0)
      expect(counts.Succeeded).toBe(runs)
      expect(counts.Succeeded + counts.Enqueued).toBe(300)
    }).pipe(Effect.provide(env([handler])))
  })

  it.live("closing the worker while slot holders chain jobs under their slots: every finished handler's result is written, nothing is left Processing, no slot stays taken", () => {
    let runs = 0
    const holders = new HolderCounter()
    const handler = Handler.job(Work, ({ key }) => holders.hold(key, Effect.sync(() => runs++)))
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const params = JobParameters.make().withSemaphore("chain", 2, "Wait")
      yield* Effect.forEach(Array.from({ length: 400 }, (_, i) => i), (i) => p.enqueue(Work, { key: "chain", i }, params))
      const before = yield* acquired("chain")
      // a handler's result takes a while to write (claims handed back at the close do not): a chain's
      // writes are still in flight when the worker closes
      const store = yield* JobStore
      const slow = {
        ...store,
        finalize: (f: Parameters<typeof store.finalize>[0]) =>
          Effect.andThen(f.outcome._tag === "Succeeded" ? Effect.sleep("60 millis") : Effect.void, store.finalize(f))
      }
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 4, pollInterval: "5 millis", slotReuse: {} })
          while (runs < 60) yield* Effect.yieldNow
        })
      ).pipe(Effect.provideService(JobStore, slow))
      const counts = yield* (yield* JobStore).countByState
      expect(counts.Processing).toBe(0)
      expect(counts.Succeeded).toBe(runs)
      expect(counts.Succeeded + counts.Enqueued).toBe(400)
      expect(holders.max.get("chain")).toBeLessThanOrEqual(2)
      // the jobs ran in chains (fewer gate passes than jobs), and both slots are free again
      expect((yield* acquired("chain")) - before).toBeLessThan(runs)
      const provider = yield* SemaphoreProvider.SemaphoreProvider
      const free = yield* Effect.scoped(
        Effect.all([provider.tryAcquire("warp:concurrency:chain", 2, 0), provider.tryAcquire("warp:concurrency:chain", 2, 0)])
      )
      expect(free.every(Option.isSome)).toBe(true)
    }).pipe(Effect.provide(env([handler])))
  })
})
