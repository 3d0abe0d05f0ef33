/**
 * Total caps (`total: { group, limit }`) against a model, on generated schedules: two to four keys
 * (limits 1-3) in one or two groups (totals 1-3, a key now and then in none), Skip and Wait jobs with
 * handler durations and arrival offsets, 1-5 worker fibers, and yields before each provider call that
 * shift the fibers' interleaving. The model and its ledger are in `test/support/capModel.ts`:
 *
 * - at no instant more than `limit` handlers of a key, nor more than `total` of a group, inside — and,
 *   on memory, never more than `limit` slots of a key's or a group's pool held (from grant to release);
 * - the gate answers "full" only when the ledger counts every slot of the name held (so a Skip job is
 *   dropped only when its key, or its group, is full);
 * - every job's audit trail is exactly what the model derives from its gate answers, with the exact
 *   texts (`Cancelled — '{key}' full (N slots)`, `Cancelled — group '{g}' full (N slots)`, and the
 *   `Requeued — …` ones); a job whose key was full never asks its group;
 * - every Wait job ends Succeeded after exactly one handler run (the run settles: no Wait job is left
 *   waiting forever); a Skip job Succeeds the same way or ends Deleted without running.
 *
 * 1. Memory store and provider under `TestClock` (`warp-effect/testing`'s `TestRuntime.run`).
 * 2. PostgreSQL store and provider, live clock, two workers sharing the database (fewer cases).
 * 3. The property can fail: the same property with a provider wrapper that grants every group slot
 *    without asking (a total cap that is ignored) is falsified, and fast-check shrinks it to a group
 *    of total 1 with two of its jobs inside at once.
 */
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, Publisher, Registry, Semaphore, SemaphoreProviderMemory, Worker } from "warp-effect"
import { TestRuntime } from "warp-effect/testing"
import { SemaphoreProvider, type SemaphoreProviderService } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { type CapWorkload, capParameters, capWorkload, checkJobs, ignoringGroups, Ledger, totalOf } from "../support/capModel.js"
import { pgModelEnv } from "../support/env.js"
import { drained } from "../support/runtime.js"
import { property } from "./fastCheck.js"

const CapStep = Contract.job("CapStep", Schema.Struct({ index: Schema.Number, ms: Schema.Number }))

/** The handler of one case: counted inside its key and group by the ledger, then `body`. */
const capHandler = (
  w: CapWorkload,
  ledger: Ledger,
  body: (index: number, jobId: string, ms: number) => Effect.Effect<void, unknown>,
  options?: Parameters<typeof Handler.job>[2]
) =>
  Handler.job(CapStep, ({ index, ms }, info) => {
    const key = w.keys[w.jobs[index]!.key]!
    return ledger.hold(info.jobId, key, totalOf(w, key), body(index, info.jobId, ms))
  }, options)

/** What the memory cases exercised (the sound runs only). */
const seen = { cases: 0, groupCancelled: 0, groupRequeued: 0, keyCancelled: 0 }

