/**
 * A run whose slot lapsed (no renewal within the provider's deadline: the process was paused or cut
 * off, so the slot may have been granted again) is not recorded as its handler's outcome: the worker
 * checks the slots it holds after the handler, before the finalizing write, and records a requeue that
 * says so (`warp_concurrency_slot_lapsed_total` counts it). The job runs again under a valid slot.
 *
 * 1. A provider whose slots lapse on demand (the memory provider's, with `lapsed` set by the test):
 *    the exact text, the counter, one more run; a slot that did not lapse changes nothing.
 * 2. PostgreSQL: the handler blocks the worker's event loop for longer than the provider's deadline (a
 *    pause: no ping can run, the server ends the slot's session): the paused run is not recorded as a
 *    success (its slot is found lost or lapsed), and the job succeeds on its next run.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, JobParameters, JobStoreMemory, JobStorePg, Publisher, Registry, Saga, SemaphoreProviderMemory, SemaphoreProviderPg, Worker } from "warp-effect"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { lapsedText } from "../../src/internal/attempt/Attempt.js"
import { lapsedTotal } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { freshPgLayer } from "../support/db.js"
import { detail, until } from "../support/runtime.js"

const Step = Contract.job("LapseStep", Schema.Struct({ n: Schema.Number }))

const lapsedCount = Effect.map(Metric.value(Metric.withAttributes(lapsedTotal, { key_family: "lapse-k" })), (s) => s.count)

describe("a lapsed slot", () => {
  it.live("is requeued with the lapse text instead of the handler's outcome, counted, and runs again", () => {
    let runs = 0
    // the first run's slot lapses (as after a pause); later ones do not
    const handler = Handler.job(Step, () => Effect.sync(() => void runs++))
    const lapsing = Layer.effect(
      SemaphoreProvider,
      Effect.map(SemaphoreProviderMemory.make, (inner) => ({
        tryAcquire: (name: string, limit: number, timeout: Parameters<typeof inner.tryAcquire>[2]) =>
          Effect.map(inner.tryAcquire(name, limit, timeout), Option.map((slot) => ({ ...slot, lapsed: Effect.sync(() => runs === 1) })))
      }))
    )
    const env = Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers: [handler] })),
      Layer.provideMerge(Concurrency.layerMemoryLimits),
      Layer.provideMerge(lapsing),
      Layer.provideMerge(JobStoreMemory.layer)
    )
    return Effect.gen(function* () {
      const before = yield* lapsedCount
      const p = yield* Publisher.Publisher
      const id = yield* p.enqueue(Step, { n: 1 }, JobParameters.make().withMutex("lapse-k", "Wait"))
      const d = yield* Effect.scoped(
        Effect.andThen(
          Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis" }),
          until(detail(id), (d) => d.job.state === "Succeeded", 10_000)
        )
      )
      expect(runs).toBe(2)
      const requeues = d.logs.filter((l) => l.kind === "Requeued").map((l) => l.message)
      expect(requeues).toEqual([lapsedText("Slot of 'lapse-k'")])
      expect(d.logs.filter((l) => l.kind === "Succeeded")).toHaveLength(1)
      expect((yield* lapsedCount) - before).toBe(1)
    }).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
  })
})

describe("a lapsed saga lock", () => {
  it.live("a saga step whose correlation lock lapsed is requeued with the lapse text, and runs again", () => {
    let runs = 0
    const Order = Contract.job("LapseSaga", Schema.Struct({ order: Schema.String }))
    const saga = Saga.saga(Order, { correlate: ({ order }) => order, run: () => Effect.sync(() => void runs++).pipe(Effect.as(Saga.SagaStep.Complete())) })
    // the store's locks (saga serialization): the first run's lock lapses (as after a pause)
    const store = Layer.effect(
      JobStore,
      Effect.map(JobStoreMemory.make, (inner) => ({
        ...inner,
        locks: {
          ...inner.locks,
          tryAcquire: (name: string, limit: number, timeout: Parameters<typeof inner.locks.tryAcquire>[2]) =>
            Effect.map(inner.locks.tryAcquire(name, limit, timeout), Option.map((slot) => ({ ...slot, lapsed: Effect.sync(() => runs === 1) })))
        }
      }))
    )
    const env = Publisher.layer.pipe(Layer.provideMerge(Registry.layer({ handlers: [saga] })), Layer.provideMerge(store))
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const id = yield* p.enqueue(Order, { order: "o-1" })
      const d = yield* Effect.scoped(
        Effect.andThen(Worker.make({ concurrency: 1, pollInterval: "5 millis" }), until(detail(id), (d) => d.job.state === "Succeeded", 10_000))
      )
      expect(runs).toBe(2)
      const requeues = d.logs.filter((l) => l.kind === "Requeued").map((l) => l.message)
      expect(requeues).toHaveLength(1)
      expect(requeues[0]).toMatch(/^Lock of saga correlation '.*o-1' lapsed while running/)
      expect(requeues[0]).toBe(lapsedText(requeues[0]!.slice(0, requeues[0]!.indexOf(" lapsed while running"))))
    }).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
  })
})

/** Blocks this thread's event loop for `ms` (a process pause: no timer, no socket read runs meanwhile). */
const pause = (ms: number) => {
  const cell = new Int32Array(new SharedArrayBuffer(4))
  Atomics.wait(cell, 0, 0, ms)
}

const PauseStep = Contract.job("PauseStep", Schema.Struct({ pause: Schema.Number }))

describe("a lapsed slot on PostgreSQL", () => {
  it.live("a handler that pauses its process past the provider's deadline is not recorded as a success", () => {
    let runs = 0
    const handler = Handler.job(PauseStep, ({ pause: ms }) =>
      Effect.sync(() => {
        // the first run pauses longer than the deadline (1.2 s): its pings cannot run, the server ends its
        // session (idle_session_timeout) and the marker expires
        if (++runs === 1) pause(ms)
      })
    )
    const db = freshPgLayer(20)
    const env = Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers: [handler] })),
      Layer.provideMerge(Concurrency.layer),
      Layer.provideMerge(SemaphoreProviderPg.layer({ deadline: "1200 millis", pingInterval: "100 millis" })),
      Layer.provideMerge(JobStorePg.layer),
      Layer.provideMerge(db)
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const id = yield* p.enqueue(PauseStep, { pause: 2_500 }, JobParameters.make().withMutex("pause-k", "Wait"))
      const d = yield* Effect.scoped(
        Effect.andThen(
          Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis", lease: "30 seconds" }),
          until(detail(id), (d) => d.job.state === "Succeeded", 30_000)
        )
      )
      expect(runs).toBe(2)
      // the paused run ended in a requeue (its slot lost or lapsed), never in a success of its own
      const first = d.logs.filter((l) => ["Requeued", "Succeeded", "Failed", "Deleted"].includes(l.kind))[0]!
      expect(first.kind).toBe("Requeued")
      expect(first.message).toMatch(/^Slot of 'pause-k' (lost while running|lapsed while running)/)
      expect(d.logs.filter((l) => l.kind === "Succeeded")).toHaveLength(1)
    }).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
  }, 60_000)
})
