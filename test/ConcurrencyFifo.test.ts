import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import {
  Concurrency,
  Contract,
  Handler,
  JobParameters,
  JobStoreMemory,
  Mutex,
  Registry,
  Saga,
  SemaphoreProviderMemory,
  Worker
} from "warp-effect"
import * as Publisher from "../src/internal/publisher/Publisher.js"
import * as Recurring from "../src/internal/job/Recurring.js"
import * as Scheduler from "../src/internal/publisher/Scheduler.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import { HolderCounter } from "./support/holders.js"
import { detail, drained } from "./support/runtime.js"
import { pgWorkerEnv } from "./support/env.js"

const Entry = Contract.job("Entry", Schema.Struct({ key: Schema.String, i: Schema.Number, ms: Schema.Number }))

const pgEnv = pgWorkerEnv

/** Every audit entry of kind Requeued among `ids`. */
const requeues = (ids: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(ids, (id) => detail(id)),
    (ds) => ds.flatMap((d) => d.logs.filter((l) => l.kind === "Requeued").map((l) => `${d.job.id}: ${l.message}`))
  )

describe("Fifo mode on PostgreSQL, two workers x 4 fibers", () => {
  it.live("never more than the limit inside, per-key start order is enqueue order, zero requeues", () => {
    const limits: Record<string, number> = { "acct-1": 1, "acct-2": 2, "acct-3": 1, "acct-4": 3 }
    const holders = new HolderCounter()
    const starts = new Map<string, Array<number>>()
    const handler = Handler.job(Entry, ({ i, key, ms }) =>
      Effect.suspend(() => {
        starts.set(key, [...(starts.get(key) ?? []), i])
        return holders.hold(key, Effect.sleep(ms))
      })
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const keys = Object.keys(limits)
      const enqueued = new Map<string, Array<number>>()
      const ids: Array<string> = []
      for (let i = 0; i < 80; i++) {
        const key = keys[(i * 7 + (i >> 2)) % keys.length]!
        enqueued.set(key, [...(enqueued.get(key) ?? []), i])
        ids.push(yield* p.enqueue(Entry, { key, i, ms: 1 + (i % 4) }, JobParameters.make().withSemaphore(key, limits[key]!, "Fifo")))
      }
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "fifo-a", concurrency: 4, pollInterval: "5 millis" })
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "fifo-b", concurrency: 4, pollInterval: "5 millis" })
          yield* drained(60_000)
        })
      )
      for (const key of keys) {
        const order = enqueued.get(key)!
        const started = starts.get(key) ?? []
        expect(holders.max.get(key), key).toBeLessThanOrEqual(limits[key]!)
        expect([...started].sort((a, b) => a - b), key).toEqual(order)
        // start order is strict at limit 1; at limit N the claims are in order (checked on PostgreSQL by
        // test/properties/fifo.test.ts), while a claimed job still on its way through the gate may see
        // later, quicker jobs start and finish in the other slots
        if (limits[key] === 1) expect(started, key).toEqual(order)
      }
      expect(yield* requeues(ids)).toEqual([])
      const counters = yield* (yield* JobStore).counters
      expect(counters.get("stats:succeeded")).toBe(80)
      expect(counters.get("stats:requeued") ?? 0).toBe(0)
    }).pipe(Effect.provide(pgEnv([handler])))
  })

  it.live("a contract-declared Fifo Mutex is carried onto the row at publish and runs in submission order", () => {
    const Ledger = Contract.job("Ledger", Schema.Struct({ i: Schema.Number }), { policy: [Mutex("ledger", { mode: "Fifo" })] })
    const started: Array<number> = []
    const holders = new HolderCounter()
    const handler = Handler.job(Ledger, ({ i }) => Effect.suspend(() => (started.push(i), holders.hold("ledger", Effect.sleep(i % 3)))))
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const ids = yield* Effect.forEach(Array.from({ length: 30 }, (_, i) => i), (i) => p.enqueue(Ledger, { i }))
      const first = yield* detail(ids[0]!)
      expect((first.job.metadata as any).policies.concurrency).toEqual({ source: "contract", value: { key: "ledger", limit: 1, mode: "Fifo" } })
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "ledger-a", concurrency: 4, pollInterval: "5 millis" })
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "ledger-b", concurrency: 4, pollInterval: "5 millis" })
          yield* drained(60_000)
        })
      )
      expect(started).toEqual(Array.from({ length: 30 }, (_, i) => i))
      expect(holders.max.get("ledger")).toBe(1)
      expect(yield* requeues(ids)).toEqual([])
      // the first attempt stamped the contract's policy
      expect((yield* detail(ids[0]!)).job.metadata).toMatchObject({ policies: { concurrency: { source: "contract" } }, stampedAt: expect.any(String) })
    }).pipe(Effect.provide(pgEnv([handler])))
  })
  it.live("a message's rows of one Fifo key join one line: publish order, then handler registration order", () => {
    // the contract's Fifo Mutex applies to every handler that declares nothing; `audit` declares its own
    const Posted = Contract.message("Posted", Schema.Struct({ i: Schema.Number }), { policy: [Mutex("feed", { mode: "Fifo" })] })
    const started: Array<string> = []
    const holders = new HolderCounter()
    const run = (name: string) => ({ i }: { i: number }) =>
      Effect.suspend(() => (started.push(`${name}${i}`), holders.hold("feed", Effect.sleep(i % 2))))
    const handlers = [
      Handler.message(Posted, "index", run("index")),
      Handler.message(Posted, "mail", run("mail")),
      Handler.message(Posted, "audit", (_: { i: number }) => Effect.void, { policy: [Mutex("audit", { mode: "Skip" })] })
    ]
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const ids = (yield* Effect.forEach(Array.from({ length: 12 }, (_, i) => i), (i) => p.publish(Posted, { i }))).flat()
      // the handler's own (non-Fifo) policy wins resolution, so nothing is carried onto its rows
      const sources = yield* Effect.forEach(ids.slice(0, 3), (id) => Effect.map(detail(id), (d) => (d.job.metadata as any).policies.concurrency?.source))
      expect(sources).toEqual(["contract", "contract", undefined])
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "feed-a", concurrency: 4, pollInterval: "5 millis" })
          yield* Worker.make({ addons: [Concurrency.addon], workerId: "feed-b", concurrency: 4, pollInterval: "5 millis" })
          yield* drained(60_000)
        })
      )
      expect(started).toEqual(Array.from({ length: 12 }, (_, i) => [`index${i}`, `mail${i}`]).flat())
      expect(holders.max.get("feed")).toBe(1)
      expect(yield* requeues(ids)).toEqual([])
    }).pipe(Effect.provide(pgEnv(handlers)))
  })
})

