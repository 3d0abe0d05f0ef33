/**
 * Outcome properties of the worker + concurrency gate, on random workloads (keys, limits, modes,
 * handler durations, failures), with the memory store and the memory provider.
 *
 * 1. Exact reference model (TestClock). What can a model predict exactly? Everything, once the
 *    run is deterministic: the worker runs ONE fiber, so at most one job holds a slot at a time,
 *    and contention comes from external "blockers" that hold slots of a key during [from, to).
 *    Worker events happen at multiples of 10 ms (poll interval, handler durations and schedule
 *    times are multiples of 10) and blocker events at 5 mod 10, so no two events share an
 *    instant, and TestClock runs them in time order. The gate's decision at each pickup is then a
 *    function of virtual time — free iff the blockers hold fewer than `limit` slots — and a small
 *    simulation of the worker loop (fetch oldest due job by (ScheduleTime, id); run it; a Wait
 *    requeue sets ScheduleTime = now and backs off one poll interval; a Skip drop loops at once;
 *    an empty fetch sleeps one poll interval) predicts every job's audit trail: each entry's kind,
 *    message (the exact "Cancelled — '{key}' full ({N} slots)" / "Requeued — ..." texts) and
 *    virtual timestamp, every handler run's interval, and how many slots each blocker got. The
 *    property compares all of it (so the multiset of outcomes matches a fortiori).
 *
 *    Running a case under TestClock costs real time per wake-up (TestClock yields to the event
 *    loop until every fiber is suspended), not CPU, so the 1,000 cases run as 5 shards of 200
 *    concurrently; each shard is its own fast-check run and prints its seed on failure.
 *
 * 2. Several fibers (live clock). With 2-6 fibers the interleaving at one instant is the runtime's
 *    choice, so the model predicts what does not depend on it, and the test checks it: at most
 *    `limit` handlers of a key inside at any instant; a gate answers "full" only when the key's
 *    slots are all held; Wait-mode and keyless jobs all end Succeeded, or Failed exactly when their
 *    own handler fails, after exactly one handler run; Skip-mode jobs end that way too, or Deleted
 *    with the exact audit text and no handler run; nothing is lost, nothing runs twice; the
 *    stats counters equal the row counts.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import {
  Concurrency,
  Contract,
  Handler,
  Job,
  JobParameters,
  JobStoreMemory,
  Publisher,
  Registry,
  SemaphoreProviderMemory,
  Worker
} from "warp-effect"
import { cancelledText, LOCK_PREFIX, requeuedText } from "../../src/internal/concurrency/ConcurrencyBehavior.js"
import { SemaphoreProvider, type SemaphoreProviderService } from "../../src/internal/semaphore/SemaphoreProvider.js"
import { JobStore } from "../../src/internal/store/JobStore.js"
import { HolderCounter } from "../support/holders.js"
import { drained } from "../support/runtime.js"
import { property } from "./fastCheck.js"

const Step = Contract.job("Step", Schema.Struct({ ms: Schema.Number, fail: Schema.Boolean }))
const FAILURE = "handler said no"

type Mode = "Skip" | "Wait"
interface KeySpec {
  readonly limit: number
  /** Whether blockers use the key (exact model: only Skip-mode jobs go there). */
  readonly blocked: boolean
}
interface JobSpec {
  readonly key: number | null
  readonly mode: Mode
  readonly ms: number
  readonly fail: boolean
}
interface BlockerSpec {
  readonly key: number
  readonly count: number
  readonly from: number
  readonly to: number
}
interface Workload {
  readonly keys: ReadonlyArray<KeySpec>
  readonly jobs: ReadonlyArray<JobSpec>
  readonly blockers: ReadonlyArray<BlockerSpec>
}

const keyName = (k: number) => `key-${k}`
const paramsOf = (keys: ReadonlyArray<{ readonly limit: number }>, j: { readonly key: number | null; readonly mode: Mode }) => {
  if (j.key === null) return JobParameters.make()
  const limit = keys[j.key]!.limit
  return limit === 1 ? JobParameters.make().withMutex(keyName(j.key), j.mode) : JobParameters.make().withSemaphore(keyName(j.key), limit, j.mode)
}

