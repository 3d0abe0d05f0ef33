/**
 * Fifo-mode properties: for random workloads (keys with limits 1..3, jobs with handler durations,
 * some keyless), every key's jobs are claimed and started in enqueue order, never more than the limit
 * run at once, and no job is ever requeued (the store only hands out a key's jobs whose turn it is,
 * so the gate never finds the key full).
 *
 * 1. Memory store, several fibers under TestClock (1,000 cases, 4 shards of 250): jobs arrive while
 *    the worker runs (random gaps, the first 1 ms after it starts), deterministic and cheap — every
 *    wake-up is an arrival, a handler sleep or a (100 ms) idle poll, or a store hint one of them sent.
 * 2. PostgreSQL store and provider, two workers of three fibers, live clock (30 cases on one database,
 *    each with its own keys; the jobs are enqueued before the workers start, gaps unused).
 *
 * Start order: at limit 1 the handler start order of a key is its enqueue order. At limit N > 1 the
 * store's claim order is the enqueue order, and jobs claimed together may enter their handlers in
 * either order (two fibers race from claim to handler), so a job is overtaken by fewer than N later
 * jobs of its key — at N = 1, not at all.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as SqlClient from "effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as fc from "fast-check"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import {
  Concurrency,
  Contract,
  Handler,
  JobParameters,
  JobStoreMemory,
  Publisher,
  Registry,
  SemaphoreProviderMemory,
  Worker
} from "warp-effect"
import { JobStore, type JobStoreService } from "../../src/internal/store/JobStore.js"
import { HolderCounter } from "../support/holders.js"
import { pgWorkerEnv } from "../support/env.js"
import { drained } from "../support/runtime.js"
import { property } from "./fastCheck.js"

const FifoStep = Contract.job("FifoStep", Schema.Struct({ key: Schema.NullOr(Schema.String), ms: Schema.Number }))

interface FifoWorkload {
  readonly keys: ReadonlyArray<{ readonly limit: number }>
  readonly fibers: number
  /** In enqueue order; `gap`: ms after the previous enqueue (the memory run enqueues while the worker runs). */
  readonly jobs: ReadonlyArray<{ readonly key: number | null; readonly ms: number; readonly gap: number }>
}

const fifoWorkload = (durations: ReadonlyArray<number>, fibers: { min: number; max: number }): fc.Arbitrary<FifoWorkload> =>
  fc.array(fc.record({ limit: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 3 }).chain((keys) =>
    fc.record({
      keys: fc.constant(keys),
      fibers: fc.integer(fibers),
      jobs: fc.array(
        fc.record({
          key: fc.option(fc.integer({ min: 0, max: keys.length - 1 }), { freq: 6, nil: null }),
          ms: fc.constantFrom(...durations),
          gap: fc.constantFrom(0, 0, 30, 120)
        }),
        { minLength: 1, maxLength: 14 }
      )
    })
  )

/** What one case records: claims (store order), handler starts, live holders. */
class Recorder {
  readonly claims: Array<string> = []
  readonly starts = new Map<string, Array<string>>()
  readonly holders = new HolderCounter()
  /** The store, recording every claimed id in claim order. */
  wrap(inner: JobStoreService): JobStoreService {
    return { ...inner, fetch: (w, n, lease) => Effect.tap(inner.fetch(w, n, lease), (rows) => Effect.sync(() => this.claims.push(...rows.map((r) => r.id)))) }
  }
}

const handlerOf = (rec: Recorder, sleep: (ms: number) => Effect.Effect<void>) =>
  Handler.job(FifoStep, ({ key, ms }, info) =>
    key === null
      ? sleep(ms)
      : Effect.suspend(() => {
          rec.starts.set(key, [...(rec.starts.get(key) ?? []), info.jobId])
          return rec.holders.hold(key, sleep(ms))
        })
  )

const paramsOf = (w: FifoWorkload, key: number | null, name: (k: number) => string) =>
  key === null ? JobParameters.make() : JobParameters.make().withSemaphore(name(key), w.keys[key]!.limit, "Fifo")

/**
 * Checks one finished case; `claims` are the claimed ids in claim order. `boundedOvertaking`: at limit N,
 * fewer than N later jobs start before a job — true under TestClock, where claim and handler start are one
 * instant; on a live clock a claimed job still on its way through the gate may see later, quicker jobs start
 * and finish in the other slots, so only the claim order (and the start order at limit 1) is checked.
 */
const check = (
  w: FifoWorkload,
  rec: Recorder,
  ids: ReadonlyArray<string>,
  name: (k: number) => string,
  claims: ReadonlyArray<string> = rec.claims,
  boundedOvertaking = true
) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const context = JSON.stringify(w)
    for (const [k, { limit }] of w.keys.entries()) {
      const enqueued = ids.filter((_, i) => w.jobs[i]!.key === k)
      const mine = new Set(enqueued)
      expect(claims.filter((id) => mine.has(id)), `claim order of ${name(k)}: ${context}`).toEqual(enqueued)
      const started = rec.starts.get(name(k)) ?? []
      expect([...started].sort(), context).toEqual([...enqueued].sort())
      if (limit === 1) expect(started, `start order of ${name(k)}: ${context}`).toEqual(enqueued)
      if (boundedOvertaking) {
        for (const [pos, id] of enqueued.entries()) {
          const overtakers = started.slice(0, started.indexOf(id)).filter((o) => enqueued.indexOf(o) > pos)
          expect(overtakers.length, `overtakers of job ${pos} of ${name(k)}: ${context}`).toBeLessThan(limit)
        }
      }
      expect(rec.holders.max.get(name(k)) ?? 0, context).toBeLessThanOrEqual(limit)
    }
    for (const id of ids) {
      const d = Option.getOrThrow(yield* store.get(id))
      expect(d.job.state, context).toBe("Succeeded")
      expect(d.logs.filter((l) => l.kind === "Requeued"), context).toEqual([])
      expect(d.job.attempt, context).toBe(1)
    }
  })

