/**
 * Retention: finished rows expire by state (age, count per job type, a contract's override), go in
 * batches with their audit trail, leave a tombstone that `get` answers with `JobExpired`, and neither the
 * counters nor the per-key figures drop when they go. Both stores: the memory store under `TestClock`
 * (ages by adjusting it), PostgreSQL with its rows' finish times moved back (ages by SQL).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestClock from "effect/testing/TestClock"
import { Contract, Handler, Job, JobStoreMemory, JobStorePg, Publisher, Registry, Retention, Worker } from "warp-effect"
import * as JobId from "../src/internal/job/JobId.js"
import { defaultPlans, historyBucket, type Resolved } from "../src/internal/job/Retention.js"
import { JobStore, type JobStoreService } from "../src/internal/store/JobStore.js"
import * as Pruner from "../src/internal/worker/Pruner.js"
import { rollUpCounters } from "../src/internal/store/pg/counters.js"
import { guard } from "../src/internal/store/pg/prune.js"
import pg from "pg"
import { freshPgLayer, serverUrl } from "./support/db.js"

const lease = Duration.seconds(30)
const DAY = 86_400_000

const newJob = (type: string, key?: string): Job.NewJob => ({
  id: JobId.make(),
  type,
  handler: null,
  payload: {},
  state: "Enqueued",
  scheduleTime: new Date(0),
  metadata: key === undefined ? { policies: {} } : { policies: { concurrency: { source: "enqueue", value: { key, limit: 1, mode: "Wait" } } } }
})

/** Inserts `n` jobs of `type` and ends each with `outcome` (a Requeued first when `requeueFirst`); their ids. */
const finished = (type: string, n: number, outcome: Job.Outcome, options: { readonly key?: string; readonly requeueFirst?: boolean } = {}) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const rows = Array.from({ length: n }, () => newJob(type, options.key))
    yield* store.insert(rows)
    const ids = new Set(rows.map((r) => r.id))
    const run = (o: Job.Outcome) =>
      Effect.gen(function* () {
        let left = ids.size
        while (left > 0) {
          const got = (yield* store.fetch("w", left, lease)).filter((j) => ids.has(j.id))
          expect(got.length).toBeGreaterThan(0)
          for (const j of got) expect(yield* store.finalize({ job: j, workerId: "w", outcome: o, metadata: j.metadata })).toBe(true)
          left -= got.length
        }
      })
    if (options.requeueFirst === true) yield* run(Job.Outcome.Requeued({ reason: "Requeued — key full" }))
    yield* run(outcome)
    return rows.map((r) => r.id)
  })

const plan = (over: { readonly options?: Retention.RetentionOptions; readonly overrides?: ReadonlyArray<readonly [string, Retention.RetentionOverride]> } = {}) =>
  Result.getOrThrow(Retention.resolve(over.options ?? {}, over.overrides ?? [])).plan

/** The rows of each job (by id) that still exist, and what `get` answers for the others. */
const lookup = (id: string) =>
  Effect.flatMap(JobStore, (store) =>
    store.get(id).pipe(
      Effect.map((d) => (Option.isSome(d) ? ("row" as const) : ("none" as const))),
      Effect.catchTag("JobExpired", (e) => Effect.succeed(e))
    )
  )

const pruneAll = (p: Retention.RetentionPlan) =>
  Effect.gen(function* () {
    const store = yield* JobStore
    const out = { Succeeded: 0, Failed: 0, Deleted: 0, batches: 0 }
    while (true) {
      const r = yield* store.prune(p)
      expect(r.ran).toBe(true)
      out.batches++
      out.Succeeded += r.pruned.Succeeded
      out.Failed += r.pruned.Failed
      out.Deleted += r.pruned.Deleted
      if (!r.full) return out
    }
  })

interface Env {
  readonly name: string
  readonly layer: () => Layer.Layer<JobStore, unknown>
  /** Makes every finished row (and audit entry) `ms` older. */
  readonly age: (ms: number) => Effect.Effect<void, unknown, any>
  /** Folds counted entries into the counters (PostgreSQL: the roll-up; memory: nothing to do). */
  readonly settle: Effect.Effect<void, unknown, any>
  readonly test: typeof it.effect
}

const pgLayer = () => Layer.provideMerge(JobStorePg.layerWith({ counterRollUp: "1 day" }), freshPgLayer())