/**
 * Workloads for the exact model. Every job is enqueued at time 0, so the single fiber is never
 * idle while work is pending, and no Wait-mode job ever finds its key full (blockers only use
 * "blocked" keys, which get Skip-mode jobs only): the prediction depends on no polling or
 * contention-backoff choice of the worker loop, only on the gate, the store and the clock.
 * Durations are multiples of 10 ms; blocker i acts at 5 + 0.1 * i mod 10, never at a worker instant.
 */
const exactWorkload: fc.Arbitrary<Workload> = fc
  .array(fc.record({ limit: fc.integer({ min: 1, max: 3 }), blocked: fc.boolean() }), { minLength: 1, maxLength: 3 })
  .chain((keys) => {
    const blocked = keys.flatMap((k, i) => (k.blocked ? [i] : []))
    return fc.record({
      keys: fc.constant(keys),
      jobs: fc.array(
        fc
          .record({
            key: fc.option(fc.integer({ min: 0, max: keys.length - 1 }), { freq: 5, nil: null }),
            mode: fc.constantFrom<Mode>("Skip", "Wait"),
            ms: fc.constantFrom(10, 20, 30),
            fail: fc.integer({ min: 0, max: 4 }).map((n) => n === 0)
          })
          .map((j) => (j.key !== null && keys[j.key]!.blocked ? { ...j, mode: "Skip" as const } : j)),
        { minLength: 1, maxLength: 7 }
      ),
      blockers:
        blocked.length === 0
          ? fc.constant<Array<BlockerSpec>>([])
          : fc.array<BlockerSpec>(
              fc
                .record({
                  key: fc.constantFrom(...blocked),
                  count: fc.integer({ min: 1, max: 3 }),
                  from: fc.constantFrom(5, 15, 25, 35, 55),
                  span: fc.constantFrom(10, 20, 40)
                })
                .map(({ count, from, key, span }) => ({ key, count: Math.min(count, keys[key]!.limit), from, to: from + span })),
              { maxLength: 3 }
            )
    })
  })
  .map((w) => ({ ...w, blockers: w.blockers.map((b, i) => ({ ...b, from: b.from + i / 10, to: b.to + i / 10 })) }))

const WORKER_ID = "model-worker"

interface LogEntry {
  readonly kind: string
  readonly at: number | "claim"
  readonly message: string
}
interface Prediction {
  readonly logs: ReadonlyArray<ReadonlyArray<LogEntry>>
  readonly runs: ReadonlyArray<ReadonlyArray<readonly [number, number]>>
  readonly blockerGot: ReadonlyArray<number>
  readonly states: ReadonlyArray<Job.JobState>
  readonly end: number
}

/** The reference model: one fiber takes the jobs in enqueue order, back to back. */
const predict = (w: Workload): Prediction => {
  const logs: Array<Array<LogEntry>> = w.jobs.map(() => [{ kind: "Enqueued", at: 0, message: "Enqueued" }])
  const runs: Array<Array<readonly [number, number]>> = w.jobs.map(() => [])
  const states: Array<Job.JobState> = w.jobs.map(() => "Enqueued")
  const blockerHeld = w.keys.map(() => 0)
  const jobHeld = w.keys.map(() => 0)
  const blockerGot = w.blockers.map(() => 0)
  const events = w.blockers
    .flatMap((b, i) => [
      { t: b.from, i, acquire: true },
      { t: b.to, i, acquire: false }
    ])
    .sort((a, b) => a.t - b.t)
  let next = 0
  /** Applies the blocker events before `t` (a blocker gets what is free: limit - held). */
  const blockersUntil = (t: number) => {
    while (next < events.length && events[next]!.t < t) {
      const e = events[next++]!
      const b = w.blockers[e.i]!
      if (e.acquire) {
        blockerGot[e.i] = Math.max(0, Math.min(b.count, w.keys[b.key]!.limit - blockerHeld[b.key]! - jobHeld[b.key]!))
        blockerHeld[b.key]! += blockerGot[e.i]!
      } else {
        blockerHeld[b.key]! -= blockerGot[e.i]!
      }
    }
  }
  let t = 0
  for (const [i, j] of w.jobs.entries()) {
    blockersUntil(t)
    logs[i]!.push({ kind: "Processing", at: "claim", message: `Attempt 1 claimed by ${WORKER_ID}` })
    if (j.key !== null && blockerHeld[j.key]! >= w.keys[j.key]!.limit) {
      // only Skip-mode jobs use blocked keys
      states[i] = "Deleted"
      logs[i]!.push({ kind: "Cancelled", at: t, message: cancelledText(keyName(j.key), w.keys[j.key]!.limit) })
      continue
    }
    if (j.key !== null) jobHeld[j.key]!++
    blockersUntil(t + j.ms)
    runs[i]!.push([t, t + j.ms])
    t += j.ms
    if (j.key !== null) jobHeld[j.key]!--
    states[i] = j.fail ? "Failed" : "Succeeded"
    logs[i]!.push(j.fail ? { kind: "Failed", at: t, message: FAILURE } : { kind: "Succeeded", at: t, message: "Succeeded" })
  }
  const end = t
  blockersUntil(Number.POSITIVE_INFINITY)
  return { logs, runs, blockerGot, states, end }
}