describe("Fifo policy carried onto rows not written by the publisher", () => {
  it.effect("a recurring firing carries the contract's (or the registered handler's) Fifo policy, and nothing else", () => {
    const Tick = Contract.job("Tick", Schema.Struct({ n: Schema.Number }), { policy: [Mutex("tick", { mode: "Fifo" })] })
    const Plain = Contract.job("PlainTick", Schema.Struct({ n: Schema.Number }), { policy: [Mutex("plain")] })
    const Own = Contract.job("OwnTick", Schema.Struct({ n: Schema.Number }))
    const handlers = [Handler.job(Own, () => Effect.void, { policy: [Mutex("own", { mode: "Fifo" })] })]
    return Effect.gen(function* () {
      const store = yield* JobStore
      const metadataOf = (r: Recurring.Recurring) =>
        Effect.flatMap(Scheduler.fire(r, new Date(0)), () =>
          Effect.map(store.get(Recurring.firingId(r.id, new Date(0))), (d) => (d._tag === "Some" ? d.value.job.metadata : undefined))
        )
      expect(yield* metadataOf(Recurring.make("tick", Tick, "* * * * *", { n: 1 }))).toEqual({
        policies: { concurrency: { source: "contract", value: { key: "tick", limit: 1, mode: "Fifo" } } }
      })
      expect(yield* metadataOf(Recurring.make("plain", Plain, "* * * * *", { n: 1 }))).toEqual({ policies: {} })
      expect(yield* metadataOf(Recurring.make("own", Own, "* * * * *", { n: 1 }))).toEqual({
        policies: { concurrency: { source: "handler", value: { key: "own", limit: 1, mode: "Fifo" } } }
      })
    }).pipe(Effect.provide(Layer.merge(JobStoreMemory.layer, Registry.layer({ handlers }))))
  })

  it("nothing is carried for a saga (policy-exempt), even when its contract declares a Fifo Mutex", () => {
    const Step = Contract.job("FifoSagaStep", Schema.Struct({ id: Schema.String }), { policy: [Mutex("saga", { mode: "Fifo" })] })
    const saga = Saga.saga(Step, { correlate: ({ id }) => id, run: () => Effect.succeed(Saga.SagaStep.Complete()) })
    expect(Publisher.fifoCarry(Step, saga)).toBeUndefined()
    expect(Publisher.publishMetadata(Step, JobParameters.make(), new Date(0), saga).policies).toEqual({})
    // no handler registered in this process: the contract's policy is carried
    expect(Publisher.fifoCarry(Step, undefined)?.source).toBe("contract")
  })
})

describe("Fifo mode on the memory store, under TestClock", () => {
  it.effect("a failing job retrying with backoff keeps its place: the next job of its key waits for its last attempt", () => {
    const Step = Contract.job("RetryStep", Schema.Struct({ name: Schema.String }))
    const log: Array<string> = []
    const tries = new Map<string, number>()
    const handler = Handler.job(Step, ({ name }, info) =>
      Effect.suspend(() => {
        log.push(`${name}#${info.attempt}`)
        tries.set(name, (tries.get(name) ?? 0) + 1)
        return name === "a" && tries.get(name)! < 3 ? Effect.fail("not yet") : Effect.sleep(10)
      })
    )
    const env = Publisher.layer.pipe(
      Layer.provideMerge(Registry.layer({ handlers: [handler] })),
      Layer.provideMerge(Concurrency.layerMemoryLimits),
      Layer.provideMerge(SemaphoreProviderMemory.layer),
      Layer.provideMerge(JobStoreMemory.layer)
    )
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const params = JobParameters.make().withMutex("acct", "Fifo").withRetry(3, { initialDelay: "1 second" })
      const ids = yield* Effect.forEach(["a", "b", "c"], (name) => p.enqueue(Step, { name }, params))
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 3, pollInterval: "100 millis", lease: "1 hour", gracePeriod: 0 })
          // a fails at 0 and ~1 s, succeeds at ~3 s; b and c wait for it, though due all along
          yield* TestClock.adjust("10 seconds")
        })
      )
      expect(log).toEqual(["a#1", "a#2", "a#3", "b#1", "c#1"])
      const details = yield* Effect.forEach(ids, (id) => Effect.flatMap(JobStore, (s) => s.get(id)))
      expect(details.map((d) => (d._tag === "Some" ? d.value.job.state : "missing"))).toEqual(["Succeeded", "Succeeded", "Succeeded"])
      expect(details.map((d) => (d._tag === "Some" ? d.value.job.attempt : -1))).toEqual([3, 1, 1])
    }).pipe(Effect.provide(env))
  })
})