const envs: ReadonlyArray<Env> = [
  {
    name: "memory (TestClock)",
    layer: () => JobStoreMemory.layer,
    age: (ms) => TestClock.adjust(Duration.millis(ms)),
    settle: Effect.void,
    test: it.effect
  },
  {
    name: "postgres",
    layer: pgLayer as () => Layer.Layer<JobStore, unknown>,
    age: (ms) =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE warp_jobs SET updated_at = updated_at - ${ms} * interval '1 millisecond' WHERE state IN ('Succeeded','Failed','Deleted')`
        yield* sql`UPDATE warp_job_logs SET at = at - ${ms} * interval '1 millisecond'`
      }),
    settle: Effect.flatMap(SqlClient.SqlClient, (sql) => rollUpCounters(sql)).pipe(Effect.asVoid),
    test: it.live
  }
]

for (const env of envs) {
  const run = <A, E>(self: Effect.Effect<A, E, any>) => Effect.provide(self, env.layer()) as Effect.Effect<A, unknown>

  describe(`Retention: ${env.name}`, () => {
    env.test("by age per state: expired rows go with their trail, leave a tombstone (get fails JobExpired), counters stay", () =>
      run(
        Effect.gen(function* () {
          const store = yield* JobStore
          const ok = yield* finished("T", 3, Job.Outcome.Succeeded())
          const failed = yield* finished("T", 2, Job.Outcome.Failed({ error: "boom" }))
          const deleted = yield* finished("T", 1, Job.Outcome.Deleted({ reason: "Cancelled — by an operator" }))
          yield* env.settle
          const before = yield* store.counters
          // two days later: Succeeded and Deleted (1 day) expired, Failed (7 days) kept
          yield* env.age(2 * DAY)
          expect(yield* store.expiredBacklog(plan(), 1000)).toBe(4)
          const pruned = yield* pruneAll(plan())
          expect(pruned).toMatchObject({ Succeeded: 3, Failed: 0, Deleted: 1 })
          expect(yield* store.expiredBacklog(plan(), 1000)).toBe(0)
          for (const id of failed) expect(yield* lookup(id)).toBe("row")
          for (const id of [...ok, ...deleted]) {
            const e = yield* lookup(id)
            expect(e).toBeInstanceOf(Retention.JobExpired)
            const x = e as Retention.JobExpired
            expect(x.id).toBe(id)
            expect(x.type).toBe("T")
            expect(x.state).toBe(ok.includes(id) ? "Succeeded" : "Deleted")
            expect(x.prunedAt.getTime()).toBeGreaterThan(x.finishedAt.getTime())
            expect(x.message).toContain("expired")
          }
          expect(yield* lookup(JobId.make())).toBe("none")
          expect(yield* store.counters).toEqual(before)
          expect((yield* store.countByState).Succeeded).toBe(0)
          // eight days: Failed goes too
          yield* env.age(6 * DAY)
          expect(yield* pruneAll(plan())).toMatchObject({ Failed: 2 })
          expect(yield* store.counters).toEqual(before)
        })
      ))

    env.test("in batches of batchSize; maxCount per job type; a contract's override for its type; deleteOnSuccess", () =>
      run(
        Effect.gen(function* () {
          const store = yield* JobStore
          // A's five end one second apart (a count limit orders rows by their finish time)
          for (let i = 0; i < 5; i++) {
            yield* finished("A", 1, Job.Outcome.Succeeded())
            yield* env.age(1000)
          }
          const keep = yield* finished("B", 4, Job.Outcome.Succeeded())
          yield* env.age(1000)
          yield* env.settle
          // nothing is a day old; A keeps its newest 2 (count), B has deleteOnSuccess (override)
          const p = plan({
            options: { succeeded: { maxCount: 2 }, batchSize: 2 },
            overrides: [["B", { deleteOnSuccess: true }]]
          })
          const first = yield* store.prune(p)
          expect(first.ran && first.full).toBe(true)
          expect(first.pruned.Succeeded).toBe(2)
          const rest = yield* pruneAll(p)
          expect(rest.Succeeded).toBe(5)
          const left = yield* store.list({ limit: 100, offset: 0 })
          expect(left.rows.map((j) => j.type)).toEqual(["A", "A"])
          for (const id of keep) expect(yield* lookup(id)).toBeInstanceOf(Retention.JobExpired)
          // an override of one state leaves the others as the worker sets them (B's Failed rows: 7 days)
          yield* finished("B", 1, Job.Outcome.Failed({ error: "x" }))
          yield* env.age(2 * DAY)
          yield* env.settle
          expect((yield* pruneAll(p)).Failed).toBe(0)
        })
      ))

    env.test("tombstones expire after `tombstones`, then the id is not found", () =>
      run(
        Effect.gen(function* () {
          const ids = yield* finished("T", 3, Job.Outcome.Succeeded())
          yield* env.age(2 * DAY)
          yield* env.settle
          const p = plan({ options: { tombstones: "1 hour" } })
          yield* pruneAll(p)
          for (const id of ids) expect(yield* lookup(id)).toBeInstanceOf(Retention.JobExpired)
          if (env.name === "postgres") {
            const sql = yield* SqlClient.SqlClient
            yield* sql`UPDATE warp_job_tombstones SET pruned_at = pruned_at - interval '2 hours'`
          } else yield* env.age(2 * 3600_000)
          const r = yield* (yield* JobStore).prune(p)
          expect(r.tombstones).toBe(3)
          for (const id of ids) expect(yield* lookup(id)).toBe("none")
          // tombstones: 0 keeps none
          const more = yield* finished("T", 1, Job.Outcome.Succeeded())
          yield* env.age(2 * DAY)
          yield* env.settle
          yield* pruneAll(plan({ options: { tombstones: 0 } }))
          expect(yield* lookup(more[0]!)).toBe("none")
        })
      ))

    env.test("the per-key figures (succeeded, deleted, requeued over 5m/1h/24h) do not drop when rows go", () =>
      run(
        Effect.gen(function* () {
          const store = yield* JobStore
          yield* finished("K", 3, Job.Outcome.Succeeded(), { key: "acct:1", requeueFirst: true })
          yield* finished("K", 2, Job.Outcome.Deleted({ reason: "Cancelled — key full" }), { key: "acct:1" })
          // a live job keeps the key on the live view
          yield* store.insert([{ ...newJob("K", "acct:1"), scheduleTime: new Date(Date.now() + DAY) }])
          yield* env.age(10 * 60_000)
          yield* env.settle
          const figures = Effect.map(store.insight.line("acct:1", { override: null, id: "none" }), (l) => l.summary.windows)
          const before = yield* figures
          expect(before["1h"]).toEqual({ requeued: 3, succeeded: 3, deleted: 2 })
          expect(before["5m"]).toEqual({ requeued: 0, succeeded: 0, deleted: 0 })
          const pruned = yield* pruneAll(plan({ options: { succeeded: { maxAge: "1 minute" }, deleted: { maxAge: "1 minute" } } }))
          expect(pruned.Succeeded + pruned.Deleted).toBe(5)
          expect(yield* figures).toEqual(before)
          const page = yield* store.insight.liveKeys({ overrides: [], limit: 10, offset: 0 })
          expect(page.rows[0]!.windows).toEqual(before)
        })
      ))
  })
}

describe("Retention: postgres only", () => {
  it.live("a row whose counted entry is not rolled up yet is kept until it is (counters never drop)", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      yield* finished("T", 2, Job.Outcome.Succeeded())
      const before = yield* store.counters
      expect(before.get("stats:succeeded")).toBe(2)
      const p = plan({ options: { succeeded: { maxAge: 0 } } })
      expect((yield* store.prune(p)).pruned.Succeeded).toBe(0)
      const sql = yield* SqlClient.SqlClient
      yield* rollUpCounters(sql)
      expect((yield* store.prune(p)).pruned.Succeeded).toBe(2)
      expect(yield* store.counters).toEqual(before)
      // the audit trail went with the rows
      expect(Number((yield* sql`SELECT count(*)::int AS n FROM warp_job_logs`)[0]!.n)).toBe(0)
    }).pipe(Effect.provide(pgLayer())))

  it.live("one process at a time: a prune that finds the retention guard taken does nothing", () =>
    Effect.gen(function* () {
      const store = yield* JobStore
      const sql = yield* SqlClient.SqlClient
      yield* finished("T", 2, Job.Outcome.Succeeded())
      yield* rollUpCounters(sql)
      const p = plan({ options: { succeeded: { maxAge: 0 } } })
      // another session (another process) holds the guard for the length of its transaction
      const db = String((yield* sql`SELECT current_database() AS d`)[0]!.d)
      const url = new URL(serverUrl())
      url.pathname = `/${db}`
      const other = new pg.Client({ connectionString: url.toString() })
      yield* Effect.acquireRelease(
        Effect.promise(async () => {
          await other.connect()
          await other.query("BEGIN")
          await other.query("SELECT pg_advisory_xact_lock($1, $2)", [guard[0], guard[1]])
        }),
        () => Effect.promise(() => other.query("ROLLBACK").then(() => other.end()))
      )
      const held = yield* store.prune(p)
      yield* Effect.promise(() => other.query("ROLLBACK"))
      expect(held.ran).toBe(false)
      expect(held.pruned.Succeeded).toBe(0)
      const after = yield* store.prune(p)
      expect(after.ran).toBe(true)
      expect(after.pruned.Succeeded).toBe(2)
    }).pipe(Effect.scoped, Effect.provide(pgLayer())))
})

const Sent = Contract.job("RetentionSent", Schema.Struct({ n: Schema.Number }))
const Kept = Contract.job("RetentionKept", Schema.Struct({ n: Schema.Number }), { retention: { succeeded: { maxAge: "1 hour" } } })

describe("Retention: the worker's pruner (memory store, TestClock)", () => {
  it.effect("prunes on its interval with the worker's plan and the contracts' overrides", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher.Publisher
      const store = yield* JobStore
      const a = yield* publisher.enqueue(Sent, { n: 1 })
      const b = yield* publisher.enqueue(Kept, { n: 2 })
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Worker.make({ pollInterval: "1 second", retention: { succeeded: { maxAge: "1 minute" }, interval: "10 seconds" } })
          // the jobs run
          for (let i = 0; i < 3; i++) yield* TestClock.adjust("1 second")
          expect(Option.getOrThrow(yield* store.get(a)).job.state).toBe("Succeeded")
          expect(Option.getOrThrow(yield* store.get(b)).job.state).toBe("Succeeded")
          // two minutes on: the pruner ran; Sent's job expired, Kept's (1 hour) did not
          for (let i = 0; i < 12; i++) yield* TestClock.adjust("10 seconds")
          expect(yield* lookup(a)).toBeInstanceOf(Retention.JobExpired)
          expect(yield* lookup(b)).toBe("row")
          for (let i = 0; i < 6; i++) yield* TestClock.adjust("10 minutes")
          expect(yield* lookup(b)).toBeInstanceOf(Retention.JobExpired)
          expect((yield* store.counters).get("stats:succeeded")).toBe(2)
        })
      )
    }).pipe(
      Effect.provide(
        Publisher.layer.pipe(
          Layer.provideMerge(Registry.layer({ handlers: [Handler.job(Sent, () => Effect.void), Handler.job(Kept, () => Effect.void)] })),
          Layer.provideMerge(JobStoreMemory.layer)
        )
      )
    ))

  it.effect("a run that stops on its time with expired rows left is followed by another at once, not after an interval", () =>
    Effect.gen(function* () {
      // a store whose batches take 400 ms each (virtual time): 9 full batches, then a short one
      let calls = 0
      const store = {
        prune: () =>
          Effect.sleep("400 millis").pipe(
            Effect.map(() => {
              calls++
              return { ran: true, pruned: { Succeeded: calls < 10 ? 500 : 1, Failed: 0, Deleted: 0 }, tombstones: 0, full: calls < 10 }
            })
          ),
        expiredBacklog: () => Effect.succeed(0)
      } as unknown as JobStoreService
      const resolved = { plan: { defaults: defaultPlans, overrides: new Map(), batchSize: 500, tombstoneMs: 0, deleteOnSuccess: false }, intervalMs: 1000 } as unknown as Resolved
      yield* Effect.forkScoped(Pruner.loop(store, resolved))
      // t = 1 s: the first run; each run stops after 1 s of batches (3 of them), and the next starts at once:
      // the 10th batch ends at t = 5 s (an interval's sleep between runs would have made it t = 7.6 s)
      yield* TestClock.adjust("5 seconds")
      expect(calls).toBe(10)
      // the backlog is drained: the next run comes one interval later
      yield* TestClock.adjust("900 millis")
      expect(calls).toBe(10)
      yield* TestClock.adjust("600 millis")
      expect(calls).toBe(11)
    }).pipe(Effect.scoped))

  it.effect("a setting that cannot be honoured fails the worker's build (InvalidArgument) or the contract's declaration", () =>
    Effect.gen(function* () {
      const bad = (retention: unknown) =>
        Effect.exit(Effect.scoped(Worker.make({ retention: retention as Retention.RetentionOptions })))
      for (const r of [{ succeeded: { maxAge: -1 } }, { failed: { maxCount: 1.5 } }, { batchSize: 0 }, { interval: 0 }, { deleteOnSuccess: "yes" }]) {
        const exit = yield* bad(r)
        expect(Exit.isFailure(exit)).toBe(true)
        const error = Exit.isFailure(exit) ? exit.cause.reasons.find((x) => x._tag === "Fail")?.error : undefined
        expect((error as any)?._tag).toBe("InvalidArgument")
        expect((error as any)?.message).toContain("Worker.make retention")
      }
      expect(() => Contract.job("Bad", Schema.Struct({}), { retention: { deleted: { maxAge: "soon" as any } } })).toThrow(/deleted.maxAge must be a duration/)
    }).pipe(Effect.provide(Layer.mergeAll(Registry.layer({ handlers: [Handler.job(Sent, () => Effect.void)] }), JobStoreMemory.layer))))
})

describe("Retention: the per-key history's buckets", () => {
  it("an event's bucket is never before it (a window that holds the event counts it), at most a second (last 5 minutes) or a minute later", () => {
    const now = 10 * 86_400_000 + 12_345
    for (const ago of [0, 1, 999, 1000, 299_999, 300_000, 300_001, 3_599_999, 86_399_999]) {
      const at = now - ago
      const b = historyBucket(at, now)
      expect(b).toBeGreaterThan(at)
      expect(b - at).toBeLessThanOrEqual(ago <= 300_000 ? 1000 : 60_000)
    }
  })
})
