/**
 * The test kit (`warp-effect/testing`): generated workloads run through the deterministic runtime.
 *
 * - Reference model, Mutex Skip vs Wait: k jobs of one Mutex key arrive together at a worker with
 *   at least k fibers, each handler longer than a poll interval. Skip: exactly one runs, the other
 *   k - 1 end Deleted with the exact audit text and never run. Wait: all k run, one at a time, and
 *   every job but the first is requeued with the exact text at least once.
 * - Invariants on any workload (keys, limits, modes, durations, results, arrivals, 1-4 fibers).
 * - Same workload, same result.
 * - A broken policy (the enqueue declares one slot more than the workload) is caught by the
 *   property, and the correct one passes the same check.
 * - A handler that never ends fails the run with `NotSettled`.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Contract, Handler, JobParameters, Publisher, Retry } from "warp-effect"
import { TestRuntime, Workload } from "warp-effect/testing"
import { cancelledText, requeuedText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { property as effectProperty } from "../properties/fastCheck.js"

const Step = Contract.job("Step", Schema.Struct({ index: Schema.Number }))
const step = Handler.job(Step, (_, attempt) => TestRuntime.play(attempt.jobId))
const enqueue = TestRuntime.enqueueWith(Step, (job) => ({ index: job.index }))

/** k jobs of one Mutex key, all at time 0, each longer than the 10 ms poll interval. */
const mutexBurst = (mode: Workload.Mode) =>
  fc.record({ k: fc.integer({ min: 1, max: 4 }), durations: fc.array(fc.constantFrom(20, 30, 50), { minLength: 4, maxLength: 4 }) }).map(
    ({ durations, k }): Workload.Workload => {
      const key = { key: "key-0", limit: 1, mode }
      return {
        keys: [key],
        jobs: Array.from({ length: k }, (_, index) => ({ index, concurrency: key, durationMs: durations[index]!, result: "succeed" as const, arrivalMs: 0 }))
      }
    }
  )

describe("TestRuntime: reference model for Mutex Skip vs Wait", () => {
  effectProperty(
    it.effect,
    "Skip: one runs, the rest end Deleted with the exact text and never run",
    [mutexBurst("Skip")],
    ([w]) =>
      Effect.gen(function* () {
        const run = yield* TestRuntime.run({ handlers: [step], workload: w, enqueue, worker: { concurrency: 4 } })
        const k = w.jobs.length
        expect(run.tally).toEqual({ Succeeded: 1, Failed: 0, Deleted: k - 1, Requeued: 0 })
        expect(run.states.Succeeded).toBe(1)
        expect(run.states.Deleted).toBe(k - 1)
        for (const j of run.jobs) {
          if (j.state === "Deleted") {
            expect(j.runs).toBe(0)
            expect(j.outcomes.map((o) => o._tag === "Deleted" && o.reason)).toEqual([cancelledText("key-0", 1)])
          } else {
            expect(j.runs).toBe(1)
          }
        }
        expect(run.maxInside.get("key-0")).toBe(1)
        expect(run.maxHolders.get("key-0")).toBe(1)
      }),
    { fastCheck: { numRuns: 15 } }
  )

  effectProperty(
    it.effect,
    "Wait: all run once, one at a time, every job but the first requeued with the exact text",
    [mutexBurst("Wait")],
    ([w]) =>
      Effect.gen(function* () {
        const run = yield* TestRuntime.run({ handlers: [step], workload: w, enqueue, worker: { concurrency: 4 } })
        const k = w.jobs.length
        expect(run.states.Succeeded).toBe(k)
        expect(run.tally.Succeeded).toBe(k)
        expect(run.tally.Deleted).toBe(0)
        expect(run.jobs.map((j) => j.runs)).toEqual(w.jobs.map(() => 1))
        expect(run.jobs.filter((j) => j.outcomes.some((o) => o._tag === "Requeued")).length).toBe(k - 1)
        for (const j of run.jobs) {
          for (const o of j.outcomes) if (o._tag === "Requeued") expect(o.reason).toBe(requeuedText("key-0", 1))
        }
        expect(run.maxInside.get("key-0")).toBe(1)
        // one at a time: the run lasts at least the sum of the durations
        expect(run.elapsedMs).toBeGreaterThanOrEqual(w.jobs.reduce((s, j) => s + j.durationMs, 0))
      }),
    { fastCheck: { numRuns: 15 } }
  )
})

