/**
 * `CancelRunning` keys against a model, on generated schedules: one to three keys (limits 1-3), every
 * job `CancelRunning`, handler durations and arrival offsets such that newer jobs come while older
 * ones run, 1-5 worker fibers, yields before each provider call. The model is in
 * `test/support/cancelRunningModel.ts`: per key at most `limit` inside at every instant (and, on
 * memory, at most `limit` slots held); every job Succeeded after one uninterrupted run, or Deleted with
 * `Cancelled — replaced by newer job {id} of '{key}'` (` (running attempt N interrupted)` exactly when
 * its handler had started, which was then interrupted), `{id}` a newer job of its key whose requeue
 * asked for it; exact requeue texts; the newest job of each key Succeeded.
 *
 * 1. Memory store and provider under `TestClock` (`TestRuntime.run`, cancel checks every 10 virtual ms).
 * 2. PostgreSQL, live, two workers on one database (fewer cases).
 * Both also require that the cases did replace running holders (not only queued ones); each property
 * includes one fixed case that does (a long holder and a newer job arriving while it runs), so this
 * does not hang on what the random cases happen to reach.
 */
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, JobParameters, Publisher, Registry, SemaphoreProviderMemory, Worker } from "warp-effect"
import { TestRuntime } from "warp-effect/testing"
import { SemaphoreProvider } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { cancelText, JobStore, replacedCause } from "../../src/internal/store/JobStore.js"
import { Ledger } from "../support/capModel.js"
import { checkCancelRunning, crParameters, type CrWorkload, crWorkload } from "../support/cancelRunningModel.js"
import { pgModelEnv } from "../support/env.js"
import { detail, drained, until } from "../support/runtime.js"
import { property } from "./fastCheck.js"

const CrStep = Contract.job("CrStep", Schema.Struct({ index: Schema.Number, ms: Schema.Number }))

const crHandler = (w: CrWorkload, ledger: Ledger, body: (jobId: string, ms: number) => Effect.Effect<void, unknown>) =>
  Handler.job(CrStep, ({ index, ms }, info) => ledger.hold(info.jobId, w.keys[w.jobs[index]!.key]!, undefined, body(info.jobId, ms)))

/** What the cases exercised, over a whole property. */
const seen = { memory: { cases: 0, replaced: 0, interrupted: 0 }, postgres: { cases: 0, replaced: 0, interrupted: 0 } }

/**
 * One case every run includes (fast-check `examples`): a long holder of a Mutex and a newer job that
 * arrives while it runs, so the interrupting path is exercised whatever the random cases reach.
 */
const interruptingCase = (holderMs: number, newerAtMs: number) => ({
  keys: [{ name: "cr0", limit: 1 }],
  jobs: [
    { index: 0, key: 0, durationMs: holderMs, arrivalMs: 0 },
    { index: 1, key: 0, durationMs: 0, arrivalMs: newerAtMs }
  ],
  fibers: 2,
  yields: [0]
})

afterAll(() => {
  console.log(`CancelRunning model: ${JSON.stringify(seen)}`)
  // the schedules do reach the interesting path: running holders replaced by newer jobs
  for (const s of Object.values(seen)) if (s.cases >= 5) expect(s.interrupted).toBeGreaterThan(0)
})

describe("CancelRunning against the model: memory, TestClock", () => {
  property(it.effect,
    "per key never over the limit; replaced holders Deleted with the exact text by a newer job; the newest of each key Succeeded",
    [crWorkload({ maxJobs: 7, durationsMs: [0, 10, 30, 60, 100], maxArrivalMs: 120, maxFibers: 5, maxLimit: 3 })],
    ([w]) =>
      Effect.gen(function* () {
        const ledger = new Ledger(true)
        const run = yield* TestRuntime.run({
          handlers: [crHandler(w, ledger, (jobId) => TestRuntime.play(jobId))],
          workload: {
            keys: [],
            jobs: w.jobs.map((j) => ({
              index: j.index,
              concurrency: { key: w.keys[j.key]!.name, limit: w.keys[j.key]!.limit, mode: "Wait" as const },
              durationMs: j.durationMs,
              result: "succeed" as const,
              arrivalMs: j.arrivalMs
            }))
          },
          enqueue: (job) => Effect.flatMap(Publisher.Publisher, (p) => p.enqueue(CrStep, { index: job.index, ms: job.durationMs }, crParameters(w.keys[w.jobs[job.index]!.key]!))),
          worker: { concurrency: w.fibers, cancelCheckInterval: "10 millis" },
          semaphoreProvider: Layer.effect(SemaphoreProvider, Effect.map(SemaphoreProviderMemory.make, (inner) => ledger.provider(inner, w.yields))),
          maxVirtualTime: "2 minutes"
        })
        // submission order: enqueue order (time-ordered ids)
        const jobs = [...run.jobs].sort((a, b) => (a.id < b.id ? -1 : 1)).map((j) => ({ job: w.jobs[j.job.index]!, id: j.id, state: j.state, logs: j.logs }))
        const { interrupted, problems, replaced } = checkCancelRunning(w, ledger, jobs)
        seen.memory.cases++
        seen.memory.replaced += replaced
        seen.memory.interrupted += interrupted
        expect([...ledger.problems(), ...problems], JSON.stringify(w)).toEqual([])
      }),
    { fastCheck: { numRuns: 40, examples: [[interruptingCase(100, 50)]] }, timeout: 60_000, testServicesPerCase: true }
  )
})