const memoryEnv = (handler: Handler.JobHandler<any, any, never>) =>
  Publisher.layer.pipe(
    Layer.provideMerge(Registry.layer({ handlers: [handler] })),
    Layer.provideMerge(Concurrency.layerMemoryLimits),
    Layer.provideMerge(SemaphoreProviderMemory.layer),
    Layer.provideMerge(JobStoreMemory.layer)
  )

/**
 * Lets the fibers just forked (the worker's, the blockers') run up to their first sleep before the clock
 * moves. `TestClock.adjust` runs a fiber it wakes — and every fiber that one forks or resumes — until
 * all are suspended, but gives work started before the call a single scheduler turn (effect 3's yielded
 * to the event loop first); the worker takes 3 turns to reach its first handler's sleep here.
 */
const toFirstSleeps = Effect.repeat(Effect.yieldNow, { times: 20 })

/** Runs a workload on the real worker (one fiber) under TestClock and compares it with the model. */
const runExact = (w: Workload) => {
  const runs = new Map<string, Array<readonly [number, number]>>()
  let base = 0
  const handler = Handler.job(Step, ({ fail, ms }, info) =>
    Effect.gen(function* () {
      const enter = yield* Clock.currentTimeMillis
      yield* Effect.sleep(ms)
      const exit = yield* Clock.currentTimeMillis
      runs.set(info.jobId, [...(runs.get(info.jobId) ?? []), [enter - base, exit - base]])
      if (fail) return yield* Effect.fail(FAILURE)
    })
  )
  const expected = predict(w)
  return Effect.gen(function* () {
    // cases of one shard share a TestClock: each case starts on a whole second, and the model's
    // instants are relative to it
    base = Math.ceil((yield* Clock.currentTimeMillis) / 1000) * 1000 + 1000
    yield* TestClock.setTime(base)
    const p = yield* Publisher.Publisher
    const provider = yield* SemaphoreProvider
    const ids: Array<string> = []
    for (const j of w.jobs) ids.push(yield* p.enqueue(Step, { ms: j.ms, fail: j.fail }, paramsOf(w.keys, j)))
    const blockerGot = w.blockers.map(() => 0)
    yield* Effect.forEach(w.blockers, (b, i) =>
      Effect.forkChild(
        Effect.sleep(b.from).pipe(
          Effect.andThen(
            Effect.scoped(
              Effect.gen(function* () {
                for (let n = 0; n < b.count; n++) {
                  const slot = yield* provider.tryAcquire(LOCK_PREFIX + keyName(b.key), w.keys[b.key]!.limit, 0)
                  if (Option.isSome(slot)) blockerGot[i]!++
                }
                yield* Effect.sleep(b.to - b.from)
              })
            )
          )
        )
      )
    )
    const horizon = Math.max(expected.end, ...w.blockers.map((b) => b.to)) + 1
    yield* Effect.scoped(
      Effect.gen(function* () {
        // the fiber is never idle while work is pending; a long poll interval only saves wake-ups at the end
        yield* Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "1 second", lease: "1 hour", gracePeriod: 0, workerId: WORKER_ID, maxBatch: 1, slotReuse: false })
        yield* toFirstSleeps
        yield* TestClock.adjust(horizon)
      })
    )
    const store = yield* JobStore
    const actual = yield* Effect.forEach(ids, (id) => Effect.map(store.get(id), Option.getOrThrow))
    const context = JSON.stringify(w)
    expect(
      actual.map((d) =>
        d.logs.map((l) => ({
          kind: l.kind,
          // when the worker claims is its own choice (polling, batching); every outcome's instant is not
          at: l.kind === "Processing" ? "claim" : l.at.getTime() - base,
          message: l.kind === "Failed" && l.message.includes(FAILURE) ? FAILURE : l.message
        }))
      ),
      context
    ).toEqual(expected.logs)
    expect(actual.map((d) => d.job.state), context).toEqual(expected.states)
    expect(ids.map((id) => runs.get(id) ?? []), context).toEqual(expected.runs)
    expect(blockerGot, context).toEqual(expected.blockerGot)
  }).pipe(Effect.provide(memoryEnv(handler)))
}