describe("TestRuntime: any workload", () => {
  effectProperty(
    it.effect,
    "at most N inside per key; Deleted only for Skip keys and never run; others run once and end by their result; the tally matches",
    [Workload.arbitrary({ maxJobs: 8 }), fc.integer({ min: 1, max: 4 })],
    ([w, fibers]) =>
      Effect.gen(function* () {
        const run = yield* TestRuntime.run({ handlers: [step], workload: w, enqueue, worker: { concurrency: fibers } })
        for (const k of w.keys) {
          expect(run.maxInside.get(k.key) ?? 0).toBeLessThanOrEqual(k.limit)
          expect(run.maxHolders.get(k.key) ?? 0).toBeLessThanOrEqual(k.limit)
        }
        const tally = { Succeeded: 0, Failed: 0, Deleted: 0, Requeued: 0 }
        for (const j of run.jobs) {
          for (const o of j.outcomes) tally[o._tag]++
          const c = j.job.concurrency
          if (j.state === "Deleted") {
            expect(c?.mode).toBe("Skip")
            expect(j.runs).toBe(0)
            expect(j.logs.at(-1)?.message).toBe(cancelledText(c!.key, c!.limit))
          } else {
            expect(j.runs).toBe(1)
            expect(j.state).toBe(j.job.result === "succeed" ? "Succeeded" : "Failed")
          }
          for (const o of j.outcomes) if (o._tag === "Requeued") expect(o.reason).toBe(requeuedText(c!.key, c!.limit))
        }
        expect(run.tally).toEqual(tally)
        expect(run.jobs.length).toBe(w.jobs.length)
      }),
    { fastCheck: { numRuns: 25 } }
  )

  effectProperty(
    it.effect,
    "same workload, same result",
    [Workload.arbitrary({ maxJobs: 6 })],
    ([w]) =>
      Effect.gen(function* () {
        const summary = (r: TestRuntime.RunResult) => ({
          jobs: r.jobs.map((j) => ({ state: j.state, outcomes: j.outcomes.map((o) => o._tag), runs: j.runs, at: j.logs.map((l) => [l.kind, l.at.getTime()]) })),
          elapsed: r.elapsedMs,
          inside: [...r.maxInside]
        })
        const a = yield* TestRuntime.run({ handlers: [step], workload: w, enqueue })
        const b = yield* TestRuntime.run({ handlers: [step], workload: w, enqueue })
        expect(summary(b)).toEqual(summary(a))
      }),
    { fastCheck: { numRuns: 10 } }
  )
})

describe("TestRuntime: catching a broken policy", () => {
  /** The user's property: no key ever has more handlers inside than the workload declares. */
  const property = (declared: (job: Workload.WorkloadJob) => JobParameters.JobParameters) =>
    fc.asyncProperty(Workload.arbitrary({ maxKeys: 2, maxLimit: 2, modes: ["Wait"], keyless: false, minJobs: 2, maxJobs: 6, maxArrivalMs: 20 }), (w) =>
      Effect.runPromise(
        Effect.gen(function* () {
          const run = yield* TestRuntime.run({
            handlers: [step],
            workload: w,
            enqueue: (job) => Effect.flatMap(Publisher.Publisher, (p) => p.enqueue(Step, { index: job.index }, declared(job))),
            worker: { concurrency: 4 }
          })
          return w.keys.every((k) => (run.maxInside.get(k.key) ?? 0) <= k.limit)
        })
      )
    )

  it.live("the kit finds a counterexample when the enqueue declares one slot too many", () =>
    Effect.gen(function* () {
      const broken = (job: Workload.WorkloadJob) => JobParameters.make().withSemaphore(job.concurrency!.key, job.concurrency!.limit + 1)
      const result = yield* Effect.promise(() => fc.check(property(broken), { numRuns: 30, seed: 42 }))
      expect(result.failed).toBe(true)
      const [w] = result.counterexample!
      // the shrunk counterexample: two jobs of one key, overlapping
      expect(w.jobs.length).toBe(2)
      expect(w.jobs[0]!.concurrency!.key).toBe(w.jobs[1]!.concurrency!.key)
    }))

  it.live("and passes the same check with the declared policy", () =>
    Effect.gen(function* () {
      const result = yield* Effect.promise(() => fc.check(property(Workload.parameters), { numRuns: 30, seed: 42 }))
      expect(result.failed, String(result.counterexample)).toBe(false)
    }))
})

describe("TestRuntime: retries in virtual time", () => {
  const Flaky = Contract.job("Flaky", Schema.Struct({}), { policy: [Retry(3, { initialDelay: "100 millis" })] })
  const flaky = Handler.job(Flaky, (_, attempt) => TestRuntime.play(attempt.jobId))

  it.effect("a failing job is retried after its backoffs, then ends Failed; each attempt's outcome is reported", () =>
    Effect.gen(function* () {
      const run = yield* TestRuntime.run({
        handlers: [flaky],
        workload: { keys: [], jobs: [{ index: 0, concurrency: null, durationMs: 10, result: "fail", arrivalMs: 0 }] },
        enqueue: TestRuntime.enqueueWith(Flaky, () => ({}))
      })
      const [job] = run.jobs
      expect(job!.state).toBe("Failed")
      expect(job!.runs).toBe(3)
      expect(job!.outcomes.map((o) => o._tag)).toEqual(["Requeued", "Requeued", "Failed"])
      expect(job!.outcomes[0]!._tag === "Requeued" && job!.outcomes[0]!.reason).toMatch(/^Retry 2\/3 in /)
      expect(run.tally).toEqual({ Succeeded: 0, Failed: 1, Deleted: 0, Requeued: 2 })
      // three runs of 10 ms and two backoffs of at least 100 and 200 ms
      expect(run.elapsedMs).toBeGreaterThanOrEqual(330)
    }))
})

describe("TestRuntime: a run that does not settle", () => {
  const Stuck = Contract.job("Stuck", Schema.Struct({}))
  const stuck = Handler.job(Stuck, () => Effect.never)

  it.effect("fails with NotSettled once the virtual time budget is spent", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        TestRuntime.run({
          handlers: [stuck],
          workload: { keys: [], jobs: [{ index: 0, concurrency: null, durationMs: 0, result: "succeed", arrivalMs: 0 }] },
          enqueue: TestRuntime.enqueueWith(Stuck, () => ({})),
          maxVirtualTime: "1 second"
        })
      )
      expect(error._tag).toBe("NotSettled")
      if (error._tag === "NotSettled") {
        expect(error.counts.Processing).toBe(1)
        expect(error.afterMs).toBe(1000)
      }
    }))
})