/** Runs one schedule on the memory runtime under TestClock; returns the model's complaints. */
const runMemory = (
  w: CapWorkload,
  wrap: (inner: SemaphoreProviderService) => SemaphoreProviderService = (p) => p,
  /**
   * Given: the jobs carry no policy at enqueue, the handler declares this one (the workload's one key):
   * the claim's admission, which reads the rows' policies, cannot see the first attempts' keys and
   * groups, so the slots alone stand between them and the cap.
   */
  handlerPolicy?: Parameters<typeof Handler.job>[2]
) =>
  Effect.gen(function* () {
    const ledger = new Ledger(true)
    const run = yield* TestRuntime.run({
      handlers: [capHandler(w, ledger, (_, jobId) => TestRuntime.play(jobId), handlerPolicy)],
      workload: {
        keys: [],
        jobs: w.jobs.map((j) => ({
          index: j.index,
          concurrency: { key: w.keys[j.key]!.name, limit: w.keys[j.key]!.limit, mode: j.mode },
          durationMs: j.durationMs,
          result: "succeed" as const,
          arrivalMs: j.arrivalMs
        }))
      },
      enqueue: (job) =>
        Effect.flatMap(Publisher.Publisher, (p) =>
          handlerPolicy === undefined
            ? p.enqueue(CapStep, { index: job.index, ms: job.durationMs }, capParameters(w, w.jobs[job.index]!))
            : p.enqueue(CapStep, { index: job.index, ms: job.durationMs })
        ),
      worker: { concurrency: w.fibers },
      semaphoreProvider: Layer.effect(SemaphoreProvider, Effect.map(SemaphoreProviderMemory.make, (inner) => ledger.provider(wrap(inner), w.yields))),
      maxVirtualTime: "2 minutes"
    })
    const problems = [...ledger.problems(), ...checkJobs(w, ledger, run.jobs.map((j) => ({ job: w.jobs[j.job.index]!, id: j.id, state: j.state, logs: j.logs })))]
    return { problems, ledger, run }
  })

const memorySchedules = capWorkload({ maxJobs: 8, durationsMs: [0, 5, 10, 20, 30], maxArrivalMs: 40, maxFibers: 5 })

describe("total caps against the model: memory, TestClock", () => {
  afterAll(() => {
    console.log(`total caps model (memory): ${JSON.stringify(seen)}`)
    // the schedules reach the key's full answers. The group's (Skip or Wait) are no longer reached reliably
    // by random enqueue-time schedules: since the claim admits (1.1), a row of a full group is never claimed,
    // so the gate meets a full group only in races (seen in a CI run: 0 of 40 cases); the test below with the
    // policy on the handler (which the claim cannot see) reaches it every time, and the PostgreSQL property
    // runs two workers that race
    if (seen.cases >= 20) expect(seen.keyCancelled > 0).toBe(true)
  })

  property(it.effect,
    "per key and per group never over the cap; full only when full; trails, texts and runs as the model says",
    [memorySchedules],
    ([w]) =>
      Effect.gen(function* () {
        const { problems, run } = yield* runMemory(w)
        seen.cases++
        for (const l of run.jobs.flatMap((j) => j.logs)) {
          if (l.message.startsWith("Cancelled — group ")) seen.groupCancelled++
          if (l.message.startsWith("Requeued — group ")) seen.groupRequeued++
          if (l.message.startsWith("Cancelled — '")) seen.keyCancelled++
        }
        expect(problems, JSON.stringify(w)).toEqual([])
      }),
    { fastCheck: { numRuns: 40 }, timeout: 120_000, testServicesPerCase: true }
  )
})

/** The shrunk counterexample fast-check reported against a provider that ignores group slots (seed 17). */
const ignoredGroupCounterexample: CapWorkload = {
  groups: [{ name: "g0", limit: 1 }],
  keys: [{ name: "k0", limit: 2, group: 0 }],
  jobs: [
    { key: 0, mode: "Wait", durationMs: 0, arrivalMs: 1, index: 0 },
    { key: 0, mode: "Wait", durationMs: 30, arrivalMs: 0, index: 1 }
  ],
  fibers: 2,
  yields: [0]
}