describe.concurrent("outcomes: exact reference model, one fiber under TestClock (5 x 200 cases)", () => {
  for (let shard = 0; shard < 5; shard++) {
    // one TestClock per shard (built once: building test services per case costs more than the case)
    layer(Layer.empty)(`shard ${shard}`, (it) => {
      property(it.effect, "audit trails, states, handler intervals and blocker slots match the model", [exactWorkload], ([w]) => runExact(w), {
        fastCheck: { numRuns: 200 },
        timeout: 120_000
      })
    })
  }
})

/** Workloads for several fibers. */
const liveWorkload = fc
  .array(fc.record({ limit: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 3 })
  .chain((keys) =>
    fc.record({
      keys: fc.constant(keys),
      fibers: fc.integer({ min: 2, max: 6 }),
      failRate: fc.constantFrom(0, 0.1, 0.5),
      jobs: fc.array(
        fc.record({
          key: fc.option(fc.integer({ min: 0, max: keys.length - 1 }), { freq: 5, nil: null }),
          mode: fc.constantFrom<Mode>("Skip", "Wait"),
          ms: fc.constantFrom(0, 0, 1, 2),
          failDraw: fc.double({ min: 0, max: 1, noNaN: true })
        }),
        { minLength: 1, maxLength: 12 }
      )
    })
  )

/** Wraps a provider to check that "full" is only answered when every slot of the name is held. */
const auditedProvider = (inner: SemaphoreProviderService, falseFull: Array<string>): SemaphoreProviderService => {
  const held = new Map<string, number>()
  return {
    tryAcquire: (name, limit, timeout) =>
      Effect.tap(inner.tryAcquire(name, limit, timeout), (slot) =>
        Option.isSome(slot)
          ? Effect.andThen(
              Effect.sync(() => held.set(name, (held.get(name) ?? 0) + 1)),
              Effect.addFinalizer(() => Effect.sync(() => held.set(name, held.get(name)! - 1)))
            )
          : Effect.sync(() => {
              if ((held.get(name) ?? 0) < limit) falseFull.push(`${name}: full with ${held.get(name) ?? 0} of ${limit} held`)
            })
      )
  }
}

const LiveStep = Contract.job("LiveStep", Schema.Struct({ key: Schema.NullOr(Schema.String), ms: Schema.Number, fail: Schema.Boolean }))

/** Polls the memory store (1 ms) until nothing is pending or processing. */
const settled = drained(20_000, "1 millis")

describe("outcomes: several fibers, live clock", () => {
  property(it.live,
    "at most N inside per key; Wait and keyless jobs succeed (or fail by their handler) once; Skip jobs too, or Deleted with the exact text; nothing lost or run twice (1,000 workloads)",
    [liveWorkload],
    ([w]) => {
      const holders = new HolderCounter()
      const entries = new Map<string, number>()
      const falseFull: Array<string> = []
      const handler = Handler.job(LiveStep, ({ fail, key, ms }, info) =>
        Effect.gen(function* () {
          entries.set(info.jobId, (entries.get(info.jobId) ?? 0) + 1)
          const body = ms === 0 ? Effect.yieldNow : Effect.sleep(ms)
          yield* key === null ? body : holders.hold(key, body)
          if (fail) return yield* Effect.fail(FAILURE)
        })
      )
      const jobs = w.jobs.map((j) => ({ ...j, fail: j.failDraw < w.failRate, at: 0 }))
      const env = Publisher.layer.pipe(
        Layer.provideMerge(Registry.layer({ handlers: [handler] })),
        Layer.provideMerge(Concurrency.layerMemoryLimits),
        Layer.provideMerge(Layer.effect(SemaphoreProvider, Effect.map(SemaphoreProviderMemory.make, (inner) => auditedProvider(inner, falseFull)))),
        Layer.provideMerge(JobStoreMemory.layer)
      )
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* Effect.forEach(jobs, (j) =>
          p.enqueue(LiveStep, { key: j.key === null ? null : keyName(j.key), ms: j.ms, fail: j.fail }, paramsOf(w.keys, j))
        )
        yield* Effect.scoped(Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: w.fibers, pollInterval: "1 millis", gracePeriod: "5 seconds" }), settled))
        const store = yield* JobStore
        const context = JSON.stringify(w)
        for (const [i, k] of w.keys.entries()) expect(holders.max.get(keyName(i)) ?? 0, context).toBeLessThanOrEqual(k.limit)
        expect(falseFull, context).toEqual([])

        // the model: what every job must end as, whatever the interleaving
        const outcome = { Succeeded: 0, Failed: 0, Deleted: 0 } as Record<string, number>
        for (const [i, j] of jobs.entries()) {
          const d = Option.getOrThrow(yield* store.get(ids[i]!))
          const ran = entries.get(ids[i]!) ?? 0
          const last = d.logs.at(-1)!
          outcome[d.job.state] = (outcome[d.job.state] ?? 0) + 1
          if (d.job.state === "Deleted") {
            expect(j.mode === "Skip" && j.key !== null, context).toBe(true)
            expect(ran, context).toBe(0)
            expect(last.kind).toBe("Cancelled")
            expect(last.message).toBe(cancelledText(keyName(j.key!), w.keys[j.key!]!.limit))
          } else {
            expect(d.job.state, context).toBe(j.fail ? "Failed" : "Succeeded")
            expect(ran, context).toBe(1)
            if (j.fail) expect(last.message).toContain(FAILURE)
          }
          expect(d.logs.filter((l) => l.kind === "Succeeded" || l.kind === "Failed" || l.kind === "Cancelled").length, context).toBe(1)
          // a Wait-mode job that found its key full was requeued with the exact audit text
          for (const l of d.logs.filter((l) => l.kind === "Requeued")) {
            expect(j.mode === "Wait" && j.key !== null, context).toBe(true)
            expect(l.message).toBe(requeuedText(keyName(j.key!), w.keys[j.key!]!.limit))
          }
        }
        // the multiset: Wait and keyless jobs exactly as the model says; Skip jobs split into ran and dropped
        const mustRun = jobs.filter((j) => j.mode === "Wait" || j.key === null)
        const skip = jobs.filter((j) => j.mode === "Skip" && j.key !== null)
        expect(outcome.Deleted! + outcome.Succeeded! + outcome.Failed!).toBe(jobs.length)
        expect(outcome.Deleted!).toBeLessThanOrEqual(skip.length)
        expect(outcome.Succeeded!).toBeGreaterThanOrEqual(mustRun.filter((j) => !j.fail).length)
        expect(outcome.Failed!).toBeGreaterThanOrEqual(mustRun.filter((j) => j.fail).length)
        const counters = yield* store.counters
        expect(counters.get("stats:succeeded") ?? 0).toBe(outcome.Succeeded)
        expect(counters.get("stats:failed") ?? 0).toBe(outcome.Failed)
        expect(counters.get("stats:deleted") ?? 0).toBe(outcome.Deleted)
      }).pipe(Effect.provide(env))
    },
    { fastCheck: { numRuns: 1000 }, timeout: 120_000 }
  )
})