const pgShared = pgModelEnv

let pgCase = 0

layer(pgShared, { excludeTestServices: true, timeout: "60 seconds" })("CancelRunning against the model: PostgreSQL, live", (it) => {
  property(it.effect,
    "two workers on one database: the same model",
    // arrivals on a coarse grid: some jobs arrive together (one batch)
    [crWorkload({ maxJobs: 7, durationsMs: [0, 20, 60, 150], maxArrivalMs: 150, maxFibers: 3, maxLimit: 2 }).map((w) => ({ ...w, jobs: w.jobs.map((j) => ({ ...j, arrivalMs: j.arrivalMs - (j.arrivalMs % 50) })) }))],
    ([base]) =>
      Effect.gen(function* () {
        const prefix = `c${pgCase++}-`
        const w: CrWorkload = { ...base, keys: base.keys.map((k) => ({ ...k, name: prefix + k.name })) }
        const ledger = new Ledger(false)
        const handler = crHandler(w, ledger, (_, ms) => (ms === 0 ? Effect.void : Effect.sleep(ms)))
        const env = Publisher.layer.pipe(
          Layer.provideMerge(Registry.layer({ handlers: [handler] })),
          Layer.provideMerge(Layer.effect(SemaphoreProvider, Effect.map(SemaphoreProvider, (inner) => ledger.provider(inner, w.yields))))
        )
        const ids = yield* Effect.scoped(
          Effect.gen(function* () {
            const p = yield* Publisher.Publisher
            for (let i = 0; i < 2; i++) {
              yield* Worker.make({ addons: [Concurrency.addon], concurrency: w.fibers, pollInterval: "5 millis", cancelCheckInterval: "10 millis" })
            }
            const byArrival = [...w.jobs].sort((a, b) => a.arrivalMs - b.arrivalMs || a.index - b.index)
            const ids: Array<string> = []
            const t0 = Date.now()
            // jobs arriving at one instant are enqueued in one batch (one statement: one created_at)
            for (const at of [...new Set(byArrival.map((j) => j.arrivalMs))]) {
              const batch = byArrival.filter((j) => j.arrivalMs === at)
              const wait = at - (Date.now() - t0)
              if (wait > 0) yield* Effect.sleep(wait)
              const got = yield* p.enqueueMany(CrStep, batch.map((j) => ({ index: j.index, ms: j.durationMs })), (_, i) => crParameters(w.keys[batch[i]!.key]!))
              got.forEach((id, i) => (ids[batch[i]!.index] = id))
            }
            yield* drained(30_000, "5 millis")
            return ids
          })
        ).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
        const store = yield* JobStore
        const jobs = yield* Effect.forEach(w.jobs, (job) =>
          Effect.map(store.get(ids[job.index]!), (d) => {
            const detail = Option.getOrThrow(d)
            return { job, id: ids[job.index]!, state: detail.job.state, logs: detail.logs, createdAt: detail.job.createdAt.getTime() }
          })
        )
        // submission order: (created at, id)
        jobs.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
        const { interrupted, problems, replaced } = checkCancelRunning(w, ledger, jobs)
        seen.postgres.cases++
        seen.postgres.replaced += replaced
        seen.postgres.interrupted += interrupted
        if (problems.length + ledger.problems().length > 0) {
          console.log([...ledger.problems(), ...problems, ...ledger.trace, ...jobs.map((j) => `${j.id}: ${j.state} ${JSON.stringify(j.logs.map((l) => [l.kind, l.message, l.at.toISOString()]))}`)].join("\n"))
        }
        expect([...ledger.problems(), ...problems], JSON.stringify(w)).toEqual([])
      }),
    { fastCheck: { numRuns: Number(process.env.CR_RUNS ?? 8), examples: [[interruptingCase(2_000, 300)]] }, timeout: 300_000 }
  )
})


describe("CancelRunning on PostgreSQL: jobs of one batch", () => {
  // one enqueueMany is one statement: its rows share created_at (microseconds), so submission order among
  // them is their ids
  it.live("a newer job of the same batch replaces the running older one", () => {
    const entered = Deferred.makeUnsafe<void>()
    const handler = Handler.job(CrStep, ({ index }) => (index === 0 ? Effect.andThen(Deferred.succeed(entered, undefined), Effect.never) : Effect.void))
    const env = Publisher.layer.pipe(Layer.provideMerge(Registry.layer({ handlers: [handler] })), Layer.provideMerge(pgShared))
    return Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const [older, newer] = yield* p.enqueueMany(CrStep, [{ index: 0, ms: 0 }, { index: 1, ms: 0 }], JobParameters.make().withMutex("batch-cr", "CancelRunning"))
      yield* Effect.scoped(
        Effect.gen(function* () {
          // one fiber first: the older job is claimed first (same schedule time, smaller id) and holds the key
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis", cancelCheckInterval: "10 millis", gracePeriod: 0 })
          yield* Deferred.await(entered)
          yield* Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "5 millis", cancelCheckInterval: "10 millis", gracePeriod: 0 })
          const a = yield* until(detail(older!), (d) => d.job.state === "Deleted", 10_000)
          expect(a.logs.at(-1)?.message).toBe(cancelText(replacedCause("batch-cr", newer!), { attempt: 1 }))
          yield* until(detail(newer!), (d) => d.job.state === "Succeeded", 10_000)
        })
      )
    }).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
  })
})