const memoryKey = (k: number) => `fifo-${k}`

/**
 * The first arrival comes this long after the worker starts, so that every enqueue happens in a wake of
 * the TestClock (the end of a `sleep`). `TestClock.adjust` waits, after each sleep it ends, for the work
 * that wake set off — the store's wake-up hint, the lanes it wakes, their claims and attempts — to
 * suspend; an enqueue at time 0 from a fiber the clock never woke sets off work that runs alongside
 * `adjust` instead, which can then move the clock past the horizon before a woken lane's handler starts
 * its sleep (a lane picks a job up on the store's hint, not at its next poll, since instant pickup).
 */
const ARRIVALS_START_MS = 1

/**
 * One memory case: the worker starts, the jobs are enqueued one by one (each `gap` ms after the
 * previous) while it runs, and the clock runs to the horizon.
 */
const runMemory = (w: FifoWorkload) => {
  const rec = new Recorder()
  const env = Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [handlerOf(rec, (ms) => Effect.sleep(ms))] })),
    Layer.provideMerge(Concurrency.layerMemoryLimits),
    Layer.provideMerge(SemaphoreProviderMemory.layer),
    Layer.provideMerge(Layer.effect(JobStore, Effect.map(JobStoreMemory.make, (inner) => rec.wrap(inner))))
  )
  return Effect.gen(function* () {
    const p = yield* Publisher.Publisher
    const ids: Array<string> = []
    // everything done by then: the arrivals, the jobs one after another, a few idle polls
    const horizon = ARRIVALS_START_MS + w.jobs.reduce((n, j) => n + j.ms + j.gap, 0) + 300
    yield* Effect.scoped(
      Effect.gen(function* () {
        yield* Worker.make({ addons: [Concurrency.addon], concurrency: w.fibers, pollInterval: "100 millis", lease: "1 hour", gracePeriod: 0 })
        const arrivals = yield* Effect.forkScoped(
          Effect.andThen(
            Effect.sleep(ARRIVALS_START_MS),
            Effect.forEach(
              w.jobs,
              (j) =>
                Effect.andThen(
                  Effect.sleep(j.gap),
                  Effect.map(p.enqueue(FifoStep, { key: j.key === null ? null : memoryKey(j.key), ms: j.ms }, paramsOf(w, j.key, memoryKey)), (id) => ids.push(id))
                ),
              { discard: true }
            )
          )
        )
        yield* TestClock.adjust(horizon)
        yield* Fiber.join(arrivals)
      })
    )
    yield* check(w, rec, ids, memoryKey)
  }).pipe(Effect.provide(env))
}

describe.concurrent("Fifo: memory store, several fibers under TestClock (4 x 250 cases)", () => {
  for (let shard = 0; shard < 4; shard++) {
    layer(Layer.empty)(`shard ${shard}`, (it) => {
      property(it.effect,
        "per key: claims and starts in enqueue order, at most the limit inside, no requeue",
        [fifoWorkload([10, 20, 30], { min: 2, max: 6 })],
        ([w]) => runMemory(w),
        { fastCheck: { numRuns: 250 }, timeout: 300_000 }
      )
    })
  }
})

describe("Fifo: PostgreSQL store and provider, two workers x 3 fibers, live clock", () => {
  let run = 0
  const rec = { current: new Recorder() }
  const handler = Handler.job(FifoStep, (payload, info) =>
    Effect.suspend(() => handlerOf(rec.current, (ms) => (ms === 0 ? Effect.yieldNow : Effect.sleep(ms))).run(payload, info))
  )
  const env = pgWorkerEnv([handler])
  layer(env, { timeout: 60_000, excludeTestServices: true })((it) => {
    property(it.effect,
      "per key: claims and starts in enqueue order, at most the limit inside, no requeue (30 workloads)",
      [fifoWorkload([0, 1, 3, 8], { min: 3, max: 3 })],
      ([w]) => {
        run++
        const key = (k: number) => `pg-${run}-${k}`
        rec.current = new Recorder()
        return Effect.gen(function* () {
          const p = yield* Publisher.Publisher
          const ids: Array<string> = []
          for (const j of w.jobs) ids.push(yield* p.enqueue(FifoStep, { key: j.key === null ? null : key(j.key), ms: j.ms }, paramsOf(w, j.key, key)))
          yield* Effect.scoped(
            Effect.gen(function* () {
              for (const id of ["a", "b"]) yield* Worker.make({ addons: [Concurrency.addon], workerId: `fifo-${run}-${id}`, concurrency: w.fibers, pollInterval: "5 millis" })
              yield* drained(30_000, "5 millis")
            })
          )
          // claim order as the database saw it (the audit entries' sequence): fetch results of two
          // connections may reach their fibers in either order
          const sql = yield* SqlClient.SqlClient
          const claimed = yield* sql<{ job_id: string }>`SELECT job_id FROM warp_job_logs WHERE kind = 'Processing' AND job_id IN ${sql.in(ids)} ORDER BY id`
          yield* check(w, rec.current, ids, key, claimed.map((r) => r.job_id), false)
        })
      },
      { fastCheck: { numRuns: 30 }, timeout: 300_000 }
    )
  })
})
