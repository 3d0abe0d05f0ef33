/**
 * Job priority (issue 42): `JobParameters.withPriority`, a handler's and a contract's `priority`,
 * resolved at publish (enqueue > handler registered in this process > contract > 0) and written on the
 * row; the claim takes higher priorities first; the creation entry says a non-zero priority; a requeue
 * keeps it. On both stores.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { Concurrency, Contract, Handler, Job, JobParameters, Mutex, Publisher, Worker } from "warp-effect"
import * as JobId from "../src/internal/job/JobId.js"
import * as Recurring from "../src/internal/job/Recurring.js"
import * as Scheduler from "../src/internal/publisher/Scheduler.js"
import { JobStore } from "../src/internal/store/JobStore.js"
import { detail, drained, until } from "./support/runtime.js"
import { workerEnvs } from "./support/env.js"
import { stores } from "./support/stores.js"

const Work = Contract.job("PrioWork", Schema.Struct({ i: Schema.Number }))
const Defaulted = Contract.job("PrioDefaulted", Schema.Struct({ i: Schema.Number }), { priority: 3 })
const Declared = Contract.job("PrioDeclared", Schema.Struct({ i: Schema.Number }), { priority: 3 })
const Note = Contract.message("PrioNote", Schema.Struct({ i: Schema.Number }), { priority: -1 })

const priorityOf = (id: string) => Effect.map(detail(id), (d) => d.job.priority)

for (const [name, env] of workerEnvs) {
  describe(`Priority on ${name}`, () => {
    it.live("one lane runs a job enqueued later at a higher priority first; equal priorities keep ScheduleTime order", () => {
      const started: Array<number> = []
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        yield* p.enqueue(Work, { i: 0 })
        yield* p.enqueue(Work, { i: 1 }, JobParameters.make().withPriority(-5))
        yield* p.enqueue(Work, { i: 2 })
        yield* p.enqueue(Work, { i: 3 }, JobParameters.make().withPriority(10))
        yield* Effect.scoped(
          Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "10 millis" }), drained(20_000))
        )
        expect(started).toEqual([3, 0, 2, 1])
      }).pipe(Effect.provide(env([Handler.job(Work, ({ i }) => Effect.sync(() => void started.push(i)))])))
    })

    it.live("a batch: each item's priority from the parameters function, run highest first", () => {
      const started: Array<number> = []
      const priorities = [0, 7, -2, 7, 3, 32767, -32768, 1]
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const ids = yield* p.enqueueMany(
          Work,
          priorities.map((_, i) => ({ i })),
          ({ i }) => JobParameters.make().withPriority(priorities[i]!)
        )
        expect(yield* Effect.forEach(ids, priorityOf)).toEqual(priorities)
        yield* Effect.scoped(
          Effect.andThen(Worker.make({ addons: [Concurrency.addon], concurrency: 1, pollInterval: "10 millis" }), drained(20_000))
        )
        expect(started.map((i) => priorities[i])).toEqual([...priorities].sort((a, b) => b - a))
      }).pipe(Effect.provide(env([Handler.job(Work, ({ i }) => Effect.sync(() => void started.push(i)))])))
    })

    it.live("defaults: the registered handler's over the contract's, the enqueue's over both; publish per child handler", () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        // Declared: handler 7 over contract 3; Defaulted: the contract's 3 (its handler declares none)
        expect(yield* priorityOf(yield* p.enqueue(Declared, { i: 0 }))).toBe(7)
        expect(yield* priorityOf(yield* p.enqueue(Declared, { i: 0 }, JobParameters.make().withPriority(-2)))).toBe(-2)
        expect(yield* priorityOf(yield* p.enqueue(Declared, { i: 0 }, JobParameters.make().withPriority(0)))).toBe(0)
        expect(yield* priorityOf(yield* p.enqueue(Defaulted, { i: 0 }))).toBe(3)
        expect(yield* priorityOf(yield* p.schedule(Defaulted, { i: 0 }, new Date(Date.now() + 3_600_000)))).toBe(3)
        expect(yield* priorityOf(yield* p.enqueue(Work, { i: 0 }))).toBe(0)
        const many = yield* p.scheduleMany(Declared, [{ i: 1 }, { i: 2 }], new Date(Date.now() + 3_600_000), ({ i }) =>
          i === 1 ? JobParameters.make() : JobParameters.make().withPriority(1))
        expect(yield* Effect.forEach(many, priorityOf)).toEqual([7, 1])
        // a message: one child per handler, each with its handler's priority, else the contract's
        const children = yield* p.publish(Note, { i: 0 })
        const byHandler = Object.fromEntries(yield* Effect.forEach(children, (id) => Effect.map(detail(id), (d) => [d.job.handler, d.job.priority] as const)))
        expect(byHandler).toEqual({ urgent: 9, plain: -1 })
        const batch = yield* p.publishMany(Note, [{ i: 1 }, { i: 2 }], ({ i }) => (i === 2 ? JobParameters.make().withPriority(4) : JobParameters.make()))
        expect(yield* Effect.forEach(batch.flat(), priorityOf)).toEqual([9, -1, 4, 4])
      }).pipe(
        Effect.provide(
          env([
            Handler.job(Declared, () => Effect.void, { priority: 7 }),
            Handler.job(Defaulted, () => Effect.void),
            Handler.job(Work, () => Effect.void),
            Handler.message(Note, "urgent", () => Effect.void, { priority: 9 }),
            Handler.message(Note, "plain", () => Effect.void)
            // (workerEnvs' handler list is typed for job handlers; its environments register message handlers alike)
          ] as unknown as ReadonlyArray<Handler.JobHandler<any, any, never>>)
        )
      ))

    it.live("a recurring job's firing gets its handler's priority, else its contract's", () =>
      Effect.gen(function* () {
        const tick = new Date(Date.UTC(2099, 0, 1))
        const fired = (contract: Contract.JobContract<string, { readonly i: number }>, id: string) =>
          Effect.andThen(Scheduler.fire(Recurring.make(id, contract, "0 * * * *", { i: 0 }), tick), priorityOf(Recurring.firingId(id, tick)))
        expect(yield* fired(Declared, "prio-declared")).toBe(7)
        expect(yield* fired(Defaulted, "prio-defaulted")).toBe(3)
      }).pipe(Effect.provide(env([Handler.job(Declared, () => Effect.void, { priority: 7 }), Handler.job(Defaulted, () => Effect.void)]))))

    it.live("the creation entry: the spec's texts at priority 0, ` (priority N)` appended otherwise", () =>
      Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const at = new Date(Date.UTC(2099, 0, 2, 3, 4, 5))
        const entry = (id: string) => Effect.map(detail(id), (d) => d.logs[0]!.message)
        expect(yield* entry(yield* p.enqueue(Work, { i: 0 }))).toBe("Enqueued")
        expect(yield* entry(yield* p.enqueue(Work, { i: 0 }, JobParameters.make().withPriority(5)))).toBe("Enqueued (priority 5)")
        // (the stores spell the time as they did before: the memory store with milliseconds)
        expect(yield* entry(yield* p.schedule(Work, { i: 0 }, at))).toMatch(/^Scheduled for 2099-01-02T03:04:05(\.000)?Z$/)
        expect(yield* entry(yield* p.schedule(Work, { i: 0 }, at, JobParameters.make().withPriority(-3)))).toMatch(/^Scheduled for 2099-01-02T03:04:05(\.000)?Z \(priority -3\)$/)
      }).pipe(Effect.provide(env([Handler.job(Work, () => Effect.void)]))))

    it.live("a Wait requeue keeps the row's priority: the job requeued while its key is full runs later at it", () => {
      const holding = Deferred.makeUnsafe<void>()
      const release = Deferred.makeUnsafe<void>()
      const Keyed = Contract.job("PrioKeyed", Schema.Struct({ i: Schema.Number }), { policy: [Mutex("prio-k", { mode: "Wait" })] })
      return Effect.gen(function* () {
        const p = yield* Publisher.Publisher
        const holder = yield* p.enqueue(Keyed, { i: 0 })
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Worker.make({ addons: [Concurrency.addon], concurrency: 2, pollInterval: "10 millis" })
            yield* Deferred.await(holding)
            const waiter = yield* p.enqueue(Keyed, { i: 1 }, JobParameters.make().withMutex("prio-k", "Wait").withPriority(4))
            const requeued = yield* until(detail(waiter), (d) => d.logs.some((l) => l.kind === "Requeued"))
            expect(requeued.job.priority).toBe(4)
            expect(["Enqueued", "Scheduled", "Processing"]).toContain(requeued.job.state)
            yield* Deferred.succeed(release, undefined)
            yield* drained(20_000)
            const done = yield* detail(waiter)
            expect(done.job.state).toBe("Succeeded")
            expect(done.job.priority).toBe(4)
            expect((yield* detail(holder)).job.priority).toBe(0)
          })
        )
      }).pipe(
        Effect.provide(
          env([
            Handler.job(Keyed, ({ i }) => (i === 0 ? Effect.andThen(Deferred.succeed(holding, undefined), Deferred.await(release)) : Effect.void))
          ])
        )
      )
    })
  })
}

for (const [name, makeLayer] of stores) {
  describe(`Priority in the store: ${name}`, () => {
    it.live("requeues (policy, keeping its place, operator's) and retries leave the priority untouched", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const row: Job.NewJob = {
          id: JobId.make(),
          type: "T",
          handler: null,
          payload: {},
          state: "Enqueued",
          scheduleTime: new Date(Date.now() - 1000),
          metadata: { policies: {} },
          priority: -7
        }
        yield* store.insert([row])
        const lease = Duration.seconds(30)
        const outcomes = [
          Job.Outcome.Requeued({ reason: "Requeued — full" }),
          Job.Outcome.Requeued({ reason: "Requeued — kept", keepsPlace: true }),
          Job.Outcome.Failed({ error: "boom" })
        ]
        for (const outcome of outcomes) {
          const [job] = yield* store.fetch("w", 1, lease)
          expect(job!.id).toBe(row.id)
          expect(job!.priority).toBe(-7)
          expect(yield* store.finalize({ job: job!, workerId: "w", outcome, metadata: job!.metadata })).toBe(true)
          expect((yield* detail(row.id)).job.priority).toBe(-7)
          if (outcome._tag === "Failed") expect((yield* store.operate("retry", [row.id])).changed).toBe(1)
        }
        expect((yield* store.operate("requeue", [row.id])).changed).toBe(1)
        expect((yield* detail(row.id)).job.priority).toBe(-7)
        // a NewJob without a priority is stored at 0
        const plain = { ...row, id: JobId.make() }
        delete (plain as { priority?: number }).priority
        yield* store.insert([plain])
        expect((yield* detail(plain.id)).job.priority).toBe(0)
        expect((yield* detail(plain.id)).logs[0]!.message).toBe("Enqueued")
      }).pipe(Effect.provide(makeLayer())))

    it.live("weighted rows: the class competes by each turn's priority; inside a key, priority decides which row takes the key's turn", () =>
      Effect.gen(function* () {
        const store = yield* JobStore
        const lease = Duration.seconds(30)
        const t = Date.now()
        const row = (priority: number, ago: number, weight?: number): Job.NewJob => ({
          id: JobId.make(),
          type: "T",
          handler: null,
          payload: {},
          state: "Enqueued",
          scheduleTime: new Date(t - ago),
          metadata: weight === undefined ? { policies: {} } : { policies: { concurrency: { source: "enqueue", value: { key: "flow", limit: 100, mode: "Wait", weight } } } },
          priority
        })
        // one weighted key: f1 (tag 1, priority 0), then f2 (tag 2, priority 9); a keyless row at priority 5
        const f1 = row(0, 3000, 1)
        const f2 = row(9, 2000, 1)
        const p = row(5, 1000)
        yield* store.insert([f1])
        yield* store.insert([f2])
        yield* store.insert([p])
        // a claim of 2 considers the key's 2 turns (tags 1, 2: f2 takes the first) and p: f2, then p
        const two = yield* store.fetch("w", 2, lease)
        expect(two.map((j) => j.id)).toEqual([f2.id, p.id])
        // f2 consumed the key's smallest tag; f1, passed over, holds f2's
        expect(two[0]!.fairTag).toBe(1)
        expect((yield* detail(f1.id)).job.fairTag).toBe(2)
        expect((yield* store.fetch("w", 2, lease)).map((j) => j.id)).toEqual([f1.id])
        // a claim of 1 considers the key's one turn, which g2 (priority 9) takes: ahead of the keyless q
        // (priority 5); g1 then holds the key's next turn, at its own priority 0: after q
        const g1 = row(0, 3000, 1)
        const g2 = row(9, 2000, 1)
        const q = row(5, 1000)
        yield* store.insert([g1])
        yield* store.insert([g2])
        yield* store.insert([q])
        const one = yield* Effect.forEach([1, 2, 3], () => Effect.map(store.fetch("w", 1, lease), (got) => got.map((j) => j.id)))
        expect(one.flat()).toEqual([g2.id, q.id, g1.id])
      }).pipe(Effect.provide(makeLayer())))
  })
}

describe("Priority: bad values", () => {
  it("withPriority refuses a non-integer or out-of-range value with InvalidArgument naming priority; the first invalid input wins", () => {
    for (const bad of [1.5, Number.NaN, Infinity, 32768, -32769, "1" as unknown as number]) {
      const e = JobParameters.make().withPriority(bad).error
      expect(e?._tag).toBe("InvalidArgument")
      expect(e).toMatchObject({ entry: "JobParameters.withPriority", argument: "priority" })
      expect(e?.message).toMatch(/^JobParameters\.withPriority: priority must be an integer in \[-32768, 32767\], got /)
    }
    const first = JobParameters.make().withPriority(0.5).withRetry(0)
    expect(first.error?._tag).toBe("InvalidArgument")
    const policyFirst = JobParameters.make().withRetry(0).withPriority(0.5)
    expect(policyFirst.error?._tag).toBe("InvalidPolicy")
    expect(JobParameters.make().withPriority(-32768).withPriority(32767)).toMatchObject({ priority: 32767, error: undefined })
  })

  it("contracts and handlers refuse a bad priority at declaration (InvalidArgument)", () => {
    expect(() => Contract.job("Bad", Schema.Number, { priority: 40_000 })).toThrow(/Contract\.job\(Bad\): priority must be an integer/)
    expect(() => Contract.message("BadM", Schema.Number, { priority: 0.1 })).toThrow(/priority must be an integer/)
    expect(() => Handler.job(Work, () => Effect.void, { priority: Number.NaN })).toThrow(/Handler\.job\(PrioWork\): priority/)
    expect(() => Handler.message(Note, "n", () => Effect.void, { priority: -40_000 })).toThrow(/priority must be an integer/)
    try {
      Contract.job("Bad", Schema.Number, { priority: 1.5 })
    } catch (e) {
      expect((e as { _tag: string })._tag).toBe("InvalidArgument")
    }
  })

  it.effect("enqueue fails with the parameters' InvalidArgument and writes nothing", () =>
    Effect.gen(function* () {
      const p = yield* Publisher.Publisher
      const e = yield* Effect.flip(p.enqueue(Work, { i: 0 }, JobParameters.make().withPriority(1e6)))
      expect(e._tag).toBe("InvalidArgument")
      const b = yield* Effect.flip(p.enqueueMany(Work, [{ i: 0 }, { i: 1 }], ({ i }) => JobParameters.make().withPriority(i === 1 ? 0.5 : 0)))
      expect(b).toMatchObject({ _tag: "InvalidBatchItem", index: 1 })
      const store = yield* JobStore
      expect((yield* store.list({ limit: 10, offset: 0 })).total).toBe(0)
    }).pipe(Effect.provide(workerEnvs[0][1]([Handler.job(Work, () => Effect.void)]))))
})