describe("total caps against the model: the property can fail", () => {
  it.live("a provider that ignores group slots falsifies it (fast-check, no shrinking: a few cases)", () =>
    Effect.gen(function* () {
      const result = yield* Effect.promise(() =>
        fc.check(
          fc.asyncProperty(memorySchedules, (w) =>
            Effect.runPromise(
              Effect.map(runMemory(w, ignoringGroups), ({ problems }) => {
                if (problems.length > 0) throw new Error(problems.join("\n"))
              })
            )
          ),
          { numRuns: 60, seed: 17, endOnFailure: true }
        )
      )
      expect(result.failed).toBe(true)
      expect(String(result.errorInstance)).toMatch(/handlers inside 'group:g\d' \(limit \d\)|'warp:concurrency-total:g\d' granted to job \S+ with \d of \d already held/)
    }))

  it.effect("the shrunk counterexample: two jobs of a key of limit 2 in a group of 1 overlap with the wrapper, never without it", () =>
    Effect.gen(function* () {
      // declared on the handler: the claim's admission (which would keep the second job back) cannot see it
      const onHandler = { policy: [Semaphore("k0", 2, { total: { group: "g0", limit: 1 } })] }
      const broken = yield* runMemory(ignoredGroupCounterexample, ignoringGroups, onHandler)
      expect(broken.problems.some((p) => p.startsWith("2 handlers inside 'group:g0' (limit 1)"))).toBe(true)
      const sound = yield* runMemory(ignoredGroupCounterexample, undefined, onHandler)
      expect(sound.problems).toEqual([])
      expect(sound.ledger.maxInside.get("group:g0")).toBe(1)
    }))
})

/** PostgreSQL, live: one database, the store, the provider and admin limits shared by the cases. */
const pgShared = pgModelEnv

let pgCase = 0

layer(pgShared, { excludeTestServices: true, timeout: "60 seconds" })("total caps against the model: PostgreSQL, live", (it) => {
  property(it.effect,
    "two workers on one database: per key and per group never over the cap; full only when full; trails as the model says",
    [capWorkload({ maxJobs: 10, durationsMs: [0, 5, 10, 20], maxArrivalMs: 30, maxFibers: 3, prefix: "" }).map((w) => w)],
    ([base]) =>
      Effect.gen(function* () {
        // each case its own names (the database is shared)
        const prefix = `c${pgCase++}-`
        const w: CapWorkload = {
          ...base,
          groups: base.groups.map((g) => ({ ...g, name: prefix + g.name })),
          keys: base.keys.map((k) => ({ ...k, name: prefix + k.name }))
        }
        const ledger = new Ledger(false)
        const handler = capHandler(w, ledger, (_, __, ms) => (ms === 0 ? Effect.void : Effect.sleep(ms)))
        const env = Publisher.layer.pipe(
          Layer.provideMerge(Registry.layer({ handlers: [handler] })),
          Layer.provideMerge(Layer.effect(SemaphoreProvider, Effect.map(SemaphoreProvider, (inner) => ledger.provider(inner, w.yields))))
        )
        const ids = yield* Effect.scoped(
          Effect.gen(function* () {
            const p = yield* Publisher.Publisher
            for (let i = 0; i < 2; i++) yield* Worker.make({ addons: [Concurrency.addon], concurrency: w.fibers, pollInterval: "5 millis" })
            const byArrival = [...w.jobs].sort((a, b) => a.arrivalMs - b.arrivalMs || a.index - b.index)
            const ids: Array<string> = []
            const t0 = Date.now()
            for (const j of byArrival) {
              const wait = j.arrivalMs - (Date.now() - t0)
              if (wait > 0) yield* Effect.sleep(wait)
              ids[j.index] = yield* p.enqueue(CapStep, { index: j.index, ms: j.durationMs }, capParameters(w, j))
            }
            yield* drained(30_000, "5 millis")
            return ids
          })
        ).pipe(Effect.provide(env), Effect.provideService(References.MinimumLogLevel, "None"))
        const store = yield* JobStore
        const jobs = yield* Effect.forEach(w.jobs, (job) =>
          Effect.map(store.get(ids[job.index]!), (d) => {
            const detail = Option.getOrThrow(d)
            return { job, id: ids[job.index]!, state: detail.job.state, logs: detail.logs }
          })
        )
        const problems = [...ledger.problems(), ...checkJobs(w, ledger, jobs)]
        if (problems.length > 0) console.log([...problems, ...ledger.trace].join("\n"))
        expect(problems, JSON.stringify(w)).toEqual([])
      }),
    { fastCheck: { numRuns: Number(process.env.CAP_RUNS ?? 10) }, timeout: 300_000 }
  )
})
